package mongo

import (
	"os"
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/tide-cdc/tide/internal/testenv"
	"github.com/tide-cdc/tide/pipeline"
	"github.com/tide-cdc/tide/transform"
)

// BenchmarkBacklogTransformsToFile reads a backlog of inserts of 1 KiB
// documents (TIDE_BENCH_BACKLOG, default 50000) through the source, the
// runtime with 2 encode workers and the file sink, once with no
// transform and once with five (filter, drop, rename, mask, set), taking
// turns to go first; ratio is the median of with/without throughputs.
// TIDE_BENCH_TRANSFORMS=drop measures a drop_fields of one field instead.
func BenchmarkBacklogTransformsToFile(b *testing.B) {
	steps := []transform.Step{
		{Filter: &transform.Filter{Ops: []string{"insert", "update"}, Where: `doc.status != "draft"`}},
		{DropFields: []string{"note"}},
		{RenameFields: []transform.Field{{Path: "total", Value: "amount"}}},
		{MaskFields: []transform.Field{{Path: "customer.email", Value: "hash"}}},
		{Set: []transform.Field{{Path: "region", Value: `doc.customer.tier == "gold" ? "eu" : "other"`}}},
	}
	if os.Getenv("TIDE_BENCH_TRANSFORMS") == "drop" {
		steps = []transform.Step{{DropFields: []string{"status"}}}
	}
	chain, err := transform.Compile(steps, transform.Options{MaskKey: []byte("bench")})
	if err != nil {
		b.Fatal(err)
	}
	e, start, n := seedBacklog(b, 50_000)
	none, with := testenv.Alternate(b,
		func() float64 { return float64(n) / backlogTransformed(b, e, start, n, nil).Seconds() },
		func() float64 { return float64(n) / backlogTransformed(b, e, start, n, chain).Seconds() })
	b.ReportMetric(testenv.Median(none), "none_events/s")
	b.ReportMetric(testenv.Median(with), "transformed_events/s")
	b.ReportMetric(testenv.Median(testenv.Ratios(with, none)), "ratio")
	b.ReportMetric(0, "ns/op")
}

func backlogTransformed(b *testing.B, e *env, start bson.Raw, n int, chain *transform.Chain) time.Duration {
	pc := pipeline.Config{Workers: 2}
	if chain != nil {
		pc.Transform = chain
	}
	return backlogInto(b, e, start, n, pc, fileSink)
}
