package external

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/tide-cdc/tide"
	"github.com/tide-cdc/tide/cdc"
)

// A program's own sink, registered under a key of its own: a ledger file
// whose committed length travels in the checkpoint (cdc.Stater), so that a
// restart cuts whatever a failed commit left after it.
func init() {
	tide.RegisterSink("ledger", func() *ledgerConfig { return &ledgerConfig{Prefix: "entry "} },
		func(_ context.Context, c *ledgerConfig, env *tide.Env) (cdc.Sink, error) {
			return &ledgerSink{cfg: *c}, nil
		})
}

// ledgerConfig is sink.ledger's section.
type ledgerConfig struct {
	Path   string `yaml:"path"`   // required
	Prefix string `yaml:"prefix"` // written before each record; default "entry "
	// FailAfter makes the sink fail the commit after this many, having
	// written half of that batch: a crash in the middle of a write.
	FailAfter int `yaml:"fail_after"`
}

func (c *ledgerConfig) Validate() error {
	var errs []error
	if c.Path == "" {
		errs = append(errs, errors.New("path: required"))
	}
	if c.FailAfter < 0 {
		errs = append(errs, fmt.Errorf("fail_after: %d is negative", c.FailAfter))
	}
	return errors.Join(errs...)
}

type ledgerSink struct {
	cfg     ledgerConfig
	f       *os.File
	size    int64 // committed bytes
	buf     []byte
	commits int
}

type ledgerState struct {
	Size int64 `json:"size"`
}

func (s *ledgerSink) Open(_ context.Context, restored *cdc.Checkpoint) error {
	f, err := os.OpenFile(s.cfg.Path, os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		return err
	}
	s.f = f
	if restored != nil && restored.Sink != nil {
		var st ledgerState
		if err := json.Unmarshal(restored.Sink, &st); err != nil {
			return err
		}
		s.size = st.Size
	}
	// What follows the checkpoint was never committed: cut it.
	if err := f.Truncate(s.size); err != nil {
		return err
	}
	_, err = f.Seek(s.size, 0)
	return err
}

func (s *ledgerSink) Put(_ context.Context, batch []cdc.Record) error {
	for _, r := range batch {
		s.buf = append(s.buf, s.cfg.Prefix...)
		s.buf = append(append(s.buf, r.Data...), '\n')
	}
	return nil
}

func (s *ledgerSink) State() []byte {
	b, _ := json.Marshal(ledgerState{Size: s.size + int64(len(s.buf))})
	return b
}

func (s *ledgerSink) Commit(context.Context, cdc.Checkpoint) error {
	s.commits++
	if s.cfg.FailAfter > 0 && s.commits > s.cfg.FailAfter && len(s.buf) > 0 {
		s.f.Write(s.buf[:len(s.buf)/2])
		return errors.New("ledger: the disk went away")
	}
	if _, err := s.f.Write(s.buf); err != nil {
		return err
	}
	if err := s.f.Sync(); err != nil {
		return err
	}
	s.size += int64(len(s.buf))
	s.buf = s.buf[:0]
	return nil
}

func (s *ledgerSink) Close() error {
	if s.f == nil {
		return nil
	}
	err := s.f.Close()
	s.f = nil
	return err
}

func TestRegisteredSink(t *testing.T) {
	if !strings.Contains(strings.Join(tide.Sinks(), " "), "ledger") {
		t.Fatalf("registered sinks %v do not list ledger", tide.Sinks())
	}
	dir := t.TempDir()
	out := filepath.Join(dir, "ledger.txt")
	file := func(ledger string) []byte {
		return fmt.Appendf(nil, "name: to-ledger\ndata_dir: %s\nsource:\n  generate: {count: 5000}\nsink:\n  ledger:\n%s\nbatch: {max_records: 100}\n",
			filepath.Join(dir, "data"), ledger)
	}

	// A typo in one of the sink's own keys names the key and its line.
	_, err := tide.Parse(file("    path: "+out+"\n    prefx: x"), tide.Options{File: "ledger.yaml"})
	if err == nil || !strings.Contains(err.Error(), "ledger.yaml: line 8: sink.ledger.prefx: unknown key (did you mean prefix?)") {
		t.Fatalf("error %v does not name the misspelt key and its line", err)
	}
	// Its Validate's errors too.
	_, err = tide.Parse(file("    fail_after: -1"), tide.Options{})
	for _, want := range []string{"sink.ledger.path: required", "line 7: sink.ledger.fail_after: -1 is negative"} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("error %v does not contain %q", err, want)
		}
	}

	// The first run fails in the middle of its 11th commit, half of
	// the batch written.
	run := func(ledger string) error {
		spec, err := tide.Parse(file(ledger), tide.Options{})
		if err != nil {
			t.Fatal(err)
		}
		if got := spec.Sink.Config.(*ledgerConfig).Prefix; got != "entry " {
			t.Fatalf("prefix %q: the default of the sink's Config was not kept", got)
		}
		p, err := spec.Build(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		defer p.Close()
		return p.Run(context.Background())
	}
	if err := run("    path: " + out + "\n    fail_after: 10"); err == nil || !strings.Contains(err.Error(), "the disk went away") {
		t.Fatalf("first run = %v, want the sink's failure", err)
	}
	// The restart cuts the torn tail and resumes after the checkpoint:
	// every event exactly once, in order.
	if err := run("    path: " + out); err != nil {
		t.Fatalf("second run: %v", err)
	}
	b, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSuffix(string(b), "\n"), "\n")
	if len(lines) != 5000 {
		t.Fatalf("the ledger holds %d lines, want 5000", len(lines))
	}
	origin := int64(-1)
	for i, l := range lines {
		var rec struct {
			Key struct {
				ID int64 `json:"_id"`
			} `json:"_document_key"`
		}
		body, ok := strings.CutPrefix(l, "entry ")
		if !ok || json.Unmarshal([]byte(body), &rec) != nil {
			t.Fatalf("line %d is not an entry: %q", i+1, l)
		}
		if origin < 0 {
			origin = rec.Key.ID
		}
		if rec.Key.ID != origin+int64(i) {
			t.Fatalf("line %d holds event %d, want %d: lost, repeated or reordered", i+1, rec.Key.ID, origin+int64(i))
		}
	}
}
