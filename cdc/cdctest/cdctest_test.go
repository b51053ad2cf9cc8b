package cdctest_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"sync"
	"testing"

	"github.com/tide-cdc/tide/cdc"
	"github.com/tide-cdc/tide/cdc/cdctest"
)

// TestMemorySinkPasses: an honest sink passes the suite.
func TestMemorySinkPasses(t *testing.T) {
	cdctest.TestSink(t, sinkHarness(""))
}

// TestMemorySourcePasses: an honest source passes the suite.
func TestMemorySourcePasses(t *testing.T) {
	cdctest.TestSource(t, sourceHarness(""))
}

// flawEnv names the flaw a subprocess gives its connector.
const flawEnv = "CDCTEST_FLAW"

// TestSuiteFailsBrokenConnectors runs the suite, in a subprocess, against
// connectors that each break one promise, and requires it to fail and to
// say what broke.
func TestSuiteFailsBrokenConnectors(t *testing.T) {
	tests := map[string]struct {
		flaw string
		want []string // in the subprocess's output
	}{
		"sink that loses a record":           {"sink-loses", []string{"FAIL: TestBrokenConnector/CommitMakesRecordsDurable", "lost"}},
		"sink that duplicates after restart": {"sink-duplicates", []string{"FAIL: TestBrokenConnector/RestartResumesWithoutGapOrDuplicate", "duplicated"}},
		"sink that keeps what it was put":    {"sink-keeps-uncommitted", []string{"FAIL: TestBrokenConnector/UncommittedRecordsAreDropped", "unexpected record", "duplicated"}},
		"sink that retains the batch":        {"sink-retains", []string{"FAIL: TestBrokenConnector/PutDoesNotRetainBatch", "changed after Put"}},
		"sink whose second Close fails":      {"sink-close-twice", []string{"FAIL: TestBrokenConnector/CloseIsIdempotent", "Close #2"}},
		"source that skips on resume":        {"source-skips", []string{"FAIL: TestBrokenConnector/ResumesAfterRestoredPosition", "lost"}},
		"source that repeats on resume":      {"source-repeats", []string{"FAIL: TestBrokenConnector/ResumesAfterRestoredPosition", "duplicate"}},
		"source that accepts garbage":        {"source-accepts-garbage", []string{"FAIL: TestBrokenConnector/RefusesPositionItCannotSeekTo", "succeeded; want an error"}},
		"source that ignores its identity":   {"source-ignores-identity", []string{"FAIL: TestBrokenConnector/RefusesAnotherIdentity", "another identity"}},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			cmd := exec.Command(os.Args[0], "-test.run=^TestBrokenConnector$", "-test.v", "-test.count=1")
			cmd.Env = append(os.Environ(), flawEnv+"="+tc.flaw)
			out, err := cmd.CombinedOutput()
			if err == nil {
				t.Fatalf("the suite passed a %s; output:\n%s", name, out)
			}
			for _, w := range tc.want {
				if !strings.Contains(string(out), w) {
					t.Errorf("output does not say %q; output:\n%s", w, out)
				}
			}
		})
	}
}

// TestBrokenConnector runs the suite against a broken connector; it runs
// only as TestSuiteFailsBrokenConnectors's subprocess.
func TestBrokenConnector(t *testing.T) {
	flaw := os.Getenv(flawEnv)
	if flaw == "" {
		t.Skip("runs only as the subprocess of TestSuiteFailsBrokenConnectors")
	}
	if strings.HasPrefix(flaw, "sink-") {
		cdctest.TestSink(t, sinkHarness(flaw))
	} else {
		cdctest.TestSource(t, sourceHarness(flaw))
	}
}

// destinations holds one destination or upstream per subtest.
type destinations[T any] struct {
	mu sync.Mutex
	m  map[string]*T
}

func (d *destinations[T]) of(t *testing.T) *T {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.m == nil {
		d.m = map[string]*T{}
	}
	v, ok := d.m[t.Name()]
	if !ok {
		v = new(T)
		d.m[t.Name()] = v
	}
	return v
}

// table is a memory sink's destination.
type table struct {
	mu      sync.Mutex
	records [][]byte
}

func sinkHarness(flaw string) cdctest.SinkHarness {
	var tables destinations[table]
	return cdctest.SinkHarness{
		New: func(t *testing.T) cdc.Sink { return &memSink{dest: tables.of(t), flaw: flaw} },
		Committed: func(t *testing.T) [][]byte {
			d := tables.of(t)
			d.mu.Lock()
			defer d.mu.Unlock()
			return append([][]byte(nil), d.records...)
		},
		FailOpen: func(t *testing.T) cdc.Sink { return &memSink{dest: tables.of(t), failOpen: true, flaw: flaw} },
	}
}

// memSink keeps records in a table. Its state is the number of records
// committed, and Open cuts the table to it, as the file sink cuts a file.
type memSink struct {
	dest     *table
	flaw     string
	failOpen bool
	pending  [][]byte
	closes   int
}

func (s *memSink) Open(_ context.Context, restored *cdc.Checkpoint) error {
	if s.failOpen {
		return fmt.Errorf("memory sink: cannot open")
	}
	s.dest.mu.Lock()
	defer s.dest.mu.Unlock()
	if restored == nil {
		return nil
	}
	var st struct{ N int }
	if err := json.Unmarshal(restored.Sink, &st); err != nil || st.N > len(s.dest.records) {
		return fmt.Errorf("memory sink: bad state %q", restored.Sink)
	}
	if s.flaw == "sink-keeps-uncommitted" {
		return nil // writes on Put, and never cuts what was not committed
	}
	s.dest.records = s.dest.records[:st.N]
	if s.flaw == "sink-duplicates" && st.N > 0 {
		s.dest.records = append(s.dest.records, s.dest.records[st.N-1])
	}
	return nil
}

func (s *memSink) Put(_ context.Context, batch []cdc.Record) error {
	for i, r := range batch {
		data := append([]byte(nil), r.Data...)
		switch {
		case s.flaw == "sink-retains":
			data = r.Data
		case s.flaw == "sink-loses" && i == 1:
			continue
		case s.flaw == "sink-keeps-uncommitted":
			s.dest.mu.Lock()
			s.dest.records = append(s.dest.records, data)
			s.dest.mu.Unlock()
			continue
		}
		s.pending = append(s.pending, data)
	}
	return nil
}

func (s *memSink) State() []byte {
	s.dest.mu.Lock()
	defer s.dest.mu.Unlock()
	return fmt.Appendf(nil, `{"n":%d}`, len(s.dest.records)+len(s.pending))
}

func (s *memSink) Commit(context.Context, cdc.Checkpoint) error {
	s.dest.mu.Lock()
	defer s.dest.mu.Unlock()
	s.dest.records = append(s.dest.records, s.pending...)
	s.pending = nil
	return nil
}

func (s *memSink) Close() error {
	s.pending = nil
	s.closes++
	if s.flaw == "sink-close-twice" && s.closes > 1 {
		return fmt.Errorf("memory sink: already closed")
	}
	return nil
}

// stream is a memory source's upstream.
type stream struct {
	mu      sync.Mutex
	events  [][]byte
	changed chan struct{} // closed and replaced by every append
}

func (s *stream) append(n int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for range n {
		s.events = append(s.events, fmt.Appendf(nil, `{"event":%d}`, len(s.events)))
	}
	if s.changed != nil {
		close(s.changed)
	}
	s.changed = make(chan struct{})
}

func sourceHarness(flaw string) cdctest.SourceHarness {
	var streams destinations[stream]
	return cdctest.SourceHarness{
		New:     func(t *testing.T) cdc.Source { return &memSource{up: streams.of(t), name: t.Name(), flaw: flaw} },
		Produce: func(t *testing.T, n int) { streams.of(t).append(n) },
	}
}

// memSource reads a stream; its positions are {"n": index}.
type memSource struct {
	up   *stream
	name string
	flaw string
	next int
}

func (s *memSource) Identity() map[string]string { return map[string]string{"stream": s.name} }

func (s *memSource) Open(_ context.Context, restored *cdc.Checkpoint) error {
	if restored == nil {
		return nil
	}
	if restored.Meta["stream"] != s.name && s.flaw != "source-ignores-identity" {
		return fmt.Errorf("memory source: checkpoint of stream %q, not %q", restored.Meta["stream"], s.name)
	}
	var p struct{ N *int }
	dec := json.NewDecoder(strings.NewReader(string(restored.Source)))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&p); err != nil || p.N == nil {
		if s.flaw == "source-accepts-garbage" {
			return nil
		}
		return fmt.Errorf("memory source: position %q is not {\"n\": N}", restored.Source)
	}
	s.next = *p.N + 1
	switch s.flaw {
	case "source-skips":
		s.next++
	case "source-repeats":
		s.next--
	}
	return nil
}

func (s *memSource) Poll(_ context.Context, buf []cdc.Event, max int) ([]cdc.Event, error) {
	s.up.mu.Lock()
	defer s.up.mu.Unlock()
	for ; s.next < len(s.up.events) && max > 0; max-- {
		buf = append(buf, cdc.Event{
			Pos: fmt.Appendf(nil, `{"n":%d}`, s.next), Op: cdc.OpInsert,
			Payload: append([]byte(nil), s.up.events[s.next]...), PayloadFormat: cdc.PayloadJSON,
		})
		s.next++
	}
	return buf, nil
}

func (s *memSource) Ready() <-chan struct{} {
	s.up.mu.Lock()
	defer s.up.mu.Unlock()
	if s.next < len(s.up.events) || s.up.changed == nil {
		ready := make(chan struct{})
		close(ready)
		return ready
	}
	return s.up.changed
}

func (s *memSource) Close() error { return nil }
