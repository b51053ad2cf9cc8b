package main

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"os/exec"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/tide-cdc/tide/internal/testenv"
)

// startTide starts tide with args in dir and returns it once a log line
// contains ready, with the log lines read so far; the rest of stderr keeps
// flowing into logs. The process is stopped (SIGTERM) when the test ends.
func startTide(t *testing.T, dir, ready string, args ...string) (*exec.Cmd, *syncBuilder) {
	t.Helper()
	cmd := tideCmd(t, dir, args...)
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	logs := &syncBuilder{}
	sc := bufio.NewScanner(stderr)
	found := false
	for sc.Scan() {
		logs.WriteString(sc.Text() + "\n")
		if strings.Contains(sc.Text(), ready) {
			found = true
			break
		}
	}
	copied := make(chan struct{})
	go func() { // keep reading, so that tide never blocks on a full pipe
		defer close(copied)
		for sc.Scan() {
			logs.WriteString(sc.Text() + "\n")
		}
	}()
	t.Cleanup(func() {
		cmd.Process.Signal(syscall.SIGTERM)
		<-copied
		cmd.Wait()
	})
	if !found {
		t.Fatalf("tide %s ended before logging %q:\n%s", strings.Join(args, " "), ready, logs.String())
	}
	return cmd, logs
}

// TestCheckpointShowWhileRunning reads the checkpoint of a running
// pipeline: show takes no lock, so the running pipeline does not stop it.
func TestCheckpointShowWhileRunning(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	cfg := writePipeline(t, dir, `
name: live
source:
  generate: {count: 0, rate: 200}
sink:
  file: {path: ./out.jsonl}
batch: {commit_interval: 10ms}
`)
	startTide(t, dir, "pipeline started", "run", "-f", cfg)
	seq := 0
	for deadline := time.Now().Add(20 * time.Second); seq == 0 && time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		out, err := runTide(t, dir, "checkpoint", "show", "-f", cfg)
		if err != nil {
			t.Fatalf("checkpoint show while the pipeline runs: %v\n%s", err, out)
		}
		if strings.Contains(out, "has no checkpoint") {
			continue
		}
		seq = checkpointSeq(t, dir, cfg)
	}
	if seq == 0 {
		t.Fatal("no checkpoint shown within 20s of a running pipeline")
	}
	// The second show sees the pipeline further on, or at the same commit.
	if later := checkpointSeq(t, dir, cfg); later < seq {
		t.Errorf("checkpoint went back from %d to %d", seq, later)
	}
}

// TestValidateRefusesWhatRunRefuses: a sink that tide run cannot build
// fails tide validate with the same message.
func TestValidateRefusesWhatRunRefuses(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	cfg := writePipeline(t, dir, `
name: to-mongo
source:
  generate: {count: 1}
sink:
  mongo: {uri: "mongodb://127.0.0.1:1", database: "d.x", collection: c}
`)
	const want = `line 6: sink.mongo.database: "d.x" makes database name "d.x", which holds one of`
	for _, command := range []string{"validate", "run"} {
		out, err := runTide(t, dir, command, "-f", cfg)
		if err == nil {
			t.Errorf("tide %s accepted a bad sink.mongo:\n%s", command, out)
		}
		if !strings.Contains(out, want) {
			t.Errorf("tide %s does not say %q:\n%s", command, want, out)
		}
	}
}

// TestHelpListsOnlyDestinationsThatExist: the help names every sink.
func TestHelpListsOnlyDestinationsThatExist(t *testing.T) {
	t.Parallel()
	var stdout, stderr bytes.Buffer
	if code := Main([]string{"--help"}, &stdout, &stderr); code != 0 {
		t.Fatalf("tide --help exited %d: %s", code, stderr.String())
	}
	help := stdout.String()
	for _, want := range []string{"files", "JetStream", "PostgreSQL", "MongoDB", "stdout"} {
		if !strings.Contains(help, want) {
			t.Errorf("tide --help does not mention %s:\n%s", want, help)
		}
	}
}

var metricsAddr = regexp.MustCompile(`addr=(http://\S+/metrics)`)

// TestNATSSourceMetrics scrapes /metrics of a JetStream pipeline: the NATS
// source's own counters are there, next to the runtime's.
func TestNATSSourceMetrics(t *testing.T) {
	t.Parallel()
	srv := testenv.NATS(t)
	nc, err := nats.Connect(srv.ClientURL())
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	if _, err := js.CreateStream(ctx, jetstream.StreamConfig{Name: "ORDERS", Subjects: []string{"orders.>"}}); err != nil {
		t.Fatal(err)
	}
	const n = 50
	for i := range n {
		if _, err := js.Publish(ctx, "orders.new", fmt.Appendf(nil, `{"i": %d}`, i)); err != nil {
			t.Fatal(err)
		}
	}
	dir := t.TempDir()
	cfg := writePipeline(t, dir, fmt.Sprintf(`
name: js
source:
  nats: {servers: [%q], stream: ORDERS, consumer: tide, lag_poll_interval: 50ms}
sink:
  file: {path: ./out.jsonl}
batch: {commit_interval: 10ms}
`, srv.ClientURL()))
	_, logs := startTide(t, dir, "serving metrics", "run", "-f", cfg, "--metrics-addr", "127.0.0.1:0")
	m := metricsAddr.FindStringSubmatch(logs.String())
	if m == nil {
		t.Fatalf("no metrics address in the log:\n%s", logs.String())
	}
	var body string
	for deadline := time.Now().Add(20 * time.Second); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
		body = scrape(t, m[1])
		if metricValue(body, `tide_nats_acked_total{pipeline="js"}`) >= n {
			break
		}
	}
	for name, want := range map[string]float64{
		`tide_nats_fetched_total{pipeline="js"}`:     n,
		`tide_nats_acked_total{pipeline="js"}`:       n,
		`tide_nats_redelivered_total{pipeline="js"}`: 0,
	} {
		if got := metricValue(body, name); got != want {
			t.Errorf("%s = %v, want %v", name, got, want)
		}
	}
	if got := metricSum(body, "tide_events_out_total", `pipeline="js"`); got != n {
		t.Errorf("tide_events_out_total{pipeline=\"js\"} summed over namespaces = %v, want %v", got, n)
	}
	// Present, whatever their value: a fresh consumer may be positioned
	// once, and the lag is polled.
	for _, name := range []string{`tide_nats_lag_messages{pipeline="js"}`, `tide_nats_repositioned_total{pipeline="js"}`, `tide_nats_ack_errors_total{pipeline="js"}`} {
		if metricValue(body, name) < 0 {
			t.Errorf("no %s in /metrics:\n%s", name, body)
		}
	}
}

func scrape(t *testing.T, url string) string {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// metricValue returns the value of the sample named name (with its
// labels) in a Prometheus text exposition, or -1 if there is none.
// metricSum adds the values of every series of metric name whose labels
// include label.
func metricSum(body, name, label string) float64 {
	sum := 0.0
	for _, line := range strings.Split(body, "\n") {
		rest, ok := strings.CutPrefix(line, name+"{")
		labels, value, ok2 := strings.Cut(rest, "} ")
		if !ok || !ok2 || !strings.Contains(labels, label) {
			continue
		}
		if f, err := strconv.ParseFloat(strings.TrimSpace(value), 64); err == nil {
			sum += f
		}
	}
	return sum
}

func metricValue(body, name string) float64 {
	for _, line := range strings.Split(body, "\n") {
		if v, ok := strings.CutPrefix(line, name+" "); ok {
			f, err := strconv.ParseFloat(strings.TrimSpace(v), 64)
			if err == nil {
				return f
			}
		}
	}
	return -1
}

// syncBuilder is a strings.Builder that one goroutine writes while another
// reads.
type syncBuilder struct {
	mu sync.Mutex
	b  strings.Builder
}

func (s *syncBuilder) WriteString(str string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.b.WriteString(str)
}

func (s *syncBuilder) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}
