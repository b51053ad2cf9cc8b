package tide

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// TestSpecNATSPoisonPayloads reads a JetStream stream whose messages are
// sometimes not JSON: with on_error: dead_letter (and no on_decode_error
// of the source's own), every good message reaches the file, every bad
// one the dead-letter file, and all are acknowledged.
func TestSpecNATSPoisonPayloads(t *testing.T) {
	srv, err := server.NewServer(&server.Options{Host: "127.0.0.1", Port: server.RANDOM_PORT, JetStream: true, StoreDir: t.TempDir(), NoLog: true, NoSigs: true})
	if err != nil {
		t.Fatal(err)
	}
	srv.Start()
	t.Cleanup(func() { srv.Shutdown(); srv.WaitForShutdown() })
	if !srv.ReadyForConnections(5 * time.Second) {
		t.Fatal("nats-server not ready")
	}
	nc, err := nats.Connect(srv.ClientURL())
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	js, _ := jetstream.New(nc)
	if _, err := js.CreateStream(t.Context(), jetstream.StreamConfig{Name: "ORDERS", Subjects: []string{"orders.>"}}); err != nil {
		t.Fatal(err)
	}
	const total = 40
	var bad []int
	for i := 1; i <= total; i++ {
		data := fmt.Sprintf(`{"n":%d,"qty":%d}`, i, i%4)
		if i%7 == 0 {
			data = fmt.Sprintf("not json %d", i)
			bad = append(bad, i)
		}
		if _, err := js.Publish(t.Context(), "orders.new", []byte(data)); err != nil {
			t.Fatal(err)
		}
	}

	dir := t.TempDir()
	text := fmt.Sprintf(`name: poison
data_dir: %[1]s/data
source: {nats: {servers: ["%[2]s"], stream: ORDERS, consumer: tide}}
sink: {file: {path: %[1]s/out.jsonl}}
transforms:
  - set: {double: 'payload.qty * 2'}
on_error: dead_letter
dead_letter: {file: {path: %[1]s/dead.jsonl}}
batch: {commit_interval: 20ms}
`, dir, srv.ClientURL())
	s, err := Parse([]byte(text), Options{})
	if err != nil {
		t.Fatal(err)
	}
	p, err := s.Build(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- p.Run(t.Context()) }()
	for deadline := time.Now().Add(20 * time.Second); p.Stats().EventsOut+p.Stats().DeadLetters < total; time.Sleep(20 * time.Millisecond) {
		select {
		case err := <-done:
			t.Fatalf("Run = %v", err)
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("stats %+v", p.Stats())
		}
	}
	if err := p.Drain(t.Context()); err != nil {
		t.Fatal(err)
	}
	if err := <-done; err != nil {
		t.Fatal(err)
	}

	b, err := os.ReadFile(filepath.Join(dir, "out.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(string(b)), "\n")
	if len(lines) != total-len(bad) {
		t.Fatalf("out.jsonl holds %d lines, want %d", len(lines), total-len(bad))
	}
	k := 0
	for i := 1; i <= total; i++ {
		if i%7 == 0 {
			continue
		}
		if want := fmt.Sprintf(`{"n":%d,"qty":%d,"double":%d}`, i, i%4, 2*(i%4)); !strings.Contains(lines[k], want) {
			t.Fatalf("line %d = %s, want it to hold %s", k, lines[k], want)
		}
		k++
	}
	letters, err := s.DeadLetters(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if len(letters) != len(bad) {
		t.Fatalf("%d dead letters, want %d", len(letters), len(bad))
	}
	for i, l := range letters {
		if l.Stage != "decode" || string(l.Change.Payload) != fmt.Sprintf("not json %d", bad[i]) || !strings.Contains(l.Error, "not JSON") {
			t.Fatalf("letter %d = %+v", i, l)
		}
	}
	cons, err := js.Consumer(t.Context(), "ORDERS", "tide")
	if err != nil {
		t.Fatal(err)
	}
	info, err := cons.Info(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if info.NumAckPending != 0 || info.NumPending != 0 || info.AckFloor.Stream != total {
		t.Fatalf("consumer: ack pending %d, pending %d, ack floor %d; want everything acknowledged", info.NumAckPending, info.NumPending, info.AckFloor.Stream)
	}
}
