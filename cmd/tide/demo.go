package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"
	"go.mongodb.org/mongo-driver/v2/mongo/writeconcern"

	"github.com/tide-cdc/tide"
	"github.com/tide-cdc/tide/internal/status"
	"github.com/tide-cdc/tide/mongowire"
	"github.com/tide-cdc/tide/pipeline"
)

type demoFlags struct {
	dir      string
	events   int
	rate     float64
	progress string
	nats     bool
	toMongo  bool
	httpAddr string // the status page; "" for none
	authFile string
	insecure bool // --http-insecure
}

func newDemoCmd() *cobra.Command {
	var f demoFlags
	cmd := &cobra.Command{
		Use:   "demo",
		Short: "Stream MongoDB changes into a JSON-lines file, with nothing installed",
		Long: `Start the embedded MongoDB-compatible server in process, create demo.orders,
and run a writer of inserts, updates, replaces and deletes at a steady rate.
Tide streams the changes through its change-stream source and the full
runtime (ordered parallel encode, fsync on commit, durable checkpoint) into
./tide-demo/orders.jsonl, with a live status line. At the end it prints the
events by type and the throughput, and checks that the file holds exactly
the writer's changes, in order. Run it again and it resumes from the
checkpoint.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return runDemo(cmd.Context(), f, cmd.OutOrStdout(), cmd.ErrOrStderr())
		},
	}
	cmd.Flags().StringVar(&f.dir, "dir", "tide-demo", "directory for the data, the checkpoint and orders.jsonl")
	cmd.Flags().IntVar(&f.events, "events", 20000, "changes the writer makes in this run")
	cmd.Flags().Float64Var(&f.rate, "rate", 5000, "changes per second (0 = as fast as possible)")
	cmd.Flags().StringVar(&f.progress, "progress", "auto", "live status line: auto (on a terminal), always, never")
	cmd.Flags().StringVar(&f.httpAddr, "http-addr", "127.0.0.1:0", `serve the status page, /api/status and /metrics here (default: a free loopback port); "" for none`)
	cmd.Flags().StringVar(&f.authFile, "http-auth-file", "", "require basic auth on --http-addr: a file of one user:password (or user:bcrypt-hash) line; needed off loopback")
	cmd.Flags().BoolVar(&f.insecure, "http-insecure", false, "allow --http-addr off loopback without --http-auth-file, open to anyone who reaches it")
	cmd.Flags().BoolVar(&f.nats, "nats", false, "stream NATS JetStream messages instead, from an embedded nats-server, into orders-nats.jsonl")
	cmd.Flags().BoolVar(&f.toMongo, "to-mongo", false, "keep a second embedded MongoDB in sync instead (the MongoDB sink, mirror mode, exactly-once), and check it equals the first at the end")
	return cmd
}

// demoChange is one change the writer made: what the file must show.
type demoChange struct {
	Op string
	ID int64
}

func runDemo(ctx context.Context, f demoFlags, stdout, stderr io.Writer) error {
	if f.nats && f.toMongo {
		return fmt.Errorf("--nats and --to-mongo: choose one demo")
	}
	// Refused here, before any server starts; serve applies it again.
	if err := status.CheckBind(f.httpAddr, f.authFile, f.insecure); err != nil {
		return err
	}
	if f.nats {
		return runNATSDemo(ctx, f, stdout, stderr)
	}
	if f.toMongo {
		return runMongoCopyDemo(ctx, f, stdout, stderr)
	}
	if err := checkDemoFlags(f); err != nil {
		return err
	}
	log := demoLogger(stderr)
	ds, err := startDemoServer(ctx, filepath.Join(f.dir, "mongo"), log)
	if err != nil {
		return err
	}
	defer ds.close()
	srv, orders := ds.srv, ds.orders

	logPath := filepath.Join(f.dir, "writer.log")
	out := filepath.Join(f.dir, "orders.jsonl")
	history, err := readWriterLog(logPath)
	if err != nil {
		return err
	}
	// The demo's pipeline is a pipeline file like a user's, built the
	// same way; its data directory's lock makes the demo single-owner.
	page := newDemoStatus()
	spec, p, err := buildDemo(ctx, fmt.Appendf(nil, `name: demo
source:
  mongo: {uri: %q, database: demo, collection: orders, snapshot: never, max_await: 100ms}
sink:
  file: {path: %q}
data_dir: %q
batch: {commit_interval: 100ms}
`, srv.URI(), out, filepath.Join(f.dir, ".tide")), page.options(log))
	if err != nil {
		return err
	}
	defer p.Close()
	// The changes already in the file are those its checkpoint names: its
	// committed bytes. Counted from the checkpoint, not from the file once
	// the pipeline runs, which may have committed more by then.
	before, err := committedLines(ctx, spec, out)
	if err != nil {
		return err
	}
	fmt.Fprintf(stdout, "tide demo: embedded MongoDB at %s; writing %d changes to demo.orders at %s; streaming into %s\n",
		srv.URI(), f.events, rateString(f.rate), out)
	page.tracker.Attach(p.Name, p, p.Source, nil)
	stopPage, err := page.serve(f, stdout, log)
	if err != nil {
		return err
	}
	defer stopPage()

	var logFile *os.File
	defer func() {
		if logFile != nil {
			logFile.Close()
		}
	}()
	// The writer starts only once the source has taken its exact start
	// point: a fresh stream begins after the last write that preceded it.
	start := func() (demoProducer, error) {
		if before > 0 {
			fmt.Fprintf(stdout, "resuming from the checkpoint: %d changes already in the file\n", before)
		}
		var err error
		logFile, err = os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
		if err != nil {
			return nil, err
		}
		w := &demoWriter{coll: orders, log: bufio.NewWriter(logFile), live: liveIDs(history), rng: rand.New(rand.NewPCG(uint64(time.Now().UnixNano()), 7)),
			events: f.events, rate: f.rate, owed: int64(len(history)) - before}
		for _, c := range history {
			w.next = max(w.next, c.ID)
		}
		return w, nil
	}
	res, err := demoRun{pipeline: p, committed: page.signal.committed, start: start, progress: f.progress, stderr: stderr, unit: "changes",
		status: func(now time.Time) string { return "lag " + lagOf(p) }}.run(ctx)
	if err != nil {
		return err
	}

	all, err := readWriterLog(logPath)
	if err != nil {
		return err
	}
	n, byOp, err := verifyDemoFile(out, all, before)
	if err != nil {
		return fmt.Errorf("demo output check failed: %w", err)
	}
	printDemoStreamed(stdout, "", "changes", p.Stats(), res.took, countsByOp(byOp, "insert", "update", "replace", "delete"))
	return printDemoCheck(stdout, demoCheck{file: out, held: n, made: int64(len(all)), what: "the writer's %d changes", order: "in order", command: "tide demo"}, res.interrupted)
}

// demoServer is a demo's embedded MongoDB, a client of it and its
// demo.orders, created if missing.
type demoServer struct {
	srv    *mongowire.Server
	client *mongo.Client
	orders *mongo.Collection
}

// startDemoServer starts an embedded server keeping its data in dir. On
// an error it closes what it started.
func startDemoServer(ctx context.Context, dir string, log *slog.Logger) (*demoServer, error) {
	srv := mongowire.New(mongowire.Config{Addr: "127.0.0.1:0", DataDir: dir, Logger: log})
	if err := srv.Start(); err != nil {
		return nil, fmt.Errorf("start embedded server in %s: %w", dir, err)
	}
	client, err := mongo.Connect(options.Client().ApplyURI(srv.URI()))
	if err != nil {
		srv.Close()
		return nil, err
	}
	ds := &demoServer{srv: srv, client: client}
	// w: 1, not the default majority, which waits for the journal's fsync
	// on every write: a single writer would then fall far below --rate.
	ds.orders = client.Database("demo").Collection("orders", options.Collection().SetWriteConcern(writeconcern.W1()))
	if err := client.Database("demo").CreateCollection(ctx, "orders"); err != nil && !isNamespaceExists(err) {
		ds.close()
		return nil, fmt.Errorf("create demo.orders: %w", err)
	}
	return ds, nil
}

func (ds *demoServer) close() {
	ds.client.Disconnect(context.Background())
	ds.srv.Close()
}

// countsByOp lists the counts of ops, in that order.
func countsByOp(byOp map[string]int64, ops ...string) []demoCount {
	counts := make([]demoCount, 0, len(ops))
	for _, op := range ops {
		counts = append(counts, demoCount{op, byOp[op]})
	}
	return counts
}

func isNamespaceExists(err error) bool {
	var se mongo.ServerError
	return errors.As(err, &se) && se.HasErrorCode(48)
}

func rateString(rate float64) string {
	if rate <= 0 {
		return "full speed"
	}
	return fmt.Sprintf("%.0f/s", rate)
}

// demoWriter makes a steady mix of changes and logs each one after the
// server acknowledged it, so that the check knows exactly what happened.
type demoWriter struct {
	coll    *mongo.Collection
	log     *bufio.Writer
	live    []int64 // ids of documents that exist
	next    int64   // the last id inserted
	rng     *rand.Rand
	events  int     // changes to make in this run
	rate    float64 // changes per second; 0 = as fast as possible
	owed    int64   // changes of earlier runs the file does not hold yet
	written int
}

func (w *demoWriter) produce(ctx context.Context) error {
	if err := w.run(ctx, w.events, w.rate); err != nil {
		return fmt.Errorf("demo writer: %w", err)
	}
	return nil
}

// caughtUp reports whether the pipeline streamed, in this run, every
// change the file lacked: those of earlier runs and this run's.
func (w *demoWriter) caughtUp(st pipeline.Stats) bool {
	return st.EventsOut >= w.owed+int64(w.written)
}

func (w *demoWriter) run(ctx context.Context, n int, rate float64) error {
	defer w.log.Flush()
	var tick *time.Ticker
	if rate > 0 {
		tick = time.NewTicker(time.Duration(float64(time.Second) / rate))
		defer tick.Stop()
	}
	for w.written < n {
		if tick != nil {
			select {
			case <-tick.C:
			case <-ctx.Done():
				return ctx.Err()
			}
		} else if err := ctx.Err(); err != nil {
			return err
		}
		// A change runs to completion even if a signal arrives meanwhile:
		// cancelling it mid-flight could leave a write applied but unlogged.
		c, err := w.change(context.WithoutCancel(ctx))
		if err != nil {
			return err
		}
		fmt.Fprintf(w.log, "%s %d\n", c.Op, c.ID)
		w.written++
	}
	return nil
}

func (w *demoWriter) change(ctx context.Context) (demoChange, error) {
	r := w.rng.IntN(100)
	if len(w.live) < 10 || r < 50 {
		w.next++
		id := w.next
		_, err := w.coll.InsertOne(ctx, bson.D{{Key: "_id", Value: id}, {Key: "customer", Value: fmt.Sprintf("c%03d", w.rng.IntN(500))},
			{Key: "qty", Value: 1 + w.rng.IntN(9)}, {Key: "status", Value: "new"}, {Key: "created", Value: time.Now()}})
		w.live = append(w.live, id)
		return demoChange{"insert", id}, err
	}
	i := w.rng.IntN(len(w.live))
	id := w.live[i]
	// Every change sets a new revision, so none is a no-op: MongoDB
	// records no event for a write that leaves the document as it was.
	rev := w.written + 1
	filter := bson.D{{Key: "_id", Value: id}}
	switch {
	case r < 75:
		res, err := w.coll.UpdateOne(ctx, filter, bson.D{
			{Key: "$inc", Value: bson.D{{Key: "qty", Value: 1}}},
			{Key: "$set", Value: bson.D{{Key: "status", Value: "paid"}, {Key: "rev", Value: rev}}}})
		if err == nil && res.ModifiedCount != 1 {
			err = fmt.Errorf("update of _id %d modified %d documents", id, res.ModifiedCount)
		}
		return demoChange{"update", id}, err
	case r < 85:
		res, err := w.coll.ReplaceOne(ctx, filter,
			bson.D{{Key: "customer", Value: "replaced"}, {Key: "qty", Value: 0}, {Key: "status", Value: "replaced"}, {Key: "rev", Value: rev}})
		if err == nil && res.ModifiedCount != 1 {
			err = fmt.Errorf("replace of _id %d modified %d documents", id, res.ModifiedCount)
		}
		return demoChange{"replace", id}, err
	default:
		res, err := w.coll.DeleteOne(ctx, filter)
		if err == nil && res.DeletedCount != 1 {
			err = fmt.Errorf("delete of _id %d deleted %d documents", id, res.DeletedCount)
		}
		w.live = slices.Delete(w.live, i, i+1)
		return demoChange{"delete", id}, err
	}
}

func liveIDs(history []demoChange) []int64 {
	live := map[int64]bool{}
	for _, c := range history {
		switch c.Op {
		case "insert":
			live[c.ID] = true
		case "delete":
			delete(live, c.ID)
		}
	}
	ids := make([]int64, 0, len(live))
	for id := range live {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	return ids
}

func readWriterLog(path string) ([]demoChange, error) {
	data, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var out []demoChange
	for i, line := range strings.Split(strings.TrimSpace(string(data)), "\n") {
		if line == "" {
			continue
		}
		op, idText, ok := strings.Cut(line, " ")
		id, err := strconv.ParseInt(idText, 10, 64)
		if !ok || err != nil {
			return nil, fmt.Errorf("%s line %d: %q is not \"<op> <id>\"", path, i+1, line)
		}
		out = append(out, demoChange{op, id})
	}
	return out, nil
}

// committedLines counts the lines in the part of path that the
// pipeline's checkpoint names as committed (the file sink's
// committed_bytes): what the file holds for sure when the pipeline opens.
func committedLines(ctx context.Context, spec *tide.Spec, path string) (int64, error) {
	store, err := spec.Checkpoints(ctx)
	if err != nil {
		return 0, err
	}
	defer store.Close()
	cp, err := store.Load(ctx)
	if err != nil || cp == nil || cp.Sink == nil {
		return 0, err
	}
	var st struct {
		CommittedBytes int64 `json:"committed_bytes"`
	}
	if err := json.Unmarshal(cp.Sink, &st); err != nil {
		return 0, fmt.Errorf("file sink state %s: %w", cp.Sink, err)
	}
	f, err := os.Open(path)
	if err != nil {
		return 0, err
	}
	defer f.Close()
	var n int64
	buf := make([]byte, 1<<20)
	for r := io.LimitReader(f, st.CommittedBytes); ; {
		k, err := r.Read(buf)
		n += int64(bytes.Count(buf[:k], []byte{'\n'}))
		if err == io.EOF {
			return n, nil
		}
		if err != nil {
			return 0, err
		}
	}
}

func countLines(path string) (int64, error) {
	f, err := os.Open(path)
	if errors.Is(err, os.ErrNotExist) {
		return 0, nil
	}
	if err != nil {
		return 0, err
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 1<<24)
	var n int64
	for sc.Scan() {
		n++
	}
	return n, sc.Err()
}

// verifyDemoFile checks the output the way a user would: every line is a
// JSON change event, and the sequence of (operation, _id) is exactly the
// writer's, in order. It returns how many changes the file holds, and
// how many of each operation there are after its first from lines (what
// this run streamed).
func verifyDemoFile(path string, want []demoChange, from int64) (int64, map[string]int64, error) {
	byOp := map[string]int64{}
	fh, err := os.Open(path)
	if err != nil {
		return 0, byOp, err
	}
	defer fh.Close()
	sc := bufio.NewScanner(fh)
	sc.Buffer(make([]byte, 1<<20), 1<<24)
	var n int64
	for sc.Scan() {
		var line struct {
			Namespace string `json:"_namespace"`
			Op        string `json:"_op"`
			Key       struct {
				ID int64 `json:"_id"`
			} `json:"_document_key"`
		}
		if err := json.Unmarshal(sc.Bytes(), &line); err != nil {
			return n, byOp, fmt.Errorf("line %d: %w", n+1, err)
		}
		if n >= int64(len(want)) {
			return n, byOp, fmt.Errorf("line %d: %s %d, but the writer made only %d changes", n+1, line.Op, line.Key.ID, len(want))
		}
		if w := want[n]; line.Op != w.Op || line.Key.ID != w.ID || line.Namespace != "demo.orders" {
			return n, byOp, fmt.Errorf("line %d: got %s of _id %d in %s, want %s of _id %d in demo.orders", n+1, line.Op, line.Key.ID, line.Namespace, w.Op, w.ID)
		}
		if n >= from {
			byOp[line.Op]++
		}
		n++
	}
	return n, byOp, sc.Err()
}
