package status

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/tide-cdc/tide/encode"
	"github.com/tide-cdc/tide/pipeline"
	"github.com/tide-cdc/tide/source/generate"
)

func fullTracker(b *testing.B) *Tracker {
	tr := NewTracker()
	p := pipeline.New(pipeline.Config{Name: "x"}, generate.New(generate.Config{}), encode.Envelope, brokenSink{}, nil)
	tr.Attach("x", p, nil, nil)
	start := time.Unix(1_700_000_000, 0)
	for i := range HistoryLen + 1 {
		tr.sample(start.Add(time.Duration(i) * time.Second))
	}
	return tr
}

// BenchmarkStatusJSON is what one /api/status costs per pipeline: with the
// whole history (a page opening), with one new sample (each second's
// poll), and the sampling itself.
func BenchmarkStatusJSON(b *testing.B) {
	tr := fullTracker(b)
	now := time.Unix(1_700_000_000+HistoryLen+1, 0)
	for _, c := range []struct {
		name  string
		since float64
	}{{"history=900", 0}, {"history=1", float64(now.Unix() - 2)}} {
		b.Run(c.name, func(b *testing.B) {
			b.ReportAllocs()
			var n int
			for b.Loop() {
				buf, err := json.Marshal(Report{Time: now, Pipelines: []Status{tr.Status(now, true, c.since)}})
				if err != nil {
					b.Fatal(err)
				}
				n = len(buf)
			}
			b.ReportMetric(float64(n), "json-bytes")
		})
	}
	b.Run("sample", func(b *testing.B) {
		at := now
		for b.Loop() {
			at = at.Add(time.Second)
			tr.sample(at)
		}
	})
}
