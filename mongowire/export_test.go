package mongowire

import (
	"github.com/tide-cdc/tide/internal/faultfs"
	"github.com/tide-cdc/tide/mongowire/internal/store"
)

// Seams for the package's external tests (package mongowire_test); they
// are not part of the public API, whose users cannot name these types.

// Store returns the document store the server serves.
func (s *Server) Store() *store.Store { return s.rawStore }

// NewOnFS is New with the files of DataDir written through fsys, so that
// a test can cut the power under the server.
func NewOnFS(cfg Config, fsys faultfs.FS) *Server {
	s := New(cfg)
	s.fs = fsys
	return s
}
