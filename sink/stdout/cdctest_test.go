package stdout_test

import (
	"bytes"
	"fmt"
	"strings"
	"sync"
	"testing"

	"github.com/tide-cdc/tide/cdc"
	"github.com/tide-cdc/tide/cdc/cdctest"
	"github.com/tide-cdc/tide/sink/stdout"
)

// TestContract runs the conformance suite with a buffer as each subtest's
// standard output. What is committed is what reached the writer: the sink
// writes only on Commit, and drops on Close what was put since.
func TestContract(t *testing.T) { testContract(t, nil) }

// TestContractLargeRecords: nothing reaches the writer before Commit, even
// when a batch is larger than any write buffer.
func TestContractLargeRecords(t *testing.T) {
	testContract(t, func(i int) cdc.Record {
		r := cdctest.DefaultRecord(i)
		r.Data = fmt.Appendf(nil, `{"cdctest":%d,"pad":"%s"}`, i, strings.Repeat("x", 100<<10))
		return r
	})
}

func testContract(t *testing.T, record func(int) cdc.Record) {
	var mu sync.Mutex
	outs := map[string]*bytes.Buffer{}
	out := func(t *testing.T) *bytes.Buffer {
		mu.Lock()
		defer mu.Unlock()
		if outs[t.Name()] == nil {
			outs[t.Name()] = &bytes.Buffer{}
		}
		return outs[t.Name()]
	}
	cdctest.TestSink(t, cdctest.SinkHarness{
		New:    func(t *testing.T) cdc.Sink { return stdout.New(stdout.Config{Writer: out(t)}) },
		Record: record,
		Committed: func(t *testing.T) [][]byte {
			return lines(out(t).Bytes())
		},
	})
}

// lines splits committed output into its lines.
func lines(b []byte) [][]byte {
	var out [][]byte
	for line := range bytes.Lines(b) {
		out = append(out, bytes.Clone(bytes.TrimSuffix(line, []byte("\n"))))
	}
	return out
}
