package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/tide-cdc/tide/internal/testenv"
	"github.com/tide-cdc/tide/internal/worker"
)

// groupWorker is one `tide worker` process of a test, logging JSON to a
// file that the lease checks read.
type groupWorker struct {
	id   string
	cmd  *exec.Cmd
	log  string
	wait func() error // cmd.Wait, once
}

func startWorker(t *testing.T, dir, natsURL, pipelines, id string, extra ...string) *groupWorker {
	t.Helper()
	logPath := filepath.Join(dir, id+".log")
	f, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	args := append([]string{"worker", "--nats", natsURL, "--pipelines", pipelines, "--id", id,
		"--lease-ttl", "3s", "--replicas", "3", "--log-format", "json", "--log-level", "debug"}, extra...)
	cmd := tideCmd(t, dir, args...)
	cmd.Stderr, cmd.Stdout = f, f
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	w := &groupWorker{id: id, cmd: cmd, log: logPath, wait: sync.OnceValue(cmd.Wait)}
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		_ = w.wait()
		f.Close()
		if t.Failed() {
			b, _ := os.ReadFile(logPath)
			for line := range strings.Lines(string(b)) {
				if !strings.Contains(line, `"lease renewed"`) && !strings.Contains(line, `"level":"DEBUG"`) {
					t.Logf("%s: %s", id, strings.TrimSpace(line))
				}
			}
		}
	})
	return w
}

// leaseEvent is a lease change as a worker logged it.
type leaseEvent struct {
	Time     time.Time `json:"time"`
	Msg      string    `json:"msg"`
	Worker   string    `json:"worker"`
	Pipeline string    `json:"pipeline"`
	Revision uint64    `json:"revision"`
}

func leaseEvents(t *testing.T, paths ...string) []leaseEvent {
	t.Helper()
	var out []leaseEvent
	for _, p := range paths {
		f, err := os.Open(p)
		if err != nil {
			t.Fatal(err)
		}
		sc := bufio.NewScanner(f)
		sc.Buffer(make([]byte, 1<<20), 1<<20)
		for sc.Scan() {
			var e leaseEvent
			if json.Unmarshal(sc.Bytes(), &e) != nil || e.Pipeline == "" {
				continue
			}
			switch {
			case e.Msg == "lease acquired", e.Msg == "lease renewed", e.Msg == "lease released",
				e.Msg == "pipeline started", strings.HasPrefix(e.Msg, "lease renewal failed"):
				out = append(out, e)
			}
		}
		f.Close()
	}
	return out
}

// pipelineLog returns the log lines of the workers' logs at paths that
// name pipeline p, from since on, to show where a handover spent its time.
func pipelineLog(t *testing.T, p string, since time.Time, paths ...string) string {
	t.Helper()
	var out strings.Builder
	for _, path := range paths {
		b, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		for line := range strings.Lines(string(b)) {
			var e struct {
				Time     time.Time `json:"time"`
				Pipeline string    `json:"pipeline"`
			}
			if json.Unmarshal([]byte(line), &e) == nil && e.Pipeline == p && !e.Time.Before(since) {
				out.WriteString(line)
			}
		}
	}
	return out.String()
}

// checkOwnership requires the lease history of every pipeline, in revisions
// of the lease bucket, to be a sequence of intervals that do not overlap:
// an owner's last renewal or release comes before the next owner acquires.
func checkOwnership(t *testing.T, events []leaseEvent) {
	t.Helper()
	type span struct {
		worker     string
		start, end uint64
	}
	spans := map[string][]*span{}
	cur := map[[2]string]*span{}
	for _, e := range events {
		k := [2]string{e.Worker, e.Pipeline}
		switch e.Msg {
		case "lease acquired":
			s := &span{worker: e.Worker, start: e.Revision, end: e.Revision}
			cur[k] = s
			spans[e.Pipeline] = append(spans[e.Pipeline], s)
		case "lease renewed", "lease released":
			if s := cur[k]; s != nil {
				s.end = max(s.end, e.Revision)
			}
		}
	}
	for p, ss := range spans {
		slices.SortFunc(ss, func(a, b *span) int { return int(a.start) - int(b.start) })
		for i := 1; i < len(ss); i++ {
			if ss[i-1].end >= ss[i].start {
				t.Errorf("pipeline %s: %s held its lease to revision %d, after %s acquired it at %d: two owners at once",
					p, ss[i-1].worker, ss[i-1].end, ss[i].worker, ss[i].start)
			}
		}
	}
}

// firstStart returns when a worker other than not started pipeline p after
// since, from the logs.
func firstStart(events []leaseEvent, p, not string, since time.Time) (time.Time, bool) {
	for _, e := range events {
		if e.Msg == "pipeline started" && e.Pipeline == p && e.Worker != not && e.Time.After(since) {
			return e.Time, true
		}
	}
	return time.Time{}, false
}

func statusOf(t *testing.T, js jetstream.JetStream) map[string]worker.StatusRecord {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	out := map[string]worker.StatusRecord{}
	kv, err := js.KeyValue(ctx, worker.StatusBucket)
	if err != nil {
		return out
	}
	keys, _ := kv.Keys(ctx)
	for _, k := range keys {
		if e, err := kv.Get(ctx, k); err == nil {
			var r worker.StatusRecord
			if json.Unmarshal(e.Value(), &r) == nil {
				out[k] = r
			}
		}
	}
	return out
}

func leaseHolders(t *testing.T, js jetstream.JetStream) map[string]string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	out := map[string]string{}
	kv, err := js.KeyValue(ctx, worker.LeasesBucket)
	if err != nil {
		return out
	}
	keys, _ := kv.Keys(ctx)
	for _, k := range keys {
		if e, err := kv.Get(ctx, k); err == nil {
			var r worker.LeaseRecord
			_ = json.Unmarshal(e.Value(), &r)
			out[k] = r.Worker
		}
	}
	return out
}

func waitUntil(t *testing.T, what string, timeout time.Duration, ok func() bool) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for !ok() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %s waiting for %s", timeout, what)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// writeGroupPipelines writes files file-pipelines (generate -> file) and
// js JetStream pipelines (generate -> a stream of their own) into dir.
func writeGroupPipelines(t *testing.T, dir, natsURL string, files, js, count, rate, replicas int) []string {
	t.Helper()
	var names []string
	servers := `["` + strings.Join(strings.Split(natsURL, ","), `","`) + `"]`
	for i := range files {
		name := fmt.Sprintf("file%d", i)
		names = append(names, name)
		body := fmt.Sprintf(`name: %s
source: {generate: {count: %d, rate: %d}}
sink: {file: {path: %s}}
data_dir: %s
checkpoint: {nats_kv: {servers: %s, bucket: tide_checkpoints, replicas: %d}}
batch: {commit_interval: 20ms}
`, name, count, rate, filepath.Join(dir, name+".jsonl"), filepath.Join(dir, name+"-data"), servers, replicas)
		if err := os.WriteFile(filepath.Join(dir, "pipelines", name+".yaml"), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	for i := range js {
		name := fmt.Sprintf("js%d", i)
		names = append(names, name)
		body := fmt.Sprintf(`name: %s
source: {generate: {count: %d, rate: %d}}
sink: {nats: {servers: %s, stream: OUT_%s, subject: "%s.{db}.{coll}", create_stream: {subjects: ["%s.>"], replicas: %d}}}
data_dir: %s
checkpoint: {nats_kv: {servers: %s, bucket: tide_checkpoints, replicas: %d}}
batch: {commit_interval: 20ms}
`, name, count, rate, servers, name, name, name, replicas, filepath.Join(dir, name+"-data"), servers, replicas)
		if err := os.WriteFile(filepath.Join(dir, "pipelines", name+".yaml"), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return names
}

// checkStreamSeqs requires stream to hold exactly seqs 1..n, once each.
func checkStreamSeqs(t *testing.T, js jetstream.JetStream, stream string, n int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	s, err := js.Stream(ctx, stream)
	if err != nil {
		t.Fatalf("stream %s: %v", stream, err)
	}
	info, err := s.Info(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if int(info.State.Msgs) != n {
		t.Errorf("stream %s holds %d messages, want %d (exactly once)", stream, info.State.Msgs, n)
	}
	c, err := s.OrderedConsumer(ctx, jetstream.OrderedConsumerConfig{})
	if err != nil {
		t.Fatal(err)
	}
	seen := make(map[int64]bool, n)
	// A fetch may end early (fewer messages than asked, or none while a
	// restarted node catches up): read until every message came.
	for read := 0; read < int(info.State.Msgs); {
		if ctx.Err() != nil {
			t.Fatalf("stream %s: read %d of %d messages within 20s", stream, read, info.State.Msgs)
		}
		batch, err := c.Fetch(int(info.State.Msgs)-read, jetstream.FetchMaxWait(5*time.Second))
		if errors.Is(err, nats.ErrNoResponders) {
			// The consumer has no leader yet on a cluster whose nodes
			// were just restarted: ask again until the deadline.
			time.Sleep(100 * time.Millisecond)
			continue
		}
		if err != nil {
			t.Fatalf("stream %s: fetch: %v", stream, err)
		}
		for m := range batch.Messages() {
			read++
			var rec struct {
				Doc struct {
					Seq int64 `json:"seq"`
				} `json:"_full_document"`
			}
			if err := json.Unmarshal(m.Data(), &rec); err != nil {
				t.Fatalf("stream %s: %v", stream, err)
			}
			if seen[rec.Doc.Seq] {
				t.Fatalf("stream %s: seq %d twice", stream, rec.Doc.Seq)
			}
			seen[rec.Doc.Seq] = true
		}
		if err := batch.Error(); err != nil && !errors.Is(err, nats.ErrTimeout) {
			t.Fatalf("stream %s: fetch: %v", stream, err)
		}
	}
	for i := int64(1); i <= int64(n); i++ {
		if !seen[i] {
			t.Fatalf("stream %s: seq %d missing", stream, i)
		}
	}
}

func connectTest(t *testing.T, url string) jetstream.JetStream {
	t.Helper()
	nc, err := nats.Connect(url, nats.MaxReconnects(-1), nats.ReconnectWait(100*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	return js
}

// TestWorkerGroupFailover runs six pipelines on three workers over a
// three-node NATS cluster (R3 buckets and streams), SIGKILLs a worker
// twice, lets a fourth join, stops a NATS node once and hands a worker's
// pipelines over with SIGTERM: every pipeline ends with exactly-once
// output, and the lease log never shows two owners at once.
func TestWorkerGroupFailover(t *testing.T) {
	const count, rate = 6000, 600
	dir := t.TempDir()
	if err := os.Mkdir(filepath.Join(dir, "pipelines"), 0o755); err != nil {
		t.Fatal(err)
	}
	cluster := testenv.NATSCluster(t, 3)
	url := cluster.URL()
	names := writeGroupPipelines(t, dir, url, 3, 3, count, rate, 3)
	// A file that does not validate is skipped; the others run.
	if err := os.WriteFile(filepath.Join(dir, "pipelines", "broken.yaml"), []byte("name: broken\nsource: {generate: {count: -1}}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	js := connectTest(t, url)
	pdir := filepath.Join(dir, "pipelines")

	var mu sync.Mutex
	workers := map[string]*groupWorker{}
	start := func(id string) {
		w := startWorker(t, dir, url, pdir, id)
		mu.Lock()
		workers[id] = w
		mu.Unlock()
	}
	for _, id := range []string{"w1", "w2", "w3"} {
		start(id)
	}
	// The group settles on two pipelines each, whatever the order in
	// which the workers joined.
	waitUntil(t, "six pipelines spread two per worker", 30*time.Second, func() bool {
		per := map[string]int{}
		for _, w := range leaseHolders(t, js) {
			per[w]++
		}
		return len(per) == 3 && per["w1"] == 2 && per["w2"] == 2 && per["w3"] == 2
	})

	kill := func(id string) (time.Time, []string) {
		var held []string
		for p, w := range leaseHolders(t, js) {
			if w == id {
				held = append(held, p)
			}
		}
		at := time.Now()
		if err := workers[id].cmd.Process.Signal(syscall.SIGKILL); err != nil {
			t.Fatal(err)
		}
		_ = workers[id].wait()
		return at, held
	}
	time.Sleep(time.Second)
	kill1, held1 := kill("w1")
	start("w4") // joins: the group rebalances onto it
	time.Sleep(1500 * time.Millisecond)
	cluster.Stop(1)
	time.Sleep(time.Second)
	cluster.Restart(1)
	kill2, held2 := kill("w2")

	waitUntil(t, "the killed workers' pipelines to restart elsewhere", 30*time.Second, func() bool {
		ev := leaseEvents(t, workers["w3"].log, workers["w4"].log)
		for _, p := range append(slices.Clone(held1), held2...) {
			if _, ok := firstStart(ev, p, "", kill1); !ok {
				return false
			}
		}
		return true
	})

	// SIGTERM hands w3's pipelines over to w4 at once.
	var held3 []string
	for p, w := range leaseHolders(t, js) {
		if w == "w3" {
			held3 = append(held3, p)
		}
	}
	term := time.Now()
	if err := workers["w3"].cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- workers["w3"].wait() }()
	select {
	case err := <-exited:
		if err != nil {
			t.Errorf("w3 after SIGTERM: %v", err)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("w3 did not exit within 20s of SIGTERM")
	}

	waitUntil(t, "every pipeline done", 60*time.Second, func() bool {
		st := statusOf(t, js)
		for _, n := range names {
			if st[n].State != "done" || st[n].Owner != "w4" {
				return false
			}
		}
		return true
	})

	ev := leaseEvents(t, workers["w1"].log, workers["w2"].log, workers["w3"].log, workers["w4"].log)
	checkOwnership(t, ev)
	report := func(what string, at time.Time, held []string, by string) {
		for _, p := range held {
			if got, ok := firstStart(ev, p, by, at); ok {
				t.Logf("%s: %s running again after %s", what, p, got.Sub(at).Round(time.Millisecond))
			}
		}
	}
	report("failover after SIGKILL of w1", kill1, held1, "w1")
	report("failover after SIGKILL of w2", kill2, held2, "w2")
	report("handover after SIGTERM of w3", term, held3, "w3")
	for _, p := range held3 {
		if got, ok := firstStart(ev, p, "w3", term); !ok || got.Sub(term) > 2*time.Second {
			t.Errorf("%s after w3's SIGTERM: running again after %s, want it at once; its log lines since:\n%s", p, got.Sub(term), pipelineLog(t, p, term, workers["w3"].log, workers["w4"].log))
		}
	}
	b, _ := os.ReadFile(workers["w1"].log)
	if !strings.Contains(string(b), `"msg":"pipeline skipped"`) || !strings.Contains(string(b), "broken.yaml") {
		t.Errorf("w1's log does not name the pipeline file that does not validate:\n%s", b)
	}
	for i := range 3 {
		checkSeqFile(t, filepath.Join(dir, fmt.Sprintf("file%d.jsonl", i)), count)
		checkStreamSeqs(t, js, fmt.Sprintf("OUT_js%d", i), count)
	}
}

// TestWorkerSIGSTOPPastLease freezes the owner of a pipeline past its
// lease: the other worker takes the pipeline over (its file sink waiting
// for the frozen one's data-directory lock, while holding the lease), and
// the frozen worker, resumed, finds its lease gone and stops the pipeline
// without committing. The output stays exactly-once.
func TestWorkerSIGSTOPPastLease(t *testing.T) {
	const count, rate = 3000, 500
	dir := t.TempDir()
	if err := os.Mkdir(filepath.Join(dir, "pipelines"), 0o755); err != nil {
		t.Fatal(err)
	}
	url := testenv.NATS(t).ClientURL()
	writeGroupPipelines(t, dir, url, 1, 1, count, rate, 1)
	js := connectTest(t, url)
	pdir := filepath.Join(dir, "pipelines")
	workers := map[string]*groupWorker{
		"w1": startWorker(t, dir, url, pdir, "w1", "--replicas", "1"),
		"w2": startWorker(t, dir, url, pdir, "w2", "--replicas", "1"),
	}
	var owner string
	waitUntil(t, "one pipeline per worker", 20*time.Second, func() bool {
		h := leaseHolders(t, js)
		owner = h["file0"]
		return len(h) == 2 && h["file0"] != h["js0"] && h["file0"] != ""
	})
	other := "w1"
	if owner == "w1" {
		other = "w2"
	}
	time.Sleep(500 * time.Millisecond) // let it commit a little
	frozen := workers[owner]
	if err := frozen.cmd.Process.Signal(syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	stopped := time.Now()
	waitUntil(t, other+" to take file0 over", 20*time.Second, func() bool {
		return leaseHolders(t, js)["file0"] == other
	})
	// The new owner has fenced the checkpoint (that comes first) and now
	// waits, holding the lease, for the data directory the frozen one
	// still locks: from here on, no save of the frozen one can succeed.
	waitUntil(t, other+" to wait for the frozen worker's data directory", 10*time.Second, func() bool {
		b, _ := os.ReadFile(workers[other].log)
		for line := range strings.Lines(string(b)) {
			if strings.Contains(line, `"pipeline":"file0"`) && strings.Contains(line, "is in use by another tide process") {
				return true
			}
		}
		return false
	})
	if err := frozen.cmd.Process.Signal(syscall.SIGCONT); err != nil {
		t.Fatal(err)
	}
	t.Logf("%s frozen for %s", owner, time.Since(stopped).Round(time.Millisecond))
	waitUntil(t, "both pipelines done", 40*time.Second, func() bool {
		st := statusOf(t, js)
		return st["file0"].State == "done" && st["js0"].State == "done"
	})
	b, _ := os.ReadFile(frozen.log)
	if !strings.Contains(string(b), `"msg":"lease renewal failed: stopping the pipeline","worker":"`+owner+`","pipeline":"file0"`) {
		t.Errorf("the frozen worker did not log that it lost file0's lease:\n%s", b)
	}
	checkOwnership(t, leaseEvents(t, workers["w1"].log, workers["w2"].log))
	checkSeqFile(t, filepath.Join(dir, "file0.jsonl"), count)
	checkStreamSeqs(t, js, "OUT_js0", count)
}

// TestPipelinePutRunsOnWorker stores a pipeline with tide pipeline put and
// runs it on a worker that has no pipeline directory: no shared disk.
// tide cluster status shows the worker and the pipeline; tide pipeline rm
// makes the worker give it up.
func TestPipelinePutRunsOnWorker(t *testing.T) {
	const count = 500
	dir := t.TempDir()
	url := testenv.NATS(t).ClientURL()
	cfg := writePipeline(t, dir, fmt.Sprintf(`name: stored
source: {generate: {count: %d}}
sink: {file: {path: %s}}
data_dir: %s
checkpoint: {nats_kv: {servers: [%q], bucket: tide_checkpoints}}
batch: {commit_interval: 20ms}
`, count, filepath.Join(dir, "out.jsonl"), filepath.Join(dir, "data"), url))
	if out, err := runTide(t, dir, "pipeline", "put", "-f", cfg, "--nats", url); err != nil || !strings.Contains(out, "stored pipeline stored") {
		t.Fatalf("pipeline put: %v\n%s", err, out)
	}
	if out, err := runTide(t, dir, "pipeline", "list", "--nats", url); err != nil || strings.TrimSpace(out) != "stored" {
		t.Fatalf("pipeline list: %v\n%q", err, out)
	}
	logPath := filepath.Join(dir, "w.log")
	f, err := os.Create(logPath)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	w := tideCmd(t, dir, "worker", "--nats", url, "--id", "solo", "--lease-ttl", "2s", "--log-format", "json", "--http-addr", "127.0.0.1:0")
	w.Stdout, w.Stderr = f, f
	if err := w.Start(); err != nil {
		t.Fatal(err)
	}
	wait := sync.OnceValue(w.Wait)
	t.Cleanup(func() { _ = w.Process.Kill(); _ = wait() })
	js := connectTest(t, url)
	waitUntil(t, "the stored pipeline done", 30*time.Second, func() bool { return statusOf(t, js)["stored"].State == "done" })
	checkSeqFile(t, filepath.Join(dir, "out.jsonl"), count)

	// The worker's /metrics has the pipeline's own metrics and its lease.
	var addr string
	waitUntil(t, "the metrics address in the log", 5*time.Second, func() bool {
		b, _ := os.ReadFile(logPath)
		for line := range strings.Lines(string(b)) {
			var e struct{ Msg, Addr string }
			if json.Unmarshal([]byte(line), &e) == nil && e.Msg == "serving metrics" {
				addr = e.Addr
			}
		}
		return addr != ""
	})
	resp, err := http.Get(addr)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	for _, want := range []string{`tide_worker_pipeline_owned{pipeline="stored",state="done"} 1`,
		`tide_events_out_total{namespace="gen.events",pipeline="stored"} ` + fmt.Sprint(count), `tide_worker_lease_changes_total{change="acquired"} 1`} {
		if !strings.Contains(string(body), want) {
			t.Errorf("/metrics lacks %s:\n%s", want, body)
		}
	}

	out, err := runTide(t, dir, "cluster", "status", "--nats", url)
	if err != nil {
		t.Fatalf("cluster status: %v\n%s", err, out)
	}
	for _, want := range []string{"WORKER", "solo", "PIPELINE", "stored", "done", fmt.Sprint(count)} {
		if !strings.Contains(out, want) {
			t.Errorf("cluster status lacks %q:\n%s", want, out)
		}
	}
	if out, err := runTide(t, dir, "pipeline", "rm", "stored", "--nats", url); err != nil {
		t.Fatalf("pipeline rm: %v\n%s", err, out)
	}
	waitUntil(t, "the lease released", 10*time.Second, func() bool { return leaseHolders(t, js)["stored"] == "" })
	if out, err := runTide(t, dir, "pipeline", "rm", "stored", "--nats", url); err == nil || !strings.Contains(out, `pipeline "stored" is not stored`) {
		t.Errorf("second pipeline rm: %v\n%s", err, out)
	}
	if err := w.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if err := wait(); err != nil {
		t.Errorf("worker after SIGTERM: %v", err)
	}
}

// TestWorkerErrors: bad flags and an unreachable NATS fail at once with a
// message naming what is wrong.
func TestWorkerErrors(t *testing.T) {
	dir := t.TempDir()
	bad := writePipeline(t, dir, "name: bad\nsource: {generate: {count: -1}}\nsink: {stdout: {}}\n")
	cases := map[string]struct {
		args []string
		want string
	}{
		"no nats":          {[]string{"worker"}, `required flag(s) "nats" not set`},
		"short ttl":        {[]string{"worker", "--nats", "nats://127.0.0.1:1", "--lease-ttl", "10ms"}, "--lease-ttl 10ms: want between 1s and 1h"},
		"bad id":           {[]string{"worker", "--nats", "nats://127.0.0.1:1", "--id", "a b"}, `--id "a b"`},
		"no such dir":      {[]string{"worker", "--nats", "nats://127.0.0.1:1", "--pipelines", filepath.Join(dir, "nope")}, "--pipelines"},
		"unreachable":      {[]string{"worker", "--nats", "nats://127.0.0.1:1"}, "connect to NATS at nats://127.0.0.1:1"},
		"status no nats":   {[]string{"cluster", "status", "--nats", "nats://127.0.0.1:1"}, "connect to NATS at nats://127.0.0.1:1"},
		"put invalid file": {[]string{"pipeline", "put", "-f", bad, "--nats", "nats://127.0.0.1:1"}, "count: must not be negative"},
	}
	for name, c := range cases {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			out, err := runTide(t, dir, c.args...)
			if err == nil || !strings.Contains(out, c.want) {
				t.Errorf("tide %s: err %v, want an error containing %q:\n%s", strings.Join(c.args, " "), err, c.want, out)
			}
		})
	}
}
