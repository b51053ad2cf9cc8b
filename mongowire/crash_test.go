package mongowire

import (
	"bufio"
	"context"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"os"
	"os/exec"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"
)

// crashChildEnv makes the test binary stand in for `tide serve --data-dir`:
// TestMain serves from the directory it names until it is killed.
const crashChildEnv = "MONGOWIRE_CRASH_CHILD_DIR"

// crashChild serves from dir on a free port, prints the address on stdout
// and waits to be killed.
func crashChild(dir string) {
	s := New(Config{
		Addr:    "127.0.0.1:0",
		DataDir: dir,
		Logger:  slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn})),
	})
	if err := s.Start(); err != nil {
		fmt.Fprintln(os.Stderr, "start:", err)
		os.Exit(2)
	}
	fmt.Println(s.Addr())
	select {}
}

// crashServer is one run of the child process.
type crashServer struct {
	cmd    *exec.Cmd
	addr   string
	exited chan struct{}
	stderr strings.Builder
}

func startCrashServer(t *testing.T, dir string) *crashServer {
	t.Helper()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	cs := &crashServer{cmd: exec.Command(exe, "-test.run=^$"), exited: make(chan struct{})}
	cs.cmd.Env = append(os.Environ(), crashChildEnv+"="+dir)
	cs.cmd.Stderr = &cs.stderr
	out, err := cs.cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cs.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	addr := make(chan string, 1)
	go func() {
		line, _ := bufio.NewReader(out).ReadString('\n')
		addr <- strings.TrimSpace(line)
		cs.cmd.Wait()
		close(cs.exited)
	}()
	t.Cleanup(func() { cs.kill() })
	select {
	case cs.addr = <-addr:
	case <-time.After(30 * time.Second):
		t.Fatal("the server process did not print its address")
	}
	if cs.addr == "" {
		<-cs.exited
		t.Fatalf("the server process failed to start: %s", cs.stderr.String())
	}
	return cs
}

// kill SIGKILLs the process and waits for it to be gone.
func (cs *crashServer) kill() {
	cs.cmd.Process.Signal(syscall.SIGKILL)
	<-cs.exited
}

func crashClient(t *testing.T, addr string) *mongo.Client {
	t.Helper()
	c, err := mongo.Connect(options.Client().
		ApplyURI("mongodb://" + addr + "/?directConnection=true").
		SetRetryWrites(false).
		SetServerSelectionTimeout(10 * time.Second))
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func replicaSetID(t *testing.T, c *mongo.Client) bson.ObjectID {
	t.Helper()
	r, err := c.Database("admin").RunCommand(t.Context(), bson.D{{Key: "replSetGetConfig", Value: 1}}).Raw()
	if err != nil {
		t.Fatal(err)
	}
	return r.Lookup("config", "settings", "replicaSetId").ObjectID()
}

// TestSIGKILLKeepsAcknowledgedWrites kills a server process with SIGKILL
// at random moments while clients insert and update, restarting it on the
// same data directory each time: every acknowledged write is there after
// the restart (documents, increments, created collections and indexes), no
// increment appears twice, the replica set
// id stays, and a change stream resumes across all the restarts from a
// token taken before the first kill and sees every acknowledged insert.
func TestSIGKILLKeepsAcknowledgedWrites(t *testing.T) {
	if testing.Short() {
		t.Skip("starts server processes; skipped in -short mode")
	}
	const rounds, writers = 4, 4
	dir := t.TempDir()
	seed := uint64(time.Now().UnixNano())
	t.Logf("seed %d", seed)
	rng := rand.New(rand.NewPCG(seed, 0))

	var (
		rsID      bson.ObjectID
		token     bson.Raw // taken before the first kill
		acked     []string // ids of acknowledged inserts, all rounds
		ackedDDL  []string // collections whose index creation was acknowledged
		ackedIncs int64
		triedIncs int64
	)
	for round := range rounds + 1 {
		srv := startCrashServer(t, dir)
		c := crashClient(t, srv.addr)
		ctx := t.Context()
		coll := c.Database("d").Collection("c")

		id := replicaSetID(t, c)
		if round == 0 {
			rsID = id
			if _, err := coll.InsertOne(ctx, bson.D{{Key: "_id", Value: "ctr"}, {Key: "n", Value: int64(0)}}); err != nil {
				t.Fatal(err)
			}
			cs, err := coll.Watch(ctx, mongo.Pipeline{})
			if err != nil {
				t.Fatal(err)
			}
			token = slices.Clone(cs.ResumeToken())
			cs.Close(ctx)
		} else if id != rsID {
			t.Fatalf("round %d: replicaSetId %v, want %v", round, id, rsID)
		}

		// Every write acknowledged so far is there.
		cur, err := coll.Find(ctx, bson.D{})
		if err != nil {
			t.Fatal(err)
		}
		var docs []bson.Raw
		if err := cur.All(ctx, &docs); err != nil {
			t.Fatal(err)
		}
		have := map[string]bool{}
		var n int64
		for _, d := range docs {
			if k := d.Lookup("_id").StringValue(); k == "ctr" {
				n = d.Lookup("n").Int64()
			} else {
				have[k] = true
			}
		}
		for _, k := range acked {
			if !have[k] {
				t.Fatalf("round %d: acknowledged insert %s lost (of %d acknowledged)", round, k, len(acked))
			}
		}
		for _, name := range ackedDDL {
			specs, err := c.Database("d").Collection(name).Indexes().ListSpecifications(ctx)
			if err != nil || len(specs) != 2 || specs[1].Name != "k_1" {
				t.Fatalf("round %d: acknowledged index on %s lost: %v, %v", round, name, specs, err)
			}
		}
		if n < ackedIncs || n > triedIncs {
			t.Fatalf("round %d: counter %d, want between %d acknowledged and %d tried increments", round, n, ackedIncs, triedIncs)
		}
		ackedIncs = n // in-flight increments that landed are now known
		triedIncs = n

		if round == rounds {
			checkResumeSeesAll(t, coll, token, acked)
			c.Disconnect(ctx)
			break
		}

		// Write until the kill.
		wctx, stop := context.WithCancel(ctx)
		var (
			mu    sync.Mutex
			wg    sync.WaitGroup
			count atomic.Int64
			tried atomic.Int64
			incs  atomic.Int64
		)
		for w := range writers {
			wg.Go(func() {
				for i := 0; ; i++ {
					k := fmt.Sprintf("r%d-w%d-%d", round, w, i)
					if _, err := coll.InsertOne(wctx, bson.D{{Key: "_id", Value: k}, {Key: "pad", Value: strings.Repeat("x", 100)}}); err != nil {
						return
					}
					mu.Lock()
					acked = append(acked, k)
					mu.Unlock()
					count.Add(1)
					tried.Add(1)
					if _, err := coll.UpdateOne(wctx, bson.D{{Key: "_id", Value: "ctr"}}, bson.D{{Key: "$inc", Value: bson.D{{Key: "n", Value: int64(1)}}}}); err != nil {
						return
					}
					incs.Add(1)
				}
			})
		}
		wg.Go(func() { // DDL: collections with an index, acknowledged one by one
			for i := 0; ; i++ {
				name := fmt.Sprintf("ddl_r%d_%d", round, i)
				_, err := c.Database("d").Collection(name).Indexes().CreateOne(wctx, mongo.IndexModel{Keys: bson.D{{Key: "k", Value: 1}}})
				if err != nil {
					return
				}
				mu.Lock()
				ackedDDL = append(ackedDDL, name)
				mu.Unlock()
			}
		})
		// Kill at a random moment once writes are flowing.
		deadline := time.Now().Add(20 * time.Second)
		for count.Load() < 20 && time.Now().Before(deadline) {
			time.Sleep(5 * time.Millisecond)
		}
		time.Sleep(time.Duration(rng.IntN(150)) * time.Millisecond)
		srv.kill()
		stop()
		wg.Wait()
		c.Disconnect(context.Background())
		if count.Load() < 20 {
			t.Fatalf("round %d: only %d inserts acknowledged before the kill: %s", round, count.Load(), srv.stderr.String())
		}
		ackedIncs += incs.Load()
		triedIncs += tried.Load()
		t.Logf("round %d: killed after %d acknowledged inserts, %d collections created in all", round, count.Load(), len(ackedDDL))
	}
}

// checkResumeSeesAll resumes a collection change stream after token and
// requires an insert event for every acknowledged id.
func checkResumeSeesAll(t *testing.T, coll *mongo.Collection, token bson.Raw, acked []string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	cs, err := coll.Watch(ctx, mongo.Pipeline{}, options.ChangeStream().SetResumeAfter(token).SetBatchSize(1000).SetMaxAwaitTime(100*time.Millisecond))
	if err != nil {
		t.Fatalf("resume after restarts: %v", err)
	}
	defer cs.Close(context.Background())
	want := map[string]bool{}
	for _, k := range acked {
		want[k] = true
	}
	var last bson.Timestamp
	for len(want) > 0 {
		if !cs.Next(ctx) {
			t.Fatalf("change stream ended with %d acknowledged inserts unseen: %v", len(want), cs.Err())
		}
		tt, ti := cs.Current.Lookup("clusterTime").Timestamp()
		ts := bson.Timestamp{T: tt, I: ti}
		if ts.Compare(last) <= 0 {
			t.Fatalf("clusterTime %v after %v: not increasing", ts, last)
		}
		last = ts
		if opType(cs.Current) == "insert" {
			delete(want, cs.Current.Lookup("documentKey", "_id").StringValue())
		}
	}
}

// Two servers never share a data directory: the second is refused while
// the first runs, and starts once it has closed.
func TestDataDirLocked(t *testing.T) {
	dir := t.TempDir()
	cfg := Config{Addr: "127.0.0.1:0", DataDir: dir, Logger: slog.New(slog.DiscardHandler)}
	first := New(cfg)
	if err := first.Start(); err != nil {
		t.Fatal(err)
	}
	second := New(cfg)
	err := second.Start()
	if err == nil || !strings.Contains(err.Error(), "in use by another server") {
		second.Close()
		t.Fatalf("second server on the same data directory: %v, want it refused", err)
	}
	if err := first.Close(); err != nil {
		t.Fatal(err)
	}
	third := New(cfg)
	if err := third.Start(); err != nil {
		t.Fatalf("start after the first closed: %v", err)
	}
	if err := third.Close(); err != nil {
		t.Fatal(err)
	}
}
