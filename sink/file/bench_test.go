package file

import (
	"fmt"
	"path/filepath"
	"strings"
	"testing"

	"github.com/tide-cdc/tide/cdc"
)

// BenchmarkNamespaces writes the same records, batches of 1000 of 200
// bytes committed (fsynced) one by one, to one file and to one file per
// namespace over 10 namespaces: the cost of routing is the extra fsyncs
// of each commit, which run 8 at a time.
func BenchmarkNamespaces(b *testing.B) {
	const batch, size = 1000, 200
	for _, tc := range []struct {
		name string
		path string
		nss  int
	}{
		{"1 file", "out.jsonl", 1},
		{"10 namespaces", "{db}/{coll}.jsonl", 10},
	} {
		b.Run(tc.name, func(b *testing.B) {
			rs := make([]cdc.Record, batch)
			for i := range rs {
				rs[i].Namespace = fmt.Sprintf("db.c%d", i%tc.nss)
				rs[i].Pos = cdc.Position(fmt.Sprintf(`{"seq":%d}`, i))
				rs[i].Data = []byte(fmt.Sprintf(`{"seq":%d,"pad":"%s"}`, i, strings.Repeat("x", size-20)))[:size-1]
			}
			s := New(Config{Path: filepath.Join(b.TempDir(), tc.path)})
			if err := s.Open(b.Context(), nil); err != nil {
				b.Fatal(err)
			}
			defer s.Close()
			b.SetBytes(batch * size)
			b.ResetTimer()
			for b.Loop() {
				if err := s.Put(b.Context(), rs); err != nil {
					b.Fatal(err)
				}
				s.State()
				if err := s.Commit(b.Context(), cdc.Checkpoint{}); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(b.N*batch)/b.Elapsed().Seconds(), "records/s")
		})
	}
}
