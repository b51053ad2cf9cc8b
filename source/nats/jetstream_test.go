package nats

import (
	"errors"
	"net"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/tide-cdc/tide/cdc"
	"github.com/tide-cdc/tide/internal/testenv"
)

func TestJetStreamDeliversInStreamOrderWithPositions(t *testing.T) {
	s := testenv.NATS(t)
	nc := connectTo(t, s)
	js := newStream(t, nc, "ORDERS", "orders.>")
	publishJSON(t, js, "orders.eu", 0, 1200)

	cfg := jsConfig(t, nc, "ORDERS", "tide")
	cfg.FetchBatch = 100
	cfg.MaxAckPending = 2000
	src := openSource(t, cfg, nil)
	evs := pollN(t, src, 1200)
	for i, ev := range evs {
		if got := number(t, ev); got != i {
			t.Fatalf("event %d has payload %d", i, got)
		}
		if want := `{"stream_seq":` + itoa(i+1) + `,"ts":` + strconv.FormatInt(ev.WallTimeMS, 10) + `}`; string(ev.Pos) != want {
			t.Fatalf("event %d position %s, want %s", i, ev.Pos, want)
		}
		// The position carries the message's time: a restarted pipeline
		// knows its lag from the checkpoint alone.
		if at, ok := src.PositionTime(ev.Pos); !ok || at.UnixMilli() != ev.WallTimeMS {
			t.Fatalf("event %d: PositionTime(%s) = %v, %v, want %d ms", i, ev.Pos, at, ok, ev.WallTimeMS)
		}
		if ev.Op != cdc.OpInsert || ev.Namespace != "orders.eu" || ev.PayloadFormat != cdc.PayloadJSON || ev.WallTimeMS == 0 {
			t.Fatalf("event %d = %+v", i, ev)
		}
	}
	if err := src.Ack(t.Context(), evs[599].Pos); err != nil {
		t.Fatal(err)
	}
	eventually(t, "ack floor at 600", func() bool { return consumerInfo(t, js, "ORDERS", "tide").AckFloor.Stream == 600 })
	if st := src.Stats(); st.Fetched != 1200 || st.Redelivered != 0 {
		t.Errorf("stats %+v", st)
	}
	src.Close()
	eventually(t, "acked 600", func() bool { return src.Stats().Acked == 600 })

	// The unacknowledged messages stay pending on the server until a new
	// source repositions the consumer.
	info := consumerInfo(t, js, "ORDERS", "tide")
	if info.NumAckPending != 600 {
		t.Fatalf("ack pending %d, want 600", info.NumAckPending)
	}
}

func TestNoAckBeforeCommit(t *testing.T) {
	s := testenv.NATS(t)
	nc := connectTo(t, s)
	js := newStream(t, nc, "ORDERS", "orders.>")
	publishJSON(t, js, "orders.eu", 0, 300)

	cfg := jsConfig(t, nc, "ORDERS", "tide")
	cfg.AckWait = time.Second
	src := openSource(t, cfg, nil)
	evs := pollN(t, src, 300)

	// The sink has not committed (Ack not called): every message stays
	// pending on the server, kept alive past AckWait by in-progress acks.
	info := consumerInfo(t, js, "ORDERS", "tide")
	if info.NumAckPending != 300 || info.AckFloor.Stream != 0 {
		t.Fatalf("before commit: ack pending %d, ack floor %d; want 300, 0", info.NumAckPending, info.AckFloor.Stream)
	}
	deadline := time.Now().Add(2500 * time.Millisecond)
	for time.Now().Before(deadline) {
		if got, _ := src.Poll(t.Context(), nil, 10); len(got) > 0 {
			t.Fatalf("redelivered while in progress: %s", got[0].Pos)
		}
		time.Sleep(100 * time.Millisecond) // waiting out AckWait on the server, twice
	}
	if info := consumerInfo(t, js, "ORDERS", "tide"); info.NumRedelivered != 0 || info.NumAckPending != 300 {
		t.Fatalf("after 2.5×AckWait: redelivered %d, ack pending %d", info.NumRedelivered, info.NumAckPending)
	}

	// The commit failed: the runtime never calls Ack; the source closes,
	// and the next one repositions the consumer after its ack floor (there
	// is no checkpoint) and reads every message again, at once.
	src.Close()
	src2 := openSource(t, cfg, &cdc.Checkpoint{})
	again := pollN(t, src2, 300)
	for i := range again {
		if streamSeq(t, again[i]) != streamSeq(t, evs[i]) {
			t.Fatalf("redelivery %d is stream seq %d, want %d", i, streamSeq(t, again[i]), streamSeq(t, evs[i]))
		}
	}
	if st := src2.Stats(); st.Repositioned != 1 || st.Fetched != 300 {
		t.Errorf("second source: repositioned %d, fetched %d; want 1, 300", st.Repositioned, st.Fetched)
	}
}

func TestDecodeErrorPolicies(t *testing.T) {
	tests := map[string]struct {
		policy  string
		wantN   []int // payloads handed out
		wantErr string
		dead    int // messages in the dead-letter stream
	}{
		"fail":        {policy: "fail", wantN: []int{0, 1}, wantErr: "message 3 of stream ORDERS on orders.eu (on_decode_error: fail)"},
		"skip":        {policy: "skip", wantN: []int{0, 1, 3, 4}},
		"dead_letter": {policy: "dead_letter", wantN: []int{0, 1, 3, 4}, dead: 1},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			s := testenv.NATS(t)
			nc := connectTo(t, s)
			js := newStream(t, nc, "ORDERS", "orders.>")
			newStream(t, nc, "DEAD", "dead.>")
			publish(t, js, "orders.eu", 0, 5, func(i int) []byte {
				if i == 2 {
					return []byte("not json {")
				}
				return []byte(`{"n":` + itoa(i) + `}`)
			})
			cfg := jsConfig(t, nc, "ORDERS", "tide")
			cfg.OnDecodeError = tc.policy
			if tc.policy == "dead_letter" {
				cfg.DeadLetterSubject = "dead.orders"
			}
			src := openSource(t, cfg, nil)

			var got []cdc.Event
			var err error
			eventually(t, "events or an error", func() bool {
				got, err = src.Poll(t.Context(), got, 10)
				return err != nil || len(got) == len(tc.wantN)
			})
			if err == nil && tc.wantErr != "" {
				got, err = src.Poll(t.Context(), got, 10) // the failure follows the good events
			}
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) || !errors.Is(err, ErrDecode) {
					t.Fatalf("error %v, want one containing %q wrapping ErrDecode", err, tc.wantErr)
				}
			} else if err != nil {
				t.Fatal(err)
			}
			if len(got) != len(tc.wantN) {
				t.Fatalf("got %d events, want %d", len(got), len(tc.wantN))
			}
			for i, ev := range got {
				if number(t, ev) != tc.wantN[i] {
					t.Fatalf("event %d has payload %s", i, ev.Payload)
				}
			}
			if src.Stats().DecodeErrors != 1 {
				t.Errorf("decode errors %d, want 1", src.Stats().DecodeErrors)
			}
			if tc.policy == "fail" {
				// The bad message is not acknowledged: still pending.
				src.Ack(t.Context(), got[len(got)-1].Pos)
				eventually(t, "ack floor 2", func() bool { return consumerInfo(t, js, "ORDERS", "tide").AckFloor.Stream == 2 })
				if p := consumerInfo(t, js, "ORDERS", "tide").NumAckPending; p != 3 {
					t.Errorf("ack pending %d, want 3: the bad message and the two fetched after it", p)
				}
				return
			}
			// The bad message itself was acknowledged.
			src.Ack(t.Context(), got[len(got)-1].Pos)
			eventually(t, "all acked", func() bool { return consumerInfo(t, js, "ORDERS", "tide").AckFloor.Stream == 5 })
			if tc.dead > 0 {
				m, err := js.Stream(t.Context(), "DEAD")
				if err != nil {
					t.Fatal(err)
				}
				raw, err := m.GetMsg(t.Context(), 1)
				if err != nil {
					t.Fatalf("dead letter: %v", err)
				}
				if string(raw.Data) != "not json {" || raw.Header.Get("Tide-Stream-Seq") != "3" ||
					!strings.Contains(raw.Header.Get("Tide-Error"), "not JSON") || raw.Header.Get("Tide-Subject") != "orders.eu" {
					t.Errorf("dead letter %q headers %v", raw.Data, raw.Header)
				}
			}
		})
	}
}

func TestDeadLetterWithoutStreamStops(t *testing.T) {
	s := testenv.NATS(t)
	nc := connectTo(t, s)
	js := newStream(t, nc, "ORDERS", "orders.>")
	publish(t, js, "orders.eu", 0, 1, func(int) []byte { return []byte("nope") })
	cfg := jsConfig(t, nc, "ORDERS", "tide")
	cfg.OnDecodeError, cfg.DeadLetterSubject, cfg.AckTimeout = "dead_letter", "nowhere.dead", 500*time.Millisecond
	src := openSource(t, cfg, nil)
	var err error
	eventually(t, "an error", func() bool { _, err = src.Poll(t.Context(), nil, 10); return err != nil })
	if !strings.Contains(err.Error(), "dead-letter subject nowhere.dead (it must be captured by a stream)") {
		t.Fatalf("error %v", err)
	}
}

func TestOpenRefuses(t *testing.T) {
	s := testenv.NATS(t)
	nc := connectTo(t, s)
	js := newStream(t, nc, "ORDERS", "orders.>")
	publishJSON(t, js, "orders.eu", 0, 3)
	// An existing consumer that delivers everything.
	if _, err := js.CreateOrUpdateConsumer(t.Context(), "ORDERS", jetstream.ConsumerConfig{Durable: "old", AckPolicy: jetstream.AckExplicitPolicy}); err != nil {
		t.Fatal(err)
	}
	meta := map[string]string{"source": "nats-jetstream", "stream": "ORDERS", "consumer": "gone"}
	pos := cdc.Position(`{"stream_seq":2,"consumer_seq":2}`)
	tests := map[string]struct {
		edit     func(*Config)
		restored *cdc.Checkpoint
		want     string
	}{
		"consumer deleted since the checkpoint, deliver new": {
			edit:     func(c *Config) { c.Consumer, c.Deliver = "gone", "new" },
			restored: &cdc.Checkpoint{Source: pos, Meta: meta},
			want:     "the consumer no longer exists",
		},
		"checkpoint past the end of the stream": {
			edit: func(c *Config) { c.Consumer = "fresh" },
			restored: &cdc.Checkpoint{Source: cdc.Position(`{"stream_seq":9}`),
				Meta: map[string]string{"source": "nats-jetstream", "stream": "ORDERS", "consumer": "fresh"}},
			want: "stream ORDERS ends at sequence 3, but Tide already wrote up to 9",
		},
		"checkpoint of another consumer": {
			edit:     func(c *Config) { c.Consumer = "other" },
			restored: &cdc.Checkpoint{Source: pos, Meta: meta},
			want:     `checkpoint consumer is "gone", configuration says "other"`,
		},
		"checkpoint of a core source": {
			restored: &cdc.Checkpoint{Source: cdc.Position(`{"seq":3}`), Meta: map[string]string{"source": "nats-core", "subject": "x"}},
			want:     `checkpoint source is "nats-core", configuration says "nats-jetstream"`,
		},
		"malformed position": {
			edit:     func(c *Config) { c.Consumer = "gone" },
			restored: &cdc.Checkpoint{Source: cdc.Position(`{"seq":3}`), Meta: meta},
			want:     "is not a JetStream position",
		},
		"configured start differs from the consumer's": {
			edit: func(c *Config) { c.Consumer, c.Deliver, c.StartSequence = "old", "by_start_sequence", 2 },
			want: "a consumer's start cannot change",
		},
		"bad start time": {
			edit: func(c *Config) { c.Deliver, c.StartTime = "by_start_time", "yesterday" },
			want: `start_time "yesterday" is not RFC 3339`,
		},
		"missing stream": {
			edit: func(c *Config) { c.Stream = "NOPE" },
			want: "jetstream stream NOPE",
		},
		"dead letter without subject": {
			edit: func(c *Config) { c.OnDecodeError = "dead_letter" },
			want: "needs a dead_letter_subject",
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			cfg := jsConfig(t, nc, "ORDERS", "tide")
			if tc.edit != nil {
				tc.edit(&cfg)
			}
			src := New(cfg)
			err := src.Open(t.Context(), tc.restored)
			src.Close()
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("Open = %v, want an error containing %q", err, tc.want)
			}
		})
	}
}

// TestCheckpointDecidesWhereReadingResumes: Tide, not the consumer's ack
// floor, owns the position. A restart resumes right after the checkpoint
// at once, whatever an earlier reader left unacknowledged, with the
// default ack wait of 30s.
func TestCheckpointDecidesWhereReadingResumes(t *testing.T) {
	s := testenv.NATS(t)
	nc := connectTo(t, s)
	js := newStream(t, nc, "ORDERS", "orders.>")
	publishJSON(t, js, "orders.eu", 0, 10)

	cfg := jsConfig(t, nc, "ORDERS", "tide")
	cfg.AckWait = 30 * time.Second
	src := openSource(t, cfg, nil)
	evs := pollN(t, src, 10)
	src.Ack(t.Context(), evs[3].Pos)
	src.Close()
	eventually(t, "ack floor 4", func() bool { return consumerInfo(t, js, "ORDERS", "tide").AckFloor.Stream == 4 })

	// A checkpoint behind the ack floor (a checkpoint store that fell back
	// to its previous page, say) is where reading resumes: the sink holds
	// only what the checkpoint names.
	cp := &cdc.Checkpoint{Source: evs[1].Pos, Meta: src.Identity()}
	start := time.Now()
	src2 := openSource(t, cfg, cp)
	again := pollN(t, src2, 1)
	t.Logf("restart to first delivery: %v (ack wait %v)", time.Since(start), cfg.AckWait)
	if time.Since(start) > cfg.AckWait/2 {
		t.Errorf("first delivery after %v: the restart waited for the ack wait", time.Since(start))
	}
	again = append(again, pollN(t, src2, 7)...)
	for i, ev := range again {
		if n := number(t, ev); n != i+2 {
			t.Fatalf("event %d after a checkpoint at payload 1 has payload %d, want %d", i, n, i+2)
		}
	}
	src2.Ack(t.Context(), again[4].Pos) // payloads 2..6
	src2.Close()

	// A crash after the checkpoint named payload 8 and before its ack.
	cp = &cdc.Checkpoint{Source: again[6].Pos, Meta: src.Identity()}
	src3 := openSource(t, cfg, cp)
	rest := pollN(t, src3, 1)
	if n := number(t, rest[0]); n != 9 {
		t.Fatalf("after a checkpoint at payload 8, got payload %d first, want 9", n)
	}
	src3.Ack(t.Context(), rest[0].Pos)
	eventually(t, "ack floor 10", func() bool {
		info := consumerInfo(t, js, "ORDERS", "tide")
		return info.AckFloor.Stream == 10 && info.NumAckPending == 0
	})
	src3.Close()

	// The consumer deleted meanwhile: deliver: all recreates it, and the
	// checkpoint still decides.
	if err := js.DeleteConsumer(t.Context(), "ORDERS", "tide"); err != nil {
		t.Fatal(err)
	}
	cp = &cdc.Checkpoint{Source: evs[6].Pos, Meta: src.Identity()}
	src4 := openSource(t, cfg, cp)
	for i, ev := range pollN(t, src4, 3) {
		if n := number(t, ev); n != 7+i {
			t.Fatalf("recreated consumer: event %d has payload %d, want %d", i, n, 7+i)
		}
	}

	// A checkpoint of the old format, with a consumer_seq, is accepted.
	src4.Close()
	old := &cdc.Checkpoint{Source: cdc.Position(`{"stream_seq":8,"consumer_seq":3}`), Meta: src.Identity()}
	src5 := openSource(t, cfg, old)
	if n := number(t, pollN(t, src5, 1)[0]); n != 8 {
		t.Fatalf("old-format checkpoint at stream sequence 8: got payload %d, want 8", n)
	}
}

// TestOpenWaitsForJetStream: Open while the server is down (a restart
// under a pipeline that is starting) waits for it instead of failing.
func TestOpenWaitsForJetStream(t *testing.T) {
	s := testenv.NATS(t)
	nc := connectTo(t, s)
	js := newStream(t, nc, "ORDERS", "orders.>")
	publishJSON(t, js, "orders.eu", 0, 3)
	port := s.Addr().(*net.TCPAddr).Port
	store := s.JetStreamConfig().StoreDir
	s.Shutdown()
	s.WaitForShutdown()

	src := New(jsConfig(t, nc, "ORDERS", "tide"))
	t.Cleanup(func() { src.Close() })
	// The retries reach the pipeline (cdc.Retrier): failures, then the
	// success that ends them.
	var mu sync.Mutex
	var reports []int
	src.SetRetry(cdc.RetryPolicy{}, func(attempt int, err error) {
		mu.Lock()
		defer mu.Unlock()
		reports = append(reports, attempt)
	})
	opened := make(chan error, 1)
	go func() { opened <- src.Open(t.Context(), nil) }()
	// The outage Open must ride out lasts until Open has seen it: a fixed
	// pause is not enough, since the client holds a request made while it
	// reconnects until the request's timeout, and a server back before
	// that answers it as if nothing had happened.
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		mu.Lock()
		failed := len(reports) > 0
		mu.Unlock()
		if failed {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("Open reported no failed attempt in 30 s of outage")
		}
	}
	if filepath.Base(store) == server.JetStreamStoreDir {
		store = filepath.Dir(store) // the server appends it again
	}
	testenv.NATSWithOptions(t, &server.Options{Port: port, StoreDir: store})
	if err := <-opened; err != nil {
		t.Fatalf("open across an outage: %v", err)
	}
	mu.Lock()
	if len(reports) < 2 || reports[0] != 1 || reports[len(reports)-1] != 0 {
		t.Errorf("retries reported %v, want 1, …, then 0", reports)
	}
	mu.Unlock()
	for i, ev := range pollN(t, src, 3) {
		if n := number(t, ev); n != i {
			t.Fatalf("event %d has payload %d", i, n)
		}
	}
}

// TestServerRestartLosesNothing: what was in flight across a server
// restart comes again after the reconnect, in stream order, once.
func TestServerRestartLosesNothing(t *testing.T) {
	s := testenv.NATS(t)
	nc := connectTo(t, s)
	js := newStream(t, nc, "ORDERS", "orders.>")
	publishJSON(t, js, "orders.eu", 0, 2000)

	cfg := jsConfig(t, nc, "ORDERS", "tide")
	cfg.FetchBatch = 100
	cfg.AckWait = 30 * time.Second // nothing may wait for it
	src := openSource(t, cfg, nil)
	got := pollN(t, src, 1000)
	src.Ack(t.Context(), got[len(got)-1].Pos)
	eventually(t, "ack floor 1000", func() bool { return consumerInfo(t, js, "ORDERS", "tide").AckFloor.Stream == 1000 })

	s = testenv.NATSRestart(t, s)
	eventually(t, "reconnected", nc.IsConnected)
	publishJSON(t, js, "orders.eu", 2000, 3000)

	deadline := time.Now().Add(20 * time.Second)
	var buf []cdc.Event
	for len(got) < 3000 && time.Now().Before(deadline) {
		var err error
		buf, err = src.Poll(t.Context(), buf[:0], 500)
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, buf...)
		if len(buf) > 0 {
			src.Ack(t.Context(), buf[len(buf)-1].Pos)
		} else {
			select {
			case <-src.Ready():
			case <-time.After(time.Second):
			}
		}
	}
	for i, ev := range got {
		if n := number(t, ev); n != i {
			t.Fatalf("event %d has payload %d (lost, duplicated or reordered)", i, n)
		}
	}
	if len(got) != 3000 {
		t.Fatalf("got %d events, want 3000", len(got))
	}
	eventually(t, "everything acknowledged", func() bool {
		info := consumerInfo(t, js, "ORDERS", "tide")
		return info.AckFloor.Stream == 3000 && info.NumAckPending == 0
	})
}

func TestAckWorkerAbandonsQueuedAcksOnShutdown(t *testing.T) {
	s := testenv.NATS(t)
	nc := connectTo(t, s)
	js := newStream(t, nc, "ORDERS", "orders.>")
	publishJSON(t, js, "orders.eu", 0, 600)
	cons, err := js.CreateOrUpdateConsumer(t.Context(), "ORDERS", jetstream.ConsumerConfig{
		Durable: "tide", AckPolicy: jetstream.AckExplicitPolicy, AckWait: 500 * time.Millisecond,
	})
	if err != nil {
		t.Fatal(err)
	}
	fetch := func(n int) []jetstream.Msg {
		var msgs []jetstream.Msg
		for len(msgs) < n {
			b, err := cons.Fetch(n-len(msgs), jetstream.FetchMaxWait(5*time.Second))
			if err != nil {
				t.Fatal(err)
			}
			for m := range b.Messages() {
				msgs = append(msgs, m)
			}
		}
		return msgs
	}
	msgs := fetch(600)

	// No worker runs: at the shutdown deadline everything still queued is
	// abandoned and counted, none is acknowledged.
	var m counters
	a := startAcker(testLogger(t), &m, 512, time.Second, 0)
	if dropped := a.enqueue(msgs[:500]); dropped != 0 {
		t.Fatalf("dropped %d with room for 512", dropped)
	}
	if dropped := a.enqueue(msgs[500:]); dropped != 100 {
		t.Fatalf("dropped %d past a backlog of 512 with 500 queued, want 100", dropped)
	}
	if a.shutdown(100 * time.Millisecond) {
		t.Fatal("shutdown with queued acks and no worker reported success")
	}
	if got := m.snapshot(); got.AcksAbandoned != 500 || got.AcksDropped != 100 || got.Acked != 0 {
		t.Fatalf("stats %+v, want 500 abandoned, 100 dropped, 0 acked", got)
	}
	if dropped := a.enqueue(msgs[:1]); dropped != 1 {
		t.Fatalf("enqueue after shutdown dropped %d, want 1", dropped)
	}

	// The broker redelivers every one of them.
	again := fetch(600)
	for _, msg := range again {
		meta, _ := msg.Metadata()
		if meta.NumDelivered != 2 {
			t.Fatalf("stream seq %d delivered %d times, want 2", meta.Sequence.Stream, meta.NumDelivered)
		}
	}

	// A running acker acknowledges them, confirmed by double acks.
	var m2 counters
	a2 := newAcker(testLogger(t), &m2, 1000, 5*time.Second)
	a2.enqueue(again)
	eventually(t, "acked 600", func() bool { return m2.acked.Load() == 600 })
	a2.shutdown(time.Second)
	if info := consumerInfo(t, js, "ORDERS", "tide"); info.AckFloor.Stream != 600 || info.NumAckPending != 0 {
		t.Fatalf("ack floor %d, pending %d", info.AckFloor.Stream, info.NumAckPending)
	}
}

func TestAckNoneDoesNotTrack(t *testing.T) {
	s := testenv.NATS(t)
	nc := connectTo(t, s)
	js := newStream(t, nc, "ORDERS", "orders.>")
	publishJSON(t, js, "orders.eu", 0, 50)
	cfg := jsConfig(t, nc, "ORDERS", "tide")
	cfg.Ack = "none"
	cfg.Format = "string"
	src := openSource(t, cfg, nil)
	evs := pollN(t, src, 50)
	if evs[0].PayloadFormat != cdc.PayloadString || src.Ack(t.Context(), evs[49].Pos) != nil {
		t.Fatalf("event %+v", evs[0])
	}
	if info := consumerInfo(t, js, "ORDERS", "tide"); info.Config.AckPolicy != jetstream.AckNonePolicy || info.NumAckPending != 0 {
		t.Fatalf("ack policy %v pending %d", info.Config.AckPolicy, info.NumAckPending)
	}
}

func TestLagMetric(t *testing.T) {
	s := testenv.NATS(t)
	nc := connectTo(t, s)
	js := newStream(t, nc, "ORDERS", "orders.>")
	publishJSON(t, js, "orders.eu", 0, 50)
	cfg := jsConfig(t, nc, "ORDERS", "tide")
	cfg.LagPollInterval = 50 * time.Millisecond
	cfg.FetchBatch = 10
	cfg.QueueSize = 10
	src := openSource(t, cfg, nil)
	// The reader holds at most a queue and a batch: the rest is pending.
	eventually(t, "lag reported", func() bool { return src.Stats().Lag >= 20 })
	pollN(t, src, 50)
	eventually(t, "lag 0", func() bool { return src.Stats().Lag == 0 })
}

func TestBackoff(t *testing.T) {
	tests := map[string]struct {
		attempt int
		base    time.Duration
	}{
		"first":  {1, 500 * time.Millisecond},
		"second": {2, time.Second},
		"third":  {3, 2 * time.Second},
		"fourth": {4, 4 * time.Second},
		"capped": {5, 5 * time.Second},
		"far":    {60, 5 * time.Second},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			lo, hi := backoff(tc.attempt, 0), backoff(tc.attempt, 0.999999)
			if want := tc.base * 8 / 10; lo != want {
				t.Errorf("lowest %v, want %v", lo, want)
			}
			if want := tc.base * 12 / 10; hi < want-time.Millisecond || hi > want {
				t.Errorf("highest %v, want just under %v", hi, want)
			}
			if mid := backoff(tc.attempt, 0.5); mid != tc.base {
				t.Errorf("middle %v, want %v", mid, tc.base)
			}
		})
	}
	// The jitter comes from a random source: 1000 draws spread over the
	// whole ±20% range.
	lo, hi := time.Hour, time.Duration(0)
	for range 1000 {
		d := backoff(1, jitter())
		lo, hi = min(lo, d), max(hi, d)
	}
	if lo < 400*time.Millisecond || hi > 600*time.Millisecond || hi-lo < 150*time.Millisecond {
		t.Errorf("1000 jittered first backoffs span [%v, %v], want most of [400ms, 600ms]", lo, hi)
	}
}

// TestConsumerDeletedUnderTheSource deletes the consumer under a running
// source: the source creates it again, repositions it after the last
// message it handed out, and goes on with nothing lost or repeated.
func TestConsumerDeletedUnderTheSource(t *testing.T) {
	s := testenv.NATS(t)
	nc := connectTo(t, s)
	js := newStream(t, nc, "ORDERS", "orders.>")
	publishJSON(t, js, "orders.eu", 0, 5)
	cfg := jsConfig(t, nc, "ORDERS", "tide")
	src := openSource(t, cfg, nil)
	evs := pollN(t, src, 5)
	src.Ack(t.Context(), evs[4].Pos)
	if err := js.DeleteConsumer(t.Context(), "ORDERS", "tide"); err != nil {
		t.Fatal(err)
	}
	publishJSON(t, js, "orders.eu", 5, 10)
	for i, ev := range pollN(t, src, 5) {
		if n := number(t, ev); n != 5+i {
			t.Fatalf("after the consumer was deleted, event %d has payload %d, want %d", i, n, 5+i)
		}
	}
	if st := src.Stats(); st.Fetched != 10 || st.Repositioned < 2 {
		t.Errorf("fetched %d, repositioned %d; want 10, at least 2", st.Fetched, st.Repositioned)
	}
	if info := consumerInfo(t, js, "ORDERS", "tide"); info.Config.DeliverPolicy != jetstream.DeliverAllPolicy {
		t.Errorf("recreated consumer delivers %v, want all", info.Config.DeliverPolicy)
	}
}

// TestPositionTimeOlderPositions: a position written before positions
// carried the message's time, or a core NATS one, has no time: the lag
// stays unknown until the first poll rather than being made up.
func TestPositionTimeOlderPositions(t *testing.T) {
	src := New(Config{})
	for _, p := range []string{`{"stream_seq":9}`, `{"stream_seq":9,"consumer_seq":3}`, `{"seq":4}`, `not json`} {
		if at, ok := src.PositionTime(cdc.Position(p)); ok {
			t.Errorf("PositionTime(%s) = %v, want none", p, at)
		}
	}
	if at, ok := src.PositionTime(cdc.Position(`{"stream_seq":9,"ts":1733311111222}`)); !ok || at.UnixMilli() != 1733311111222 {
		t.Errorf("PositionTime with ts = %v, %v", at, ok)
	}
}
