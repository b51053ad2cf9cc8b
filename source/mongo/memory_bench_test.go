package mongo

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	goruntime "runtime"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/tide-cdc/tide/cdc"
	"github.com/tide-cdc/tide/checkpoint"
	"github.com/tide-cdc/tide/internal/testenv"
	"github.com/tide-cdc/tide/mongowire"
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
// was written (BenchmarkStalledMemoryTideRun measures tide's own). Size:
// stallSize; TIDE_BENCH_BUDGET sets the budget (default 16MiB, in bytes
// or with a MiB suffix).
func BenchmarkStalledMemory(b *testing.B) {
	backlog, watch := stallSize(b, 100_000)
	budget := int64(16 << 20)
	if v := os.Getenv("TIDE_BENCH_BUDGET"); v != "" {
		n, err := strconv.ParseInt(strings.TrimSuffix(v, "MiB"), 10, 64)
		if err != nil || n <= 0 {
			b.Fatalf("TIDE_BENCH_BUDGET=%q: want bytes, or a number of MiB such as 64MiB", v)
		}
		if strings.HasSuffix(v, "MiB") {
			n <<= 20
		}
		budget = n
	}
	for b.Loop() {
		e := newEnv(b, func(c *mongowire.Config) { c.OplogBytes = max(256<<20, int64(backlog)*2048) })
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
		cfg.MaxBufferedBytes = cdc.ByteSize(budget)
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

// stallSize reads the stalled-sink benchmarks' size from the environment:
// TIDE_BENCH_BACKLOG changes (default def), TIDE_BENCH_STALL long (a Go
// duration, default 10s). The full size is
// TIDE_BENCH_BACKLOG=1000000 TIDE_BENCH_STALL=60s.
func stallSize(tb testing.TB, def int) (int, time.Duration) {
	n, watch := def, 10*time.Second
	if v := os.Getenv("TIDE_BENCH_BACKLOG"); v != "" {
		var err error
		if n, err = strconv.Atoi(v); err != nil || n <= 0 {
			tb.Fatalf("TIDE_BENCH_BACKLOG=%q: want a positive number of changes", v)
		}
	}
	if v := os.Getenv("TIDE_BENCH_STALL"); v != "" {
		var err error
		if watch, err = time.ParseDuration(v); err != nil || watch < 2*time.Second {
			tb.Fatalf("TIDE_BENCH_STALL=%q: want a duration of at least 2s", v)
		}
	}
	return n, watch
}

// procRSS returns the resident set size of process pid.
func procRSS(tb testing.TB, pid int) int64 {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/status")
	if err != nil {
		tb.Skipf("no /proc/%d/status: %v", pid, err)
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

// BenchmarkStalledMemoryTideRun runs `tide run` (MongoDB source,
// max_buffered_bytes: 64MiB, stdout sink) on a backlog of inserts, with
// its standard output a pipe nobody reads: the sink stalls once the pipe
// is full, and the source reads ahead until its budget is used. The
// server lives in this process; tide's own RSS is sampled every second
// and, once the queue is full, must stay within 1.25 × the budget +
// 40 MiB, flat (the peak while it fills is reported apart). Size:
// stallSize (the full case: TIDE_BENCH_BACKLOG=1000000 TIDE_BENCH_STALL=60s).
func BenchmarkStalledMemoryTideRun(b *testing.B) {
	const budget = 64 << 20
	const limit = budget*5/4 + 40<<20
	backlog, watch := stallSize(b, 100_000)
	for b.Loop() {
		// An oplog that holds the whole backlog (~650 bytes an entry).
		e := newEnv(b, func(c *mongowire.Config) { c.OplogBytes = max(256<<20, int64(backlog)*2048) })
		bin := testenv.TideBinary(b)
		dir := b.TempDir()
		file := filepath.Join(dir, "pipeline.yaml")
		yaml := fmt.Sprintf(`name: stalled
data_dir: %s
source:
  mongo:
    uri: %s
    database: shop
    collection: orders
    snapshot: never
    max_buffered_bytes: 64MiB
sink:
  stdout: {}
`, filepath.Join(dir, "data"), e.srv.URI())
		if err := os.WriteFile(file, []byte(yaml), 0o644); err != nil {
			b.Fatal(err)
		}
		run := func(stdout *os.File) (*exec.Cmd, *testenv.Buffer) {
			cmd := exec.Command(bin, "run", "-f", file, "--log-level", "warn", "--progress", "never")
			stderr := &testenv.Buffer{}
			cmd.Stdout, cmd.Stderr = stdout, stderr
			if err := cmd.Start(); err != nil {
				b.Fatal(err)
			}
			return cmd, stderr
		}
		// A first run saves the position before the backlog.
		devNull, err := os.Open(os.DevNull)
		if err != nil {
			b.Fatal(err)
		}
		cmd, stderr := run(devNull)
		ckpt := checkpoint.File(filepath.Join(dir, "data"), "stalled")
		for deadline := time.Now().Add(30 * time.Second); ; {
			if _, err := os.Stat(ckpt); err == nil {
				break
			}
			if time.Now().After(deadline) {
				cmd.Process.Kill()
				cmd.Wait()
				b.Fatalf("tide run saved no checkpoint within 30s; stderr:\n%s", stderr.String())
			}
			time.Sleep(20 * time.Millisecond) // polling another process's files
		}
		cmd.Process.Signal(syscall.SIGTERM)
		cmd.Wait()
		devNull.Close()
		insertMany(b, e.coll, 0, backlog)

		r, w, err := os.Pipe()
		if err != nil {
			b.Fatal(err)
		}
		cmd, stderr = run(w)
		w.Close()
		exited := make(chan struct{})
		go func() { cmd.Wait(); close(exited) }()
		rss := func() int64 {
			select {
			case <-exited:
				b.Fatalf("tide run exited (%v) while its sink was stalled; stderr:\n%s", cmd.ProcessState, stderr.String())
			default:
			}
			return procRSS(b, cmd.Process.Pid)
		}
		// Every 100 ms while the queue fills (the first 3 s), to catch
		// the peak of the reads that fill it; every second after that.
		var fill, samples []int64
		for t0 := time.Now(); time.Since(t0) < watch; {
			if time.Since(t0) < 3*time.Second {
				time.Sleep(100 * time.Millisecond) // sampling memory over time
				fill = append(fill, rss())
				continue
			}
			time.Sleep(time.Second) // sampling memory over time
			samples = append(samples, rss())
		}
		cmd.Process.Signal(syscall.SIGKILL)
		<-exited
		r.Close()
		if len(samples) < 2 {
			b.Fatalf("tide run ended early, or TIDE_BENCH_STALL is under 5s; stderr:\n%s", stderr.String())
		}
		peak := slices.Max(samples)
		late := samples[len(samples)/2:]
		mib := func(v int64) float64 { return float64(v) / (1 << 20) }
		show := func(xs []int64) string {
			var line []string
			for _, s := range xs {
				line = append(line, fmt.Sprintf("%.1f", mib(s)))
			}
			return strings.Join(line, " ")
		}
		b.Logf("tide run RSS, MiB (backlog %d, budget 64 MiB, limit %.0f MiB): filling, every 100 ms: %s", backlog, mib(limit), show(fill))
		b.Logf("stalled, every second from 3 s: %s", show(samples))
		b.ReportMetric(mib(slices.Max(fill)), "rss_fill_peak_MiB")
		b.ReportMetric(mib(peak), "rss_peak_MiB")
		b.ReportMetric(mib(slices.Max(late)-slices.Min(late)), "rss_drift_2nd_half_MiB")
		b.ReportMetric(mib(limit), "limit_MiB")
		b.ReportMetric(0, "ns/op")
		if peak > limit {
			b.Errorf("tide run's RSS, stalled, peaked at %.1f MiB, over the limit of %.1f MiB (1.25 × 64 MiB + 40 MiB)", mib(peak), mib(limit))
		}
	}
}
