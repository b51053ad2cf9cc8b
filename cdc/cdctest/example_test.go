package cdctest_test

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"sync"
	"testing"

	"github.com/tide-cdc/tide/cdc"
	"github.com/tide-cdc/tide/cdc/cdctest"
)

// lineSink writes one line per record to w when a batch commits, as a
// connector author's own sink might.
type lineSink struct {
	w   io.Writer
	buf bytes.Buffer
}

func (s *lineSink) Open(context.Context, *cdc.Checkpoint) error { return nil }

func (s *lineSink) Put(_ context.Context, batch []cdc.Record) error {
	for _, r := range batch {
		s.buf.Write(r.Data) // copies: the sink must not retain batch
		s.buf.WriteByte('\n')
	}
	return nil
}

func (s *lineSink) Commit(context.Context, cdc.Checkpoint) error {
	_, err := s.buf.WriteTo(s.w)
	return err
}

func (s *lineSink) Close() error { s.buf.Reset(); return nil }

// TestLineSink is how a connector's own test runs the suite: the harness
// makes a sink writing to the subtest's destination, and reads back what
// was committed there.
func TestLineSink(t *testing.T) {
	var mu sync.Mutex
	outputs := map[string]*bytes.Buffer{} // one destination per subtest
	output := func(t *testing.T) *bytes.Buffer {
		mu.Lock()
		defer mu.Unlock()
		if outputs[t.Name()] == nil {
			outputs[t.Name()] = &bytes.Buffer{}
		}
		return outputs[t.Name()]
	}
	cdctest.TestSink(t, cdctest.SinkHarness{
		New: func(t *testing.T) cdc.Sink { return &lineSink{w: output(t)} },
		Committed: func(t *testing.T) [][]byte {
			var lines [][]byte
			sc := bufio.NewScanner(bytes.NewReader(output(t).Bytes()))
			for sc.Scan() {
				lines = append(lines, bytes.Clone(sc.Bytes()))
			}
			return lines
		},
	})
}

// Compare is what the suite reports with when a destination does not hold
// exactly the committed records.
func ExampleCompare() {
	want := [][]byte{[]byte(`{"n":1}`), []byte(`{"n":2}`), []byte(`{"n":3}`)}
	fmt.Println(cdctest.Compare(want, want))
	fmt.Println(cdctest.Compare([][]byte{[]byte(`{"n":1}`), []byte(`{"n":3}`), []byte(`{"n":3}`)}, want))
	// Output:
	// <nil>
	// record "{\"n\":2}" lost; record "{\"n\":3}" duplicated (2 times); got 3 records, want 3
}
