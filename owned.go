package tide

import (
	"errors"

	"github.com/tide-cdc/tide/cdc"
)

// own returns src with a Close that, after closing src, calls release:
// the pipeline closes its source when Run returns, so that is when the
// embedded server stops and the data directory's lock is released. The
// runtime closes the sink right after; everything was committed before.
// The wrapper keeps the optional interfaces the runtime looks for
// (cdc.Acker, cdc.Identifier).
func own(src cdc.Source, release func() error) cdc.Source {
	o := ownedSource{Source: src, release: release}
	a, isAcker := src.(cdc.Acker)
	id, isIdentifier := src.(cdc.Identifier)
	switch {
	case isAcker && isIdentifier:
		return &struct {
			*ownedSource
			cdc.Acker
			cdc.Identifier
		}{&o, a, id}
	case isAcker:
		return &struct {
			*ownedSource
			cdc.Acker
		}{&o, a}
	case isIdentifier:
		return &struct {
			*ownedSource
			cdc.Identifier
		}{&o, id}
	}
	return &o
}

type ownedSource struct {
	cdc.Source
	release func() error
}

func (s *ownedSource) Close() error {
	return errors.Join(s.Source.Close(), s.release())
}
