package nats

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/tide-cdc/tide/checkpoint"
	"github.com/tide-cdc/tide/encode"
	"github.com/tide-cdc/tide/internal/testenv"
	"github.com/tide-cdc/tide/pipeline"
	"github.com/tide-cdc/tide/sink/file"
)

// The fault tests put Tide through what a hostile network and operator do
// to it: connections cut at random moments by a TCP proxy between Tide and
// NATS, NATS killed with SIGKILL and restarted, Tide killed right after a
// cut (well inside the 30s ack wait), all while a publisher keeps writing.
// At the end the file must equal the stream: every message once, in stream
// order.

// childNATSEnv, when set to "port:storedir", makes the test binary a
// nats-server (see TestMain), so that a test can SIGKILL it.
const childNATSEnv = "TIDE_TEST_NATS_CHILD"

// childNATSNoSyncEnv, set to 1 with childNATSEnv, makes the child server
// fsync on nats-server's own schedule instead of every write: for a
// benchmark that publishes a large backlog, not for a crash test.
const childNATSNoSyncEnv = "TIDE_TEST_NATS_CHILD_NOSYNC"

// runChildNATS serves JetStream with every write fsynced before its
// PubAck (sync_interval: always): a SIGKILL then loses nothing the
// publisher was told is stored. It runs until the process is killed.
func runChildNATS(spec string) {
	port, store, ok := strings.Cut(spec, ":")
	n, err := strconv.Atoi(port)
	if !ok || err != nil {
		fmt.Fprintf(os.Stderr, "%s=%q: want port:storedir\n", childNATSEnv, spec)
		os.Exit(2)
	}
	s, err := server.NewServer(&server.Options{
		Host: "127.0.0.1", Port: n, JetStream: true, StoreDir: store,
		SyncAlways: os.Getenv(childNATSNoSyncEnv) != "1", NoLog: true, NoSigs: true,
	})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	s.Start()
	if !s.ReadyForConnections(10 * time.Second) {
		fmt.Fprintln(os.Stderr, "nats-server not ready")
		os.Exit(1)
	}
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGTERM)
	<-sig
	s.Shutdown()
	os.Exit(0)
}

// natsProc is a nats-server in a child process, on a fixed port and store.
type natsProc struct {
	t      testing.TB
	port   int
	store  string
	noSync bool // see childNATSNoSyncEnv
	cmd    *exec.Cmd
	kills  int
}

func startNATSProc(t testing.TB) *natsProc { return startNATSProcSync(t, true) }

// startNATSProcSync starts the child server; sync false lets it fsync on
// its own schedule.
func startNATSProcSync(t testing.TB, sync bool) *natsProc {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := ln.Addr().(*net.TCPAddr).Port
	ln.Close()
	n := &natsProc{t: t, port: port, store: t.TempDir(), noSync: !sync}
	n.start()
	t.Cleanup(func() {
		if n.cmd != nil {
			n.cmd.Process.Kill()
			n.cmd.Wait()
		}
	})
	return n
}

func (n *natsProc) addr() string { return "127.0.0.1:" + strconv.Itoa(n.port) }

func (n *natsProc) start() {
	n.t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), childNATSEnv+"="+strconv.Itoa(n.port)+":"+n.store)
	if n.noSync {
		cmd.Env = append(cmd.Env, childNATSNoSyncEnv+"=1")
	}
	cmd.Stderr = os.Stderr
	cmd.SysProcAttr = childAttr()
	if err := cmd.Start(); err != nil {
		n.t.Fatalf("start nats-server process: %v", err)
	}
	n.cmd = cmd
	deadline := time.Now().Add(20 * time.Second)
	for {
		c, err := net.DialTimeout("tcp", n.addr(), 200*time.Millisecond)
		if err == nil {
			c.Close()
			return
		}
		if time.Now().After(deadline) {
			n.t.Fatalf("nats-server process not listening on %s after 20s", n.addr())
		}
		time.Sleep(20 * time.Millisecond) // waiting for another process to listen
	}
}

// kill SIGKILLs the server and starts it again after down.
func (n *natsProc) kill(down time.Duration) {
	n.t.Helper()
	n.cmd.Process.Signal(syscall.SIGKILL)
	n.cmd.Wait()
	n.kills++
	time.Sleep(down) // NATS is down: the outage under test
	n.start()
}

// publisher writes {"n":i} for i = 0, 1, ... to subject, each with a
// message id, retrying each until JetStream acknowledges it, across server
// restarts. The stream then holds 0, 1, ... once each, in order.
type publisher struct {
	js   jetstream.JetStream
	sent atomic.Int64
	stop chan struct{}
	done chan struct{}
}

func startPublisher(t *testing.T, url, subject string, limit int) *publisher {
	t.Helper()
	nc, err := nats.Connect(url, nats.MaxReconnects(-1), nats.ReconnectWait(50*time.Millisecond), nats.RetryOnFailedConnect(true))
	if err != nil {
		t.Fatal(err)
	}
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	p := &publisher{js: js, stop: make(chan struct{}), done: make(chan struct{})}
	go func() {
		defer close(p.done)
		defer nc.Close()
		for i := 0; i < limit; {
			select {
			case <-p.stop:
				return
			default:
			}
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
			_, err := js.Publish(ctx, subject, fmt.Appendf(nil, `{"n":%d}`, i), jetstream.WithMsgID("m-"+strconv.Itoa(i)))
			cancel()
			if err != nil {
				time.Sleep(20 * time.Millisecond) // NATS is down; the retry carries the same id
				continue
			}
			i++
			p.sent.Store(int64(i))
		}
	}()
	t.Cleanup(p.halt)
	return p
}

// halt stops publishing and waits for the publisher to return.
func (p *publisher) halt() {
	select {
	case <-p.stop:
	default:
		close(p.stop)
	}
	<-p.done
}

// streamPayloads reads the whole stream in order with an ordered consumer.
func streamPayloads(t *testing.T, url, stream string) []int {
	t.Helper()
	nc, err := nats.Connect(url)
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	js, _ := jetstream.New(nc)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	st, err := js.Stream(ctx, stream)
	if err != nil {
		t.Fatal(err)
	}
	total := st.CachedInfo().State.Msgs
	oc, err := js.OrderedConsumer(ctx, stream, jetstream.OrderedConsumerConfig{})
	if err != nil {
		t.Fatal(err)
	}
	var ns []int
	for uint64(len(ns)) < total {
		batch, err := oc.Fetch(1000, jetstream.FetchMaxWait(5*time.Second))
		if err != nil {
			t.Fatal(err)
		}
		for msg := range batch.Messages() {
			var n int
			if _, err := fmt.Sscanf(string(msg.Data()), `{"n":%d}`, &n); err != nil {
				t.Fatalf("stream message %q: %v", msg.Data(), err)
			}
			ns = append(ns, n)
		}
		if err := batch.Error(); err != nil && !errors.Is(err, jetstream.ErrNoMessages) {
			t.Fatal(err)
		}
	}
	return ns
}

// compareToStream counts how the file differs from the stream: lines
// missing, lines more than once, and lines out of stream order.
func compareToStream(file, stream []int) (lost, duplicated, reordered int) {
	seen := map[int]int{}
	last := -1
	for _, n := range file {
		seen[n]++
		if seen[n] > 1 {
			duplicated++
			continue
		}
		if n < last {
			reordered++
		}
		last = max(last, n)
	}
	for _, n := range stream {
		if seen[n] == 0 {
			lost++
		}
	}
	return lost, duplicated, reordered
}

// TestJetStreamConnectionCutsInProcess runs JetStream → runtime → file
// sink in this process (under the race detector in CI), through a proxy
// that cuts the connection at random moments while a publisher writes.
func TestJetStreamConnectionCutsInProcess(t *testing.T) {
	for _, ack := range []string{"explicit", "none"} {
		t.Run("ack "+ack, func(t *testing.T) { connectionCuts(t, ack) })
	}
}

func connectionCuts(t *testing.T, ack string) {
	const total, cuts = 20000, 20
	srv := testenv.NATS(t)
	nc := connectTo(t, srv)
	newStream(t, nc, "ORDERS", "orders.>")
	proxy := testenv.StartProxy(t, srv.Addr().String())
	pub := startPublisher(t, srv.ClientURL(), "orders.eu", total)

	tideConn, err := nats.Connect("nats://"+proxy.Addr(), nats.MaxReconnects(-1), nats.ReconnectWait(20*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	defer tideConn.Close()
	cfg := jsConfig(t, tideConn, "ORDERS", "tide")
	cfg.AckWait = 30 * time.Second
	cfg.MaxAckPending = 20000
	cfg.Ack = ack
	path := filepath.Join(t.TempDir(), "out.jsonl")
	var store checkpoint.Mem
	p := pipeline.New(pipeline.Config{Name: "orders", MaxRecords: 1000, Logger: testLogger(t)},
		New(cfg), encode.Envelope, file.New(file.Config{Path: path}), &store)
	go p.Run(t.Context())            // its result: p.Err, once p.Done is closed
	t.Cleanup(func() { <-p.Done() }) // t.Context is cancelled by then

	for range cuts {
		time.Sleep(time.Duration(50+rand.IntN(250)) * time.Millisecond) // a random moment of the stream
		proxy.Cut()
	}
	deadline := time.Now().Add(90 * time.Second)
	for pub.sent.Load() < total {
		if time.Now().After(deadline) {
			t.Fatalf("published %d of %d within 90s", pub.sent.Load(), total)
		}
		time.Sleep(20 * time.Millisecond)
	}
	deadline = time.Now().Add(60 * time.Second)
	for p.Stats().EventsOut < total && p.State() != pipeline.Failed {
		if time.Now().After(deadline) {
			t.Fatalf("committed %d of %d within 60s after the last cut", p.Stats().EventsOut, total)
		}
		time.Sleep(20 * time.Millisecond)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := p.Drain(ctx); err != nil { // Run's result
		t.Fatalf("drain: %v", err)
	}

	got := readPayloads(t, path)
	want := streamPayloads(t, srv.ClientURL(), "ORDERS")
	lost, dup, reord := compareToStream(got, want)
	t.Logf("%d cuts, %d messages: %d lost, %d duplicated, %d reordered", proxy.Cuts(), len(want), lost, dup, reord)
	if lost+dup+reord != 0 || len(got) != len(want) {
		t.Fatalf("file has %d lines, stream %d: %d lost, %d duplicated, %d reordered", len(got), len(want), lost, dup, reord)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("line %d is %d, stream has %d", i+1, got[i], want[i])
		}
	}
}

// TestJetStreamFaultsExactlyOnce runs `tide run` (JetStream → file)
// against a nats-server in another process, through a cutting proxy, for
// rounds of faults: connection cuts, Tide SIGKILLed right after a cut,
// Tide SIGKILLed at a random moment, NATS SIGKILLed and restarted. The
// publisher writes throughout. ack_wait is 30s: nothing may wait for it.
func TestJetStreamFaultsExactlyOnce(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: builds tide and kills it and nats-server many times")
	}
	const rounds = 16
	bin := testenv.TideBinary(t)
	ns := startNATSProc(t)
	url := "nats://" + ns.addr()
	proxy := testenv.StartProxy(t, ns.addr())

	setup, err := nats.Connect(url)
	if err != nil {
		t.Fatal(err)
	}
	newStream(t, setup, "ORDERS", "orders.>")
	setup.Close()
	pub := startPublisher(t, url, "orders.eu", 1<<30)

	dir := t.TempDir()
	out := filepath.Join(dir, "out.jsonl")
	pipeline := filepath.Join(dir, "pipeline.yaml")
	yaml := `name: orders
data_dir: ` + filepath.Join(dir, "data") + `
batch: {max_records: 1000}
source:
  nats:
    servers: [nats://` + proxy.Addr() + `]
    stream: ORDERS
    consumer: tide
    ack_wait: 30s
    max_ack_pending: 20000
sink:
  file: {path: ` + out + `}
`
	if err := os.WriteFile(pipeline, []byte(yaml), 0o600); err != nil {
		t.Fatal(err)
	}

	tideKills := 0
	p := testenv.StartTide(t, bin, pipeline, "info")
	kill := func() {
		p.KillAfter(t, 0)
		tideKills++
		p = testenv.StartTide(t, bin, pipeline, "info")
	}
	for round := range rounds {
		time.Sleep(time.Duration(200+rand.IntN(600)) * time.Millisecond) // a random moment of the stream
		switch round % 4 {
		case 0:
			proxy.Cut()
		case 1: // killed inside ack_wait, right after a cut
			proxy.Cut()
			time.Sleep(time.Duration(rand.IntN(300)) * time.Millisecond)
			kill()
		case 2:
			ns.kill(time.Duration(100+rand.IntN(900)) * time.Millisecond)
		case 3:
			kill()
		}
	}
	pub.halt()
	sent := int(pub.sent.Load())

	// The last run catches up: the consumer's ack floor reaches the end of
	// the stream.
	conn, err := nats.Connect(url)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	js, _ := jetstream.New(conn)
	deadline := time.Now().Add(90 * time.Second)
	for {
		info, err := tryConsumerInfo(js, "ORDERS", "tide")
		st, serr := js.Stream(context.Background(), "ORDERS")
		if err == nil && serr == nil && info.AckFloor.Stream == st.CachedInfo().State.LastSeq && info.NumAckPending == 0 {
			break
		}
		select {
		case <-p.Exited():
			t.Fatalf("tide exited: %v\n%s", p.Wait(), p.Stderr())
		case <-time.After(50 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			t.Fatalf("the last run did not catch up within 90s: consumer %+v, err %v\n%s", info, err, p.Stderr())
		}
	}
	if err := p.Terminate(); err != nil { // drain
		t.Fatalf("tide after SIGTERM: %v\n%s", err, p.Stderr())
	}

	got := readPayloads(t, out)
	want := streamPayloads(t, url, "ORDERS")
	lost, dup, reord := compareToStream(got, want)
	t.Logf("%d rounds: %d cuts, %d tide SIGKILLs, %d nats SIGKILLs, %d messages published, %d in the stream: %d lost, %d duplicated, %d reordered",
		rounds, proxy.Cuts(), tideKills, ns.kills, sent, len(want), lost, dup, reord)
	for i := range want {
		if want[i] != i {
			t.Fatalf("stream message %d is %d: the publisher's ids did not keep the stream gapless", i, want[i])
		}
	}
	if lost+dup+reord != 0 || len(got) != len(want) {
		t.Fatalf("file has %d lines, stream %d: %d lost, %d duplicated, %d reordered", len(got), len(want), lost, dup, reord)
	}
}
