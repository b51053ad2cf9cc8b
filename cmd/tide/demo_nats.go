package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strconv"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/tide-cdc/tide/cdc"
	"github.com/tide-cdc/tide/pipeline"
)

// The NATS demo's fixed names.
const (
	natsDemoStream   = "ORDERS"
	natsDemoSubjects = "orders.>"
	natsDemoConsumer = "tide-demo"
	natsDemoPipeline = "demo-nats"
	natsDemoAckWait  = 5 * time.Second
)

// natsDemoKinds are the subjects, in the order the summary lists them.
var natsDemoKinds = []string{"orders.created", "orders.paid", "orders.shipped", "orders.cancelled"}

// natsDemoSubject is the subject of the order message with sequence number
// seq. It is a function of seq so that the check can tell a message on the
// wrong subject: half are created, 3 in 10 paid, 1 in 10 shipped or
// cancelled.
func natsDemoSubject(seq int64) string {
	switch r := seq % 10; {
	case r < 5:
		return natsDemoKinds[0]
	case r < 8:
		return natsDemoKinds[1]
	case r < 9:
		return natsDemoKinds[2]
	default:
		return natsDemoKinds[3]
	}
}

// natsOrder is the payload of a demo message.
type natsOrder struct {
	Seq         int64  `json:"seq"` // 1, 2, ... across runs; equal to the stream sequence
	Order       string `json:"order"`
	Customer    string `json:"customer"`
	AmountCents int    `json:"amount_cents"`
	At          string `json:"at"`
}

// runNATSDemo is `tide demo --nats`: an embedded JetStream server, a
// publisher of order messages, and Tide's JetStream source streaming them
// through the runtime into a JSON-lines file.
func runNATSDemo(ctx context.Context, f demoFlags, stdout, stderr io.Writer) error {
	if err := checkDemoFlags(f); err != nil {
		return err
	}
	log := demoLogger(stderr)
	srv, err := startDemoNATS(filepath.Join(f.dir, "nats"))
	if err != nil {
		return err
	}
	defer func() { srv.Shutdown(); srv.WaitForShutdown() }()
	url := srv.ClientURL()

	nc, err := nats.Connect(url, nats.Name("tide demo publisher"))
	if err != nil {
		return fmt.Errorf("connect to the embedded nats-server: %w", err)
	}
	defer nc.Close()
	js, err := jetstream.New(nc, jetstream.WithPublishAsyncTimeout(5*time.Second), jetstream.WithPublishAsyncMaxPending(2*natsDemoWindow))
	if err != nil {
		return fmt.Errorf("jetstream: %w", err)
	}
	stream, err := demoStream(ctx, js)
	if err != nil {
		return err
	}
	published, lastStreamSeq, err := natsDemoPublished(ctx, stream, f.dir)
	if err != nil {
		return err
	}

	out := filepath.Join(f.dir, "orders-nats.jsonl")
	before, err := countLines(out)
	if err != nil {
		return err
	}
	fmt.Fprintf(stdout, "tide demo: embedded NATS JetStream at %s; publishing %d orders to stream %s (%s) at %s; streaming into %s\n",
		url, f.events, natsDemoStream, natsDemoSubjects, rateString(f.rate), out)
	if before > 0 || published > 0 {
		fmt.Fprintf(stdout, "resuming from the checkpoint: %d messages already in the file, %d in the stream\n", before, published)
	}
	if info, err := natsDemoConsumerInfo(ctx, js); err == nil && info.NumAckPending > 0 {
		fmt.Fprintf(stdout, "the last run left %d messages delivered and not acknowledged: the source resets the consumer to the message after its checkpoint and reads them again, in order, at once\n",
			info.NumAckPending)
	} else if err != nil && !errors.Is(err, jetstream.ErrConsumerNotFound) {
		return err
	}

	// Above two batches plus the source's queue: delivery never waits for
	// a commit.
	maxAckPending := 2*pipeline.DefaultMaxRecords + 4*500 + 1000
	page := newDemoStatus()
	_, p, err := buildDemo(ctx, fmt.Appendf(nil, `name: %s
source:
  nats:
    servers: [%q]
    stream: %s
    consumer: %s
    filter_subjects: [%q]
    deliver: all
    ack: explicit
    ack_wait: %s
    max_ack_pending: %d
    lag_poll_interval: 500ms
sink:
  file: {path: %q}
data_dir: %q
batch: {commit_interval: 100ms}
`, natsDemoPipeline, url, natsDemoStream, natsDemoConsumer, natsDemoSubjects, natsDemoAckWait, maxAckPending, out, filepath.Join(f.dir, ".tide-nats")), page.options(log))
	if err != nil {
		return err
	}
	defer p.Close()
	page.tracker.Attach(p.Name, p, p.Source, nil)
	stopPage, err := page.serve(f, stdout, log)
	if err != nil {
		return err
	}
	defer stopPage()

	pub := &natsPublisher{js: js, seq: published, streamSeq: lastStreamSeq, rng: rand.New(rand.NewPCG(uint64(time.Now().UnixNano()), 11)),
		events: f.events, rate: f.rate}
	// The publisher starts only once the source is open: a checkpoint or a
	// consumer that does not match stops the demo before it adds to the
	// stream.
	start := func() (demoProducer, error) { return pub, nil }
	res, err := demoRun{pipeline: p, committed: page.signal.committed, start: start, progress: f.progress, stderr: stderr, unit: "messages",
		status: func(time.Time) string { return "consumer pending " + lagOf(p) }}.run(ctx)
	if err != nil {
		return err
	}

	var counts []demoCount
	for _, subj := range natsDemoKinds {
		counts = append(counts, demoCount{subj, page.signal.committedIn(subj)})
	}
	printDemoStreamed(stdout, fmt.Sprintf("published %d orders; ", pub.published), "messages", p.Stats(), res.took, counts)

	// The source has closed: every ack it sent has been confirmed or
	// abandoned, so the consumer's state is final for this run.
	info, err := natsDemoConsumerInfo(ctx, js)
	if err != nil {
		return err
	}
	total, streamSeq, err := natsDemoPublished(ctx, stream, f.dir)
	if err != nil {
		return err
	}
	fmt.Fprintf(stdout, "consumer %s: ack floor at stream sequence %d of %d; %d pending, %d delivered and not acknowledged\n",
		natsDemoConsumer, info.AckFloor.Stream, streamSeq, info.NumPending, info.NumAckPending)
	settled := info.NumPending == 0 && info.NumAckPending == 0 && info.AckFloor.Stream == streamSeq
	if !settled && !res.interrupted {
		return fmt.Errorf("demo consumer check failed: consumer %s acknowledged up to stream sequence %d of %d with %d pending and %d unacknowledged after the drain; "+
			"every message must be acknowledged once it is in %s", natsDemoConsumer, info.AckFloor.Stream, streamSeq, info.NumPending, info.NumAckPending, out)
	}

	n, err := verifyNATSDemoFile(out, total)
	if err != nil {
		return fmt.Errorf("demo output check failed: %w", err)
	}
	return printDemoCheck(stdout, demoCheck{file: out, held: n, made: total, what: "the %d published messages", order: "in stream order",
		exact: fmt.Sprintf(" (seq 1..%d)", total), command: "tide demo --nats"}, res.interrupted)
}

// startDemoNATS starts an in-process nats-server with JetStream on a free
// port of 127.0.0.1, storing its streams under storeDir. It logs nothing
// and leaves the signals to the demo.
func startDemoNATS(storeDir string) (*server.Server, error) {
	srv, err := server.NewServer(&server.Options{
		ServerName: "tide-demo",
		Host:       "127.0.0.1", Port: server.RANDOM_PORT,
		JetStream: true, StoreDir: storeDir,
		NoLog: true, NoSigs: true,
	})
	if err != nil {
		return nil, fmt.Errorf("embedded nats-server: %w", err)
	}
	srv.Start()
	if !srv.ReadyForConnections(10 * time.Second) {
		srv.Shutdown()
		srv.WaitForShutdown()
		return nil, fmt.Errorf("embedded nats-server with store %s not ready for connections after 10s", storeDir)
	}
	return srv, nil
}

// demoStream returns the ORDERS stream, creating it if it is missing.
func demoStream(ctx context.Context, js jetstream.JetStream) (jetstream.Stream, error) {
	s, err := js.Stream(ctx, natsDemoStream)
	if err == nil {
		return s, nil
	}
	if !errors.Is(err, jetstream.ErrStreamNotFound) {
		return nil, fmt.Errorf("look up stream %s: %w", natsDemoStream, err)
	}
	s, err = js.CreateStream(ctx, jetstream.StreamConfig{
		Name: natsDemoStream, Subjects: []string{natsDemoSubjects}, Storage: jetstream.FileStorage,
	})
	if err != nil {
		return nil, fmt.Errorf("create stream %s on %s: %w", natsDemoStream, natsDemoSubjects, err)
	}
	return s, nil
}

// natsDemoPublished returns the seq of the last order in the stream and
// its stream sequence. The demo publishes order seq at stream sequence seq,
// so the two are equal; a stream where they are not holds messages the
// demo did not publish, and the check could not say what the file must
// hold.
func natsDemoPublished(ctx context.Context, s jetstream.Stream, dir string) (seq int64, streamSeq uint64, err error) {
	info, err := s.Info(ctx)
	if err != nil {
		return 0, 0, fmt.Errorf("stream %s info: %w", natsDemoStream, err)
	}
	last := info.State.LastSeq
	if last == 0 {
		return 0, 0, nil
	}
	msg, err := s.GetMsg(ctx, last)
	if err != nil {
		return 0, 0, fmt.Errorf("read message %d of stream %s: %w", last, natsDemoStream, err)
	}
	var o natsOrder
	if err := json.Unmarshal(msg.Data, &o); err != nil || o.Seq != int64(last) || info.State.Msgs != last {
		return 0, 0, fmt.Errorf("stream %s holds messages the demo did not publish (%d messages, the last at sequence %d on %s: %.80q); remove %s to start over",
			natsDemoStream, info.State.Msgs, last, msg.Subject, msg.Data, dir)
	}
	return o.Seq, last, nil
}

func natsDemoConsumerInfo(ctx context.Context, js jetstream.JetStream) (*jetstream.ConsumerInfo, error) {
	c, err := js.Consumer(ctx, natsDemoStream, natsDemoConsumer)
	if err != nil {
		return nil, fmt.Errorf("look up consumer %s on stream %s: %w", natsDemoConsumer, natsDemoStream, err)
	}
	info, err := c.Info(ctx)
	if err != nil {
		return nil, fmt.Errorf("consumer %s info: %w", natsDemoConsumer, err)
	}
	return info, nil
}

// committedStreamSeq is the stream sequence of the last message the sink
// committed. The JetStream source's positions are documented JSON,
// {"stream_seq":N}.
func committedStreamSeq(st pipeline.Stats) uint64 {
	var pos struct {
		StreamSeq uint64 `json:"stream_seq"`
	}
	if json.Unmarshal(st.LastCheckpoint.Source, &pos) != nil {
		return 0
	}
	return pos.StreamSeq
}

// natsDemoWindow is how many publishes the publisher has in flight: enough
// that it is not the demo's bottleneck, few enough that a signal stops it
// at once.
const natsDemoWindow = 256

// natsPublisher publishes order messages in windows of asynchronous
// publishes, each with a Nats-Msg-Id, and waits for every PubAck of a
// window before the next: a message counts as published when the stream
// says so. One connection's publishes are stored in the order sent, and
// each PubAck's sequence is checked against the order's seq, so the
// stream holds seq 1..N in order. A publish whose PubAck is lost is sent
// again with its id, and the stream drops it if it already has it.
type natsPublisher struct {
	js        jetstream.JetStream
	seq       int64  // the last order published
	streamSeq uint64 // the stream sequence of the last PubAck
	rng       *rand.Rand
	events    int     // orders to publish in this run
	rate      float64 // orders per second; 0 = as fast as possible
	published int
}

func (p *natsPublisher) produce(ctx context.Context) error {
	if err := p.run(ctx, p.events, p.rate); err != nil {
		return fmt.Errorf("demo publisher: %w", err)
	}
	return nil
}

// caughtUp reports whether the sink committed the last message published.
func (p *natsPublisher) caughtUp(st pipeline.Stats) bool {
	return committedStreamSeq(st) >= p.streamSeq
}

func (p *natsPublisher) run(ctx context.Context, n int, rate float64) error {
	began := time.Now()
	var tick *time.Ticker
	if rate > 0 {
		tick = time.NewTicker(max(time.Duration(float64(time.Second)/rate), time.Millisecond))
		defer tick.Stop()
	}
	for p.published < n {
		if err := ctx.Err(); err != nil {
			return err
		}
		due := n - p.published
		if rate > 0 {
			due = min(due, int(time.Since(began).Seconds()*rate)+1-p.published)
			if due <= 0 {
				select {
				case <-tick.C:
				case <-ctx.Done():
					return ctx.Err()
				}
				continue
			}
		}
		// A window runs to completion even if a signal arrives meanwhile,
		// so that the count printed is what the stream holds.
		if err := p.publishWindow(context.WithoutCancel(ctx), min(due, natsDemoWindow)); err != nil {
			return err
		}
	}
	return nil
}

// publishWindow publishes the next k orders and waits for their PubAcks.
func (p *natsPublisher) publishWindow(ctx context.Context, k int) error {
	futures := make([]jetstream.PubAckFuture, 0, k)
	var sendErr error
	for i := range k {
		f, err := p.js.PublishMsgAsync(p.message(p.seq+1+int64(i)), jetstream.WithExpectStream(natsDemoStream))
		if err != nil {
			sendErr = err
			break
		}
		futures = append(futures, f)
	}
	for _, f := range futures {
		seq := p.seq + 1
		var ack *jetstream.PubAck
		select {
		case ack = <-f.Ok():
		case err := <-f.Err():
			if ack, err = p.republish(ctx, f.Msg(), seq, err); err != nil {
				return err
			}
		}
		if ack.Sequence != uint64(seq) {
			return fmt.Errorf("stream %s stored order %d at sequence %d: it holds messages the demo did not publish", natsDemoStream, seq, ack.Sequence)
		}
		p.seq, p.streamSeq = seq, ack.Sequence
		p.published++
	}
	if len(futures) == 0 {
		return fmt.Errorf("publish order %d: %w", p.seq+1, sendErr)
	}
	return nil // a window cut short by sendErr is continued by the next
}

// message builds the message of order seq.
func (p *natsPublisher) message(seq int64) *nats.Msg {
	data, _ := json.Marshal(natsOrder{ // a struct of strings and numbers always marshals
		Seq: seq, Order: fmt.Sprintf("o%07d", (seq+1)/2), Customer: fmt.Sprintf("c%03d", p.rng.IntN(500)),
		AmountCents: 100 + p.rng.IntN(99900), At: time.Now().UTC().Format(time.RFC3339Nano),
	})
	m := nats.NewMsg(natsDemoSubject(seq))
	m.Data = data
	m.Header.Set(jetstream.MsgIDHeader, "tide-demo-order-"+strconv.FormatInt(seq, 10))
	return m
}

// republish sends msg again, synchronously, after its asynchronous publish
// failed with first; its id makes it a duplicate if the stream has it.
func (p *natsPublisher) republish(ctx context.Context, msg *nats.Msg, seq int64, first error) (*jetstream.PubAck, error) {
	const attempts = 3
	err := first
	for attempt := 2; attempt <= attempts; attempt++ {
		if !errors.Is(err, jetstream.ErrAsyncPublishTimeout) && !errors.Is(err, context.DeadlineExceeded) &&
			!errors.Is(err, jetstream.ErrNoStreamResponse) && !errors.Is(err, nats.ErrNoResponders) {
			break
		}
		actx, cancel := context.WithTimeout(ctx, 5*time.Second)
		var ack *jetstream.PubAck
		ack, err = p.js.PublishMsg(actx, msg, jetstream.WithExpectStream(natsDemoStream))
		cancel()
		if err == nil {
			return ack, nil
		}
	}
	return nil, fmt.Errorf("publish order %d to %s: %w", seq, msg.Subject, err)
}

// verifyNATSDemoFile checks the output the way a user would: every line is
// a JSON envelope, line i holds order seq i on its subject, and there are
// no more lines than orders published. It returns how many lines it read.
func verifyNATSDemoFile(path string, published int64) (int64, error) {
	fh, err := os.Open(path)
	if err != nil {
		return 0, err
	}
	defer fh.Close()
	sc := bufio.NewScanner(fh)
	sc.Buffer(make([]byte, 1<<20), 1<<24)
	var n int64
	for sc.Scan() {
		var line struct {
			Namespace string    `json:"_namespace"`
			Op        string    `json:"_op"`
			Doc       natsOrder `json:"_full_document"`
		}
		if err := json.Unmarshal(sc.Bytes(), &line); err != nil {
			return n, fmt.Errorf("line %d: %w", n+1, err)
		}
		seq := n + 1
		if seq > published {
			return n, fmt.Errorf("line %d: order seq %d on %s, but only %d orders were published", seq, line.Doc.Seq, line.Namespace, published)
		}
		if want := natsDemoSubject(seq); line.Doc.Seq != seq || line.Namespace != want || line.Op != string(cdc.OpInsert) {
			return n, fmt.Errorf("line %d: got %s of order seq %d on %s, want insert of order seq %d on %s", seq, line.Op, line.Doc.Seq, line.Namespace, seq, want)
		}
		n++
	}
	return n, sc.Err()
}
