package main

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"

	"github.com/tide-cdc/tide"
	"github.com/tide-cdc/tide/cdc"
	"github.com/tide-cdc/tide/internal/testenv"
)

// The catch-up benchmark of issue #12: a backlog over ten collections read
// by one database-level pipeline, and by ten single-collection pipelines
// running at the same time, one after the other against the same server
// process, so that the server's own CPU is measured apart.

const catchUpCollections = 10

// catchUpRuns alternates which design goes first from one call of the
// benchmark to the next (-count), so that neither always finds the
// server warm.
var catchUpRuns atomic.Int64

// serveProcess is `tide serve` in a process of its own.
type serveProcess struct {
	cmd *exec.Cmd
	uri string
}

// startServeProcess starts tide serve on a free port with a data
// directory and waits until it logs that it is serving.
func startServeProcess(b *testing.B) *serveProcess {
	b.Helper()
	cmd := exec.Command(testenv.TideBinary(b), "serve", "--addr", "127.0.0.1:0",
		"--data-dir", filepath.Join(b.TempDir(), "serve"), "--oplog-size", "1GiB")
	stderr, err := cmd.StderrPipe()
	if err != nil {
		b.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		b.Fatal(err)
	}
	sc := bufio.NewScanner(stderr)
	var logs strings.Builder
	addr := ""
	re := regexp.MustCompile(`addr=(\S+)`)
	for sc.Scan() {
		logs.WriteString(sc.Text() + "\n")
		if m := re.FindStringSubmatch(sc.Text()); m != nil && strings.Contains(sc.Text(), "serving") {
			addr = m[1]
			break
		}
	}
	done := make(chan struct{})
	go func() { // keep reading, so that the server never blocks on a full pipe
		defer close(done)
		for sc.Scan() {
		}
	}()
	b.Cleanup(func() {
		cmd.Process.Signal(syscall.SIGTERM)
		<-done
		cmd.Wait()
	})
	if addr == "" {
		b.Fatalf("tide serve ended before serving:\n%s", logs.String())
	}
	return &serveProcess{cmd: cmd, uri: "mongodb://" + addr + "/?directConnection=true"}
}

// cpu returns the user and system CPU the server process has used, from
// /proc/PID/stat (in clock ticks of 10 ms: USER_HZ is 100 on Linux).
func (s *serveProcess) cpu(b *testing.B) time.Duration {
	b.Helper()
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", s.cmd.Process.Pid))
	if err != nil {
		b.Fatalf("server CPU: %v", err)
	}
	// The fields after the command name, which is in parentheses and may
	// hold spaces: state is the 3rd field, utime the 14th, stime the 15th.
	f := strings.Fields(string(data[bytes.LastIndexByte(data, ')')+1:]))
	utime, err1 := strconv.ParseInt(f[11], 10, 64)
	stime, err2 := strconv.ParseInt(f[12], 10, 64)
	if err1 != nil || err2 != nil {
		b.Fatalf("server CPU: cannot parse /proc/%d/stat: %q", s.cmd.Process.Pid, data)
	}
	return time.Duration(utime+stime) * 10 * time.Millisecond
}

// settle waits until the server has used no CPU for 200 ms (at most 10
// s): what it does in the background after the backlog's writes (its
// journal) is not the catch-up's cost, and would slow whichever design
// ran first.
func (s *serveProcess) settle(b *testing.B) {
	b.Helper()
	last := s.cpu(b)
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); {
		time.Sleep(200 * time.Millisecond)
		now := s.cpu(b)
		if now == last {
			return
		}
		last = now
	}
}

// catchUpSelfCPU is the user and system CPU of this process: the pipelines'.
func catchUpSelfCPU() time.Duration {
	var ru syscall.Rusage
	syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// committedCounter is the pipeline Observer of the benchmark: it counts
// committed records and closes reached once want of them are committed.
type committedCounter struct {
	want    int64
	n       atomic.Int64
	saves   atomic.Int64 // checkpoints saved, marker-only batches included
	once    sync.Once
	reached chan struct{}
}

func newCommittedCounter(want int64) *committedCounter {
	return &committedCounter{want: want, reached: make(chan struct{})}
}

func (c *committedCounter) Polled(int, int) {}

func (c *committedCounter) Failed(string, error) {}

func (c *committedCounter) Committed(n int, _ int, _ time.Duration, _ cdc.Checkpoint) {
	c.saves.Add(1)
	if c.n.Add(int64(n)) >= c.want {
		c.once.Do(func() { close(c.reached) })
	}
}

// catchUpPipeline is one pipeline file of the benchmark, with the number
// of records it must commit.
type catchUpPipeline struct {
	yaml []byte
	want int64
}

// catchUpRun is a pipeline of the benchmark while it runs.
type catchUpRun struct {
	p    *tide.Pipeline
	obs  *committedCounter
	done chan error
}

func startCatchUp(b *testing.B, cp catchUpPipeline) *catchUpRun {
	b.Helper()
	obs := newCommittedCounter(cp.want)
	p, err := buildSpec(context.Background(), cp.yaml, tide.Options{Observer: obs})
	if err != nil {
		b.Fatalf("build pipeline: %v\n%s", err, cp.yaml)
	}
	r := &catchUpRun{p: p, obs: obs, done: make(chan error, 1)}
	go func() { r.done <- p.Run(context.Background()) }()
	return r
}

// stop drains r and waits for its Run to return.
func (r *catchUpRun) stop(b *testing.B) {
	b.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := r.p.Drain(ctx); err != nil {
		b.Fatalf("drain: %v", err)
	}
	if err := <-r.done; err != nil {
		b.Fatalf("run: %v", err)
	}
}

// primeCatchUp runs each pipeline until it has saved a first checkpoint, at the
// head of the (still empty) stream, and stops it: the backlog written
// afterwards is what the measured run catches up on.
func primeCatchUp(b *testing.B, pipes []catchUpPipeline) {
	b.Helper()
	rs := make([]*catchUpRun, len(pipes))
	for i, cp := range pipes {
		cp.want = 1 << 62
		rs[i] = startCatchUp(b, cp)
	}
	deadline := time.Now().Add(time.Minute)
	for _, r := range rs {
		for r.obs.saves.Load() == 0 {
			select {
			case err := <-r.done:
				b.Fatalf("pipeline ended while priming: %v", err)
			case <-time.After(10 * time.Millisecond):
			}
			if time.Now().After(deadline) {
				b.Fatal("no checkpoint saved within a minute of the start")
			}
		}
	}
	for _, r := range rs {
		r.stop(b)
	}
}

// catchUpResult is one measured catch-up.
type catchUpResult struct {
	events    int64
	wall      time.Duration
	serverCPU time.Duration
	tideCPU   time.Duration
}

// catchUp runs pipes at the same time from their primed checkpoints until
// every one has committed its share of the backlog.
func catchUp(b *testing.B, srv *serveProcess, pipes []catchUpPipeline) catchUpResult {
	b.Helper()
	var res catchUpResult
	srv.settle(b)
	runtime.GC() // the garbage of what came before is not the pipelines' CPU
	server0, self0 := srv.cpu(b), catchUpSelfCPU()
	b.StartTimer()
	t0 := time.Now()
	rs := make([]*catchUpRun, len(pipes))
	for i, cp := range pipes {
		rs[i] = startCatchUp(b, cp)
		res.events += cp.want
	}
	for _, r := range rs {
		select {
		case <-r.obs.reached:
		case err := <-r.done:
			b.Fatalf("pipeline ended before catching up (%d of %d committed): %v", r.obs.n.Load(), r.obs.want, err)
		}
	}
	res.wall = time.Since(t0)
	b.StopTimer()
	res.serverCPU, res.tideCPU = srv.cpu(b)-server0, catchUpSelfCPU()-self0
	for _, r := range rs {
		r.stop(b)
		if got := r.obs.n.Load(); got != r.obs.want {
			b.Fatalf("committed %d records, want %d", got, r.obs.want)
		}
	}
	return res
}

// catchUpDoc is an order of 377 bytes of BSON.
func catchUpDoc(id int) bson.D {
	return bson.D{
		{Key: "_id", Value: id},
		{Key: "customer", Value: fmt.Sprintf("customer-%06d", id%50000)},
		{Key: "status", Value: "new"},
		{Key: "total", Value: float64(id%10000) / 7},
		{Key: "created", Value: time.Unix(1_700_000_000+int64(id), 0)},
		{Key: "items", Value: bson.A{
			bson.D{{Key: "sku", Value: fmt.Sprintf("sku-%05d", id%977)}, {Key: "qty", Value: 1 + id%3}, {Key: "price", Value: 9.99}},
			bson.D{{Key: "sku", Value: fmt.Sprintf("sku-%05d", id%613)}, {Key: "qty", Value: 2}, {Key: "price", Value: 24.5}},
		}},
		{Key: "note", Value: strings.Repeat("backlog ", 20)},
	}
}

// writeBacklog writes perColl changes into each collection of db: rounds
// of 1000 inserts into every collection in turn, each round followed by
// an update of 200 of the documents it inserted (5 inserts to 1 update),
// so that the oplog interleaves the collections as a busy database does.
func writeBacklog(b *testing.B, db *mongo.Database, perColl int) {
	b.Helper()
	ctx := context.Background()
	docs := make([]any, 0, 1000)
	for done, next := 0, 0; done < perColl; {
		ins := min(1000, perColl-done)
		upd := min(200, perColl-done-ins) // of the documents just inserted
		for c := range catchUpCollections {
			coll := db.Collection(fmt.Sprintf("c%d", c))
			docs = docs[:0]
			for i := range ins {
				docs = append(docs, catchUpDoc(next+i))
			}
			if _, err := coll.InsertMany(ctx, docs); err != nil {
				b.Fatal(err)
			}
			if upd == 0 {
				continue
			}
			res, err := coll.UpdateMany(ctx,
				bson.D{{Key: "_id", Value: bson.D{{Key: "$gte", Value: next}, {Key: "$lt", Value: next + upd}}}},
				bson.D{{Key: "$set", Value: bson.D{{Key: "status", Value: "paid"}}}, {Key: "$inc", Value: bson.D{{Key: "total", Value: 1.5}}}})
			if err != nil {
				b.Fatal(err)
			}
			if res.ModifiedCount != int64(upd) {
				b.Fatalf("updated %d documents, want %d", res.ModifiedCount, upd)
			}
		}
		done, next = done+ins+upd, next+ins
	}
}

// countCatchUpLines returns the number of lines of every file under dir.
func countCatchUpLines(b *testing.B, dir string) map[string]int {
	b.Helper()
	counts := map[string]int{}
	paths, err := filepath.Glob(filepath.Join(dir, "*.jsonl"))
	if err != nil {
		b.Fatal(err)
	}
	for _, p := range paths {
		data, err := os.ReadFile(p)
		if err != nil {
			b.Fatal(err)
		}
		counts[filepath.Base(p)] = bytes.Count(data, []byte("\n"))
	}
	return counts
}

// BenchmarkCatchUpOneVsTenPipelines measures the catch-up of a backlog
// over ten collections (300k changes by default, TIDE_BENCH_CHANGES to
// change it; 5 inserts to 1 update, 377-byte documents) by one
// database-level pipeline (collections: ["*"], file sink with {coll}, so
// that both designs write the same ten files) and by ten single-collection
// pipelines (collection: cN, a file each) running at the same time. Both
// run in this process, through package tide as tide run builds them;
// the server is tide serve in a process of its own, so its CPU is read
// apart. Each op is one catch-up by each design, one after the other
// against the same backlog, the order alternating between calls.
//
//	go test ./cmd/tide -run '^$' -bench CatchUpOneVsTen -benchtime 1x -count 3
func BenchmarkCatchUpOneVsTenPipelines(b *testing.B) {
	changes := 300_000
	if v := os.Getenv("TIDE_BENCH_CHANGES"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < catchUpCollections {
			b.Fatalf("TIDE_BENCH_CHANGES=%q: want a number of changes of at least %d", v, catchUpCollections)
		}
		changes = n
	}
	perColl := changes / catchUpCollections
	b.StopTimer()
	srv := startServeProcess(b)
	client := testenv.MongoClient(b, srv.uri)
	var one, ten catchUpResult
	for i := range b.N {
		dir := b.TempDir()
		dbName := fmt.Sprintf("bench%d", i)
		db := client.Database(dbName)
		for c := range catchUpCollections {
			if err := db.CreateCollection(context.Background(), fmt.Sprintf("c%d", c)); err != nil {
				b.Fatal(err)
			}
		}
		onePipe := []catchUpPipeline{{want: int64(catchUpCollections * perColl), yaml: fmt.Appendf(nil, `name: one
source:
  mongo: {uri: %q, database: %s, collections: ["*"]}
sink:
  file: {path: %q}
data_dir: %q
`, srv.uri, dbName, filepath.Join(dir, "one", "{coll}.jsonl"), filepath.Join(dir, "one-data"))}}
		var tenPipes []catchUpPipeline
		for c := range catchUpCollections {
			tenPipes = append(tenPipes, catchUpPipeline{want: int64(perColl), yaml: fmt.Appendf(nil, `name: c%d
source:
  mongo: {uri: %q, database: %s, collection: c%d}
sink:
  file: {path: %q}
data_dir: %q
`, c, srv.uri, dbName, c, filepath.Join(dir, "ten", fmt.Sprintf("c%d.jsonl", c)), filepath.Join(dir, fmt.Sprintf("ten-data-%d", c)))})
		}
		primeCatchUp(b, append(onePipe, tenPipes...))
		writeBacklog(b, db, perColl)
		if catchUpRuns.Add(1)%2 == 1 {
			one = one.plus(catchUp(b, srv, onePipe))
			ten = ten.plus(catchUp(b, srv, tenPipes))
		} else {
			ten = ten.plus(catchUp(b, srv, tenPipes))
			one = one.plus(catchUp(b, srv, onePipe))
		}
		// Both wrote the same ten files, each with its collection's changes.
		oneLines, tenLines := countCatchUpLines(b, filepath.Join(dir, "one")), countCatchUpLines(b, filepath.Join(dir, "ten"))
		for c := range catchUpCollections {
			name := fmt.Sprintf("c%d.jsonl", c)
			if oneLines[name] != perColl || tenLines[name] != perColl {
				b.Fatalf("%s: %d lines from the one pipeline, %d from the ten, want %d", name, oneLines[name], tenLines[name], perColl)
			}
		}
		if err := db.Drop(context.Background()); err != nil {
			b.Fatal(err)
		}
	}
	perEvent := func(d time.Duration, r catchUpResult) float64 {
		return float64(d.Nanoseconds()) / 1e3 / float64(r.events)
	}
	rate := func(r catchUpResult) float64 { return float64(r.events) / r.wall.Seconds() }
	b.ReportMetric(rate(one), "one-events/s")
	b.ReportMetric(rate(ten), "ten-events/s")
	b.ReportMetric(rate(one)/rate(ten), "speed-one/ten")
	b.ReportMetric(perEvent(one.serverCPU, one), "one-server-cpu-µs/event")
	b.ReportMetric(perEvent(ten.serverCPU, ten), "ten-server-cpu-µs/event")
	b.ReportMetric(float64(one.serverCPU)/float64(ten.serverCPU), "server-cpu-one/ten")
	b.ReportMetric(perEvent(one.tideCPU, one), "one-tide-cpu-µs/event")
	b.ReportMetric(perEvent(ten.tideCPU, ten), "ten-tide-cpu-µs/event")
	b.ReportMetric(float64(one.tideCPU)/float64(ten.tideCPU), "tide-cpu-one/ten")
}

func (a catchUpResult) plus(b catchUpResult) catchUpResult {
	return catchUpResult{a.events + b.events, a.wall + b.wall, a.serverCPU + b.serverCPU, a.tideCPU + b.tideCPU}
}

// buildSpec parses text and builds its pipeline, as tide run does.
func buildSpec(ctx context.Context, text []byte, opts tide.Options) (*tide.Pipeline, error) {
	spec, err := tide.Parse(text, opts)
	if err != nil {
		return nil, err
	}
	return spec.Build(ctx)
}
