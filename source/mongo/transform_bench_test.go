package mongo

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/tide-cdc/tide/cdc"
	"github.com/tide-cdc/tide/checkpoint"
	"github.com/tide-cdc/tide/encode"
	"github.com/tide-cdc/tide/internal/testenv"
	"github.com/tide-cdc/tide/pipeline"
	"github.com/tide-cdc/tide/sink/file"
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
	var none, with []float64
	round := 0
	for b.Loop() {
		noneRound := func() { none = append(none, float64(n)/backlogTransformed(b, e, start, n, nil).Seconds()) }
		withRound := func() { with = append(with, float64(n)/backlogTransformed(b, e, start, n, chain).Seconds()) }
		if round%2 == 0 {
			noneRound()
			withRound()
		} else {
			withRound()
			noneRound()
		}
		round++
	}
	ratios := make([]float64, len(with))
	for i := range with {
		ratios[i] = with[i] / none[i]
	}
	b.ReportMetric(testenv.Median(none), "none_events/s")
	b.ReportMetric(testenv.Median(with), "transformed_events/s")
	b.ReportMetric(testenv.Median(ratios), "ratio")
	b.ReportMetric(0, "ns/op")
}

func backlogTransformed(b *testing.B, e *env, start bson.Raw, n int, chain *transform.Chain) time.Duration {
	dir := b.TempDir()
	defer os.RemoveAll(dir)
	cfg := e.config(b)
	cfg.MaxAwait = 0
	probe := New(cfg)
	if err := probe.Open(context.Background(), nil); err != nil {
		b.Fatal(err)
	}
	id := probe.Identity()
	probe.Close()
	store, err := checkpoint.Open(filepath.Join(dir, "ckpt"), slogDiscard())
	if err != nil {
		b.Fatal(err)
	}
	defer store.Close()
	if err := store.Save(context.Background(), "bench", cdc.Checkpoint{Source: resumePos(start), Meta: id}); err != nil {
		b.Fatal(err)
	}
	sink := testenv.NewCountingSink(file.New(file.Config{Path: filepath.Join(dir, "out.jsonl")}), n)
	pc := pipeline.Config{Name: "bench", Workers: 2}
	if chain != nil {
		pc.Transform = chain
	}
	p := pipeline.New(pc, New(cfg), encode.Envelope, sink, store)
	return testenv.RunUntil(b, p.Run, sink.Reached())
}
