package mongo

import (
	"bytes"
	"context"
	"os"
	goruntime "runtime"
	"strconv"
	"testing"
	"time"

	"github.com/tide-cdc/tide/cdc"
)

// rssBytes returns the process's resident set size.
func rssBytes(tb testing.TB) int64 {
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		tb.Skipf("no /proc/self/status: %v", err)
	}
	for _, line := range bytes.Split(b, []byte("\n")) {
		if v, ok := bytes.CutPrefix(line, []byte("VmRSS:")); ok {
			kb, _ := strconv.ParseInt(string(bytes.TrimSpace(bytes.TrimSuffix(bytes.TrimSpace(v), []byte("kB")))), 10, 64)
			return kb << 10
		}
	}
	tb.Skip("no VmRSS")
	return 0
}

// BenchmarkStalledMemory opens the source on a backlog of change events
// and never polls, as with a stalled sink: the source's memory must stay
// within its budget and flat. The embedded server runs in the same
// process, so RSS is measured as growth over the level after the backlog
// was written.
func BenchmarkStalledMemory(b *testing.B) {
	const backlog = 100_000
	const budget = 16 << 20
	const watch = 10 * time.Second
	for b.Loop() {
		e := newEnv(b)
		cfg := e.config(b)
		probe := New(cfg) // the start token, before the backlog
		if err := probe.Open(context.Background(), nil); err != nil {
			b.Fatal(err)
		}
		start, err := pollUntil(b, probe, func(evs []cdc.Event) bool { return len(evs) > 0 })
		if err != nil {
			b.Fatal(err)
		}
		cp := checkpointOf(start[0].Pos, probe.Identity())
		probe.Close()
		insertMany(b, e.coll, 0, backlog)

		goruntime.GC()
		base := rssBytes(b)
		cfg.MaxBufferedBytes = budget
		src := New(cfg)
		if err := src.Open(context.Background(), &cp); err != nil {
			b.Fatal(err)
		}
		var samples []int64
		for t0 := time.Now(); time.Since(t0) < watch; {
			time.Sleep(time.Second) // sampling memory over time
			samples = append(samples, rssBytes(b)-base)
		}
		_, peakQueue := src.q.usage()
		src.Close()
		peak, low := samples[0], samples[0]
		for _, s := range samples {
			peak, low = max(peak, s), min(low, s)
		}
		late := samples[len(samples)/2:]
		lateMin, lateMax := late[0], late[0]
		for _, s := range late {
			lateMin, lateMax = min(lateMin, s), max(lateMax, s)
		}
		b.ReportMetric(float64(peakQueue)/(1<<20), "queue_peak_MiB")
		b.ReportMetric(float64(peak)/(1<<20), "rss_growth_peak_MiB")
		b.ReportMetric(float64(lateMax-lateMin)/(1<<20), "rss_drift_2nd_half_MiB")
		b.ReportMetric(float64(budget)/(1<<20), "budget_MiB")
		if peakQueue > budget {
			b.Errorf("queue peaked at %d bytes, over the budget of %d", peakQueue, budget)
		}
	}
}
