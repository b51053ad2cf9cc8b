package nats

import (
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/tide-cdc/tide/internal/testenv"
)

// TestKillTideJetStreamToFile runs `tide run` from a JetStream consumer
// into a file and kills it with SIGKILL ten times at random moments while
// messages keep arriving. In the end the file holds every message once,
// in stream order, and the consumer's ack floor is what the file committed.
func TestKillTideJetStreamToFile(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: builds tide and runs it 11 times")
	}
	const rounds, perRound = 10, 10000
	const total = rounds * perRound
	bin := testenv.TideBinary(t)
	srv := testenv.NATS(t)
	nc := connectTo(t, srv)
	js := newStream(t, nc, "ORDERS", "orders.>")

	dir := t.TempDir()
	out := filepath.Join(dir, "out.jsonl")
	pipeline := filepath.Join(dir, "pipeline.yaml")
	yaml := `name: orders
data_dir: ` + filepath.Join(dir, "data") + `
batch: {max_records: 2000}
source:
  nats:
    servers: [` + srv.ClientURL() + `]
    stream: ORDERS
    consumer: tide
    ack_wait: 2s
    max_ack_pending: 20000
sink:
  file: {path: ` + out + `}
`
	if err := os.WriteFile(pipeline, []byte(yaml), 0o600); err != nil {
		t.Fatal(err)
	}
	for round := range rounds {
		publishJSON(t, js, "orders.eu", round*perRound, (round+1)*perRound)
		p := testenv.StartTide(t, bin, pipeline, "info")
		p.KillAfter(t, time.Duration(300+rand.IntN(1700))*time.Millisecond)
	}

	p := testenv.StartTide(t, bin, pipeline, "info")
	eventually := func(cond func() bool) {
		deadline := time.Now().Add(45 * time.Second)
		for !cond() {
			select {
			case <-p.Exited():
				t.Fatalf("tide exited early: %v\n%s", p.Wait(), p.Stderr())
			case <-time.After(50 * time.Millisecond):
			}
			if time.Now().After(deadline) {
				t.Fatalf("the last run did not catch up within 45s\n%s", p.Stderr())
			}
		}
	}
	eventually(func() bool {
		info, err := tryConsumerInfo(js, "ORDERS", "tide")
		return err == nil && info.AckFloor.Stream == total && strings.Contains(p.Stderr(), "pipeline started")
	})
	if err := p.Terminate(); err != nil { // drain
		t.Fatalf("tide after SIGTERM: %v\n%s", err, p.Stderr())
	}

	ns := readPayloads(t, out)
	if len(ns) != total {
		t.Errorf("file has %d lines, want %d", len(ns), total)
	}
	for i, n := range ns {
		if n != i {
			t.Fatalf("line %d has payload %d, want %d (lost, duplicated or reordered)", i+1, n, i)
		}
	}
	info := consumerInfo(t, js, "ORDERS", "tide")
	if info.AckFloor.Stream != uint64(len(ns)) || info.NumAckPending != 0 {
		t.Errorf("ack floor %d, ack pending %d; the file committed %d", info.AckFloor.Stream, info.NumAckPending, len(ns))
	}
}
