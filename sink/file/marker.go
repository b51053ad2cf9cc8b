package file

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
)

// marker is the content of the fresh-file marker. It names the pipeline
// that made it, so that another pipeline never takes the marker, and the
// bytes it covers, for its own.
type marker struct {
	Note string `json:"note"`
	owner
}

// writeMarker writes the fresh-file marker, naming us.
func (s *Sink) writeMarker(file, path string) error {
	b, _ := json.Marshal(marker{ // strings only: always marshals
		Note:  "written by tide: " + file + " has no checkpoint yet; its content is uncommitted",
		owner: owner{Pipeline: s.owner.Pipeline, DataDir: s.owner.DataDir},
	})
	f, err := s.fs.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o644)
	if err != nil {
		return fmt.Errorf("file sink: %w", err)
	}
	_, err = f.Write(append(b, '\n'))
	if err == nil {
		err = f.Sync() // whole before the directory entry is made durable
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("file sink: write fresh-file marker: %w", err)
	}
	return nil
}

// checkMarker reports whether a fresh-file marker exists at path and is
// ours, and refuses a file of size bytes that another pipeline began
// before its first checkpoint: those bytes are that pipeline's, which
// cuts them when it restarts. A marker that names nobody (made by an
// older tide, or by a sink configured without a pipeline) is taken as
// ours, as before markers named their owner. Another pipeline's marker on
// an empty file is taken over: there is nothing of theirs to lose.
func (s *Sink) checkMarker(file, path string, size int64) (bool, error) {
	b, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("file sink: %w", err)
	}
	var m marker
	json.Unmarshal(b, &m) // content that is not a marker of ours names nobody
	switch {
	case m.owner == owner{} || m.owner.same(s.owner):
		return true, nil
	case size == 0:
		s.log.Info("file sink: taking over an empty file from another pipeline's fresh-file marker",
			"marker", path, "from", m.owner.describe())
		return true, nil
	}
	return false, fmt.Errorf("file sink %s holds %d bytes that %s wrote before its first checkpoint (marker %s): "+
		"they are that pipeline's uncommitted output, which it cuts when it starts again; "+
		"run that pipeline, or set another sink.file.path. If that pipeline is gone for good, move the file and its marker aside",
		file, size, m.owner.describe(), path)
}
