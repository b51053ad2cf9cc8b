package nats

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/tide-cdc/tide/cdc"
	"github.com/tide-cdc/tide/internal/testenv"
)

func coreConfig(t testing.TB, nc *nats.Conn, subject string) Config {
	return Config{Name: "test", Conn: nc, Mode: "core", Subject: subject, Logger: testLogger(t), CloseTimeout: 2 * time.Second}
}

func corePublish(t testing.TB, nc *nats.Conn, subject string, from, to int) {
	t.Helper()
	for i := from; i < to; i++ {
		if err := nc.Publish(subject, []byte(`{"n":`+itoa(i)+`}`)); err != nil {
			t.Fatal(err)
		}
	}
	if err := nc.Flush(); err != nil {
		t.Fatal(err)
	}
}

func TestCoreDeliversWhileSubscribed(t *testing.T) {
	s := testenv.NATS(t)
	nc := connectTo(t, s)
	corePublish(t, nc, "orders.eu", 0, 5) // before the subscription: never seen

	src := openSource(t, coreConfig(t, nc, "orders.>"), &cdc.Checkpoint{Source: cdc.Position(`{"seq":41}`), Meta: map[string]string{"source": "nats-core", "subject": "orders.>"}})
	corePublish(t, nc, "orders.eu", 5, 105)
	evs := pollN(t, src, 100)
	for i, ev := range evs {
		if number(t, ev) != i+5 {
			t.Fatalf("event %d has payload %s", i, ev.Payload)
		}
		// The counter continues from the restored checkpoint.
		if want := `{"seq":` + itoa(42+i) + `}`; string(ev.Pos) != want {
			t.Fatalf("event %d position %s, want %s", i, ev.Pos, want)
		}
		if ev.Namespace != "orders.eu" || ev.Op != cdc.OpInsert {
			t.Fatalf("event %d = %+v", i, ev)
		}
	}
	if err := src.Ack(t.Context(), evs[99].Pos); err != nil {
		t.Fatalf("core Ack: %v", err)
	}
}

func TestCoreQueueGroupShares(t *testing.T) {
	s := testenv.NATS(t)
	nc := connectTo(t, s)
	cfg := coreConfig(t, nc, "orders.>")
	cfg.QueueGroup = "tide"
	a := openSource(t, cfg, nil)
	b := openSource(t, cfg, nil)
	corePublish(t, nc, "orders.eu", 0, 1000)

	seen := map[int]int{}
	counts := map[string]int{}
	eventually(t, "1000 messages between the two", func() bool {
		for name, src := range map[string]*Source{"a": a, "b": b} {
			evs, err := src.Poll(t.Context(), nil, 1000)
			if err != nil {
				t.Fatal(err)
			}
			for _, ev := range evs {
				seen[number(t, ev)]++
			}
			counts[name] += len(evs)
		}
		return counts["a"]+counts["b"] >= 1000
	})
	if len(seen) != 1000 || counts["a"]+counts["b"] != 1000 {
		t.Fatalf("%d distinct of %d delivered, want 1000 once each", len(seen), counts["a"]+counts["b"])
	}
	if counts["a"] == 0 || counts["b"] == 0 {
		t.Fatalf("queue group did not share: %v", counts)
	}
}

func TestCoreSubscriptionEndReportedAfterQueue(t *testing.T) {
	s := testenv.NATS(t)
	pub := connectTo(t, s)
	own := connectTo(t, s)
	src := openSource(t, coreConfig(t, own, "orders.>"), nil)
	corePublish(t, pub, "orders.eu", 0, 10)
	eventually(t, "10 queued", func() bool { return src.Stats().Fetched == 10 })

	own.Close() // the subscription ends with its connection
	var evs []cdc.Event
	var err error
	eventually(t, "end of stream", func() bool {
		evs, err = src.Poll(t.Context(), evs, 100)
		return err != nil
	})
	if len(evs) != 10 {
		t.Fatalf("handed out %d queued events before the end, want 10", len(evs))
	}
	if !errors.Is(err, cdc.ErrEnd) || !strings.Contains(err.Error(), "subscription to orders.> ended") {
		t.Fatalf("error %v, want the end of the subscription wrapping cdc.ErrEnd", err)
	}
}

func TestCoreDecodeErrors(t *testing.T) {
	s := testenv.NATS(t)
	nc := connectTo(t, s)
	cfg := coreConfig(t, nc, "orders.>")
	cfg.OnDecodeError = "skip"
	src := openSource(t, cfg, nil)
	corePublish(t, nc, "orders.eu", 0, 2)
	nc.Publish("orders.eu", []byte("garbage"))
	corePublish(t, nc, "orders.eu", 2, 4)
	evs := pollN(t, src, 4)
	if number(t, evs[2]) != 2 || src.Stats().DecodeErrors != 1 {
		t.Fatalf("events %v, decode errors %d", evs, src.Stats().DecodeErrors)
	}

	cfg.OnDecodeError = "fail"
	cfg.Format = "json"
	src2 := openSource(t, cfg, nil)
	nc.Publish("orders.eu", []byte("garbage"))
	nc.Flush()
	var err error
	eventually(t, "an error", func() bool { _, err = src2.Poll(t.Context(), nil, 10); return err != nil })
	if !errors.Is(err, ErrDecode) || errors.Is(err, cdc.ErrEnd) {
		t.Fatalf("error %v, want a decode error", err)
	}
}
