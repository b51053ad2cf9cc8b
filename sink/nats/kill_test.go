package nats

import (
	"context"
	"encoding/json"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/tide-cdc/tide/internal/testenv"
)

// runTide runs `tide run -f pipeline`; with kill > 0 it sends SIGKILL
// after that long unless tide ended first. It returns tide's error and
// whether it was killed.
func runTide(t *testing.T, bin, pipeline string, kill time.Duration) (error, bool, string) {
	t.Helper()
	var stderr testenv.Buffer
	cmd := exec.Command(bin, "run", "-f", pipeline, "--log-level", "warn", "--progress", "never")
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatalf("start tide: %v", err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	var timeout <-chan time.Time
	if kill > 0 {
		timeout = time.After(kill)
	} else {
		timeout = time.After(60 * time.Second)
	}
	select {
	case err := <-done:
		return err, false, stderr.String()
	case <-timeout:
		cmd.Process.Signal(syscall.SIGKILL)
		<-done
		if kill == 0 {
			t.Fatalf("tide did not finish within 60s\n%s", stderr.String())
		}
		return nil, true, stderr.String()
	}
}

// TestKillTideGenerateToJetStream publishes a generated sequence through
// `tide run` into a stream, killing tide with SIGKILL ten times: the
// stream holds each position exactly once, in order.
func TestKillTideGenerateToJetStream(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: builds tide and runs it 11 times")
	}
	const total = 100000
	bin := testenv.TideBinary(t)
	srv := testenv.NATS(t)
	dir := t.TempDir()
	pipeline := filepath.Join(dir, "pipeline.yaml")
	yaml := `name: gen
data_dir: ` + filepath.Join(dir, "data") + `
batch: {max_records: 2000}
source:
  generate: {count: 100000, rate: 20000}
sink:
  nats:
    servers: [` + srv.ClientURL() + `]
    stream: CDC
    create_stream: {subjects: ["cdc.>"], duplicate_window: 2m}
`
	if err := os.WriteFile(pipeline, []byte(yaml), 0o600); err != nil {
		t.Fatal(err)
	}
	kills := 0
	for range 10 {
		err, killed, stderr := runTide(t, bin, pipeline, time.Duration(200+rand.IntN(600))*time.Millisecond)
		if killed {
			kills++
		} else if err != nil {
			t.Fatalf("tide: %v\n%s", err, stderr)
		}
	}
	if err, _, stderr := runTide(t, bin, pipeline, 0); err != nil {
		t.Fatalf("last run: %v\n%s", err, stderr)
	}
	if kills < 5 {
		t.Errorf("only %d of 10 runs were killed before the generator finished", kills)
	}

	nc := connectTo(t, srv.ClientURL())
	st := streamMsgs(t, nc, "CDC")
	info, _ := st.Info(t.Context())
	if info.State.Msgs != total {
		t.Errorf("stream holds %d messages, want %d", info.State.Msgs, total)
	}
	js, _ := jetstream.New(nc)
	cons, err := js.OrderedConsumer(t.Context(), "CDC", jetstream.OrderedConsumerConfig{})
	if err != nil {
		t.Fatal(err)
	}
	it, err := cons.Messages(jetstream.PullMaxMessages(5000))
	if err != nil {
		t.Fatal(err)
	}
	defer it.Stop()
	ctx, cancel := context.WithTimeout(t.Context(), 60*time.Second)
	defer cancel()
	for want := int64(1); want <= int64(info.State.Msgs); want++ {
		m, err := it.Next(jetstream.NextContext(ctx))
		if err != nil {
			t.Fatalf("read stream at position %d: %v", want, err)
		}
		id := m.Headers().Get("Nats-Msg-Id")
		var pos struct{ Seq int64 }
		if err := json.Unmarshal([]byte(strings.TrimPrefix(id, "gen:")), &pos); err != nil {
			t.Fatalf("message id %q: %v", id, err)
		}
		if pos.Seq != want {
			t.Fatalf("stream message %d has position %d: lost, duplicated or reordered", want, pos.Seq)
		}
	}
}
