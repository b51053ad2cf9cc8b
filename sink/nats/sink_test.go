package nats

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"go.uber.org/goleak"

	"github.com/tide-cdc/tide/cdc"
	"github.com/tide-cdc/tide/internal/testenv"
)

// TestMain removes the tide binary the end-to-end tests built, after the
// leak check.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m, goleak.Cleanup(func(code int) {
		testenv.RemoveTideBinary()
		os.Exit(code)
	}))
}

func testLogger(t testing.TB) *slog.Logger {
	return slog.New(slog.NewTextHandler(t.Output(), &slog.HandlerOptions{Level: slog.LevelError}))
}

func connectTo(t testing.TB, url string) *nats.Conn {
	t.Helper()
	nc, err := nats.Connect(url)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	return nc
}

func records(from, to int) []cdc.Record {
	var rs []cdc.Record
	for i := from; i < to; i++ {
		rs = append(rs, cdc.Record{
			Event: cdc.Event{
				Pos: cdc.Position(fmt.Sprintf(`{"seq":%d}`, i)), Op: cdc.OpInsert, Namespace: "shop.orders",
				ClusterTime: cdc.Timestamp{T: 1700000000, I: uint32(i)},
			},
			Data: fmt.Appendf(nil, `{"n":%d}`, i),
		})
	}
	return rs
}

func openSink(t testing.TB, cfg Config) *Sink {
	t.Helper()
	if cfg.Logger == nil {
		cfg.Logger = testLogger(t)
	}
	s := New(cfg)
	if err := s.Open(t.Context(), nil); err != nil {
		t.Fatalf("open: %v", err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

func putCommit(t testing.TB, s *Sink, rs []cdc.Record) error {
	t.Helper()
	if err := s.Put(t.Context(), rs); err != nil {
		return err
	}
	return s.Commit(t.Context(), cdc.Checkpoint{})
}

func streamMsgs(t testing.TB, nc *nats.Conn, name string) jetstream.Stream {
	t.Helper()
	js, _ := jetstream.New(nc)
	st, err := js.Stream(context.Background(), name)
	if err != nil {
		t.Fatal(err)
	}
	return st
}

func TestPublishOnceWithIdsAndHeaders(t *testing.T) {
	srv := testenv.NATS(t)
	cfg := Config{
		Pipeline: "orders", Servers: []string{srv.ClientURL()}, Stream: "CDC",
		CreateStream: &StreamSpec{},
	}
	s := openSink(t, cfg)
	if err := putCommit(t, s, records(0, 100)); err != nil {
		t.Fatal(err)
	}

	nc := connectTo(t, srv.ClientURL())
	st := streamMsgs(t, nc, "CDC")
	info, _ := st.Info(t.Context())
	if info.State.Msgs != 100 || info.Config.Duplicates != 2*time.Minute || info.Config.Storage != jetstream.FileStorage {
		t.Fatalf("stream holds %d messages (want 100), config %+v", info.State.Msgs, info.Config)
	}
	m, err := st.GetMsg(t.Context(), 8)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{
		"Nats-Msg-Id": `orders:{"seq":7}`, "Tide-Op": "insert", "Tide-Namespace": "shop.orders", "Tide-Cluster-Time": "1700000000.7",
	}
	for k, v := range want {
		if got := m.Header.Get(k); got != v {
			t.Errorf("header %s = %q, want %q", k, got, v)
		}
	}
	if m.Subject != "cdc.shop.orders" || string(m.Data) != `{"n":7}` {
		t.Errorf("message %s %q", m.Subject, m.Data)
	}

	// A replay after a crash (a new sink, the same positions) within the
	// duplicate window is dropped by the stream.
	s2 := openSink(t, cfg)
	if err := putCommit(t, s2, records(0, 120)); err != nil {
		t.Fatal(err)
	}
	info, _ = st.Info(t.Context())
	if info.State.Msgs != 120 || s2.Duplicates() != 100 {
		t.Fatalf("after replay: %d messages, %d duplicates; want 120, 100", info.State.Msgs, s2.Duplicates())
	}
	for seq := uint64(1); seq <= 120; seq++ {
		m, err := st.GetMsg(t.Context(), seq)
		if err != nil || string(m.Data) != fmt.Sprintf(`{"n":%d}`, seq-1) {
			t.Fatalf("stream seq %d = %q, %v", seq, m.Data, err)
		}
	}
}

func TestCommitFails(t *testing.T) {
	srv := testenv.NATS(t)
	cfg := Config{
		Pipeline: "orders", Servers: []string{srv.ClientURL()}, Stream: "CDC",
		CreateStream: &StreamSpec{Subjects: []string{"cdc.>"}}, PublishTimeout: 2 * time.Second,
	}

	t.Run("subject not captured", func(t *testing.T) {
		c := cfg
		c.Subject = "elsewhere.{coll}"
		s := openSink(t, c)
		err := putCommit(t, s, records(0, 3))
		if err == nil || !strings.Contains(err.Error(), "commit 3 records: 3 publishes failed") {
			t.Fatalf("commit = %v, want the failed publishes", err)
		}
	})
	t.Run("server gone", func(t *testing.T) {
		srv := testenv.NATS(t)
		c := cfg
		c.Servers = []string{srv.ClientURL()}
		c.MaxOutage = time.Second // the server never comes back: give up soon
		s := openSink(t, c)
		// The server goes before the batch is published: publishing after
		// Put could otherwise win the race and be acknowledged, and a
		// commit of acknowledged records rightly succeeds.
		srv.Shutdown()
		err := s.Put(t.Context(), records(0, 10))
		if err == nil {
			err = s.Commit(t.Context(), cdc.Checkpoint{})
			if err == nil || !strings.Contains(err.Error(), "commit 10 records") {
				t.Fatalf("commit = %v, want an error", err)
			}
		}
	})
}

func TestOpenRefuses(t *testing.T) {
	srv := testenv.NATS(t)
	tests := map[string]struct {
		cfg  Config
		want string
	}{
		"missing stream":   {Config{Pipeline: "p", Stream: "NOPE"}, "stream NOPE does not exist; create it or set create_stream"},
		"no pipeline":      {Config{Stream: "CDC"}, "a pipeline name is required"},
		"no stream":        {Config{Pipeline: "p"}, "a stream is required"},
		"bad placeholder":  {Config{Pipeline: "p", Stream: "CDC", Subject: "cdc.{database}"}, "unknown placeholder {database}"},
		"wildcard subject": {Config{Pipeline: "p", Stream: "CDC", Subject: "cdc.*.{coll}"}, "wildcards and spaces cannot be published to"},
		"unclosed":         {Config{Pipeline: "p", Stream: "CDC", Subject: "cdc.{db"}, "unclosed {"},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			tc.cfg.Servers = []string{srv.ClientURL()}
			s := New(tc.cfg)
			err := s.Open(t.Context(), nil)
			s.Close()
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("Open = %v, want an error containing %q", err, tc.want)
			}
		})
	}
}

func TestSubjectTemplate(t *testing.T) {
	tests := map[string]struct {
		tmpl, ns string
		op       cdc.Op
		want     string
	}{
		"db and coll":        {"cdc.{db}.{coll}", "shop.orders", cdc.OpInsert, "cdc.shop.orders"},
		"dotted collection":  {"cdc.{db}.{coll}", "shop.system.buckets", cdc.OpInsert, "cdc.shop.system.buckets"},
		"op":                 {"cdc.{op}.{namespace}", "shop.orders", cdc.OpDelete, "cdc.delete.shop.orders"},
		"no collection":      {"cdc.{db}.{coll}", "shop", cdc.OpDropDatabase, "cdc.shop._"},
		"illegal characters": {"x.{coll}", "db.a b*>c", cdc.OpInsert, "x.a_b__c"},
		"empty tokens":       {"x.{namespace}", "a..b.", cdc.OpInsert, "x.a._.b._"},
		"literal only":       {"fixed.subject", "shop.orders", cdc.OpInsert, "fixed.subject"},
		"route":              {"orders.{route}", "shop.orders", cdc.OpInsert, "orders.eu.de"},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			parts, err := parseSubject(tc.tmpl)
			if err != nil {
				t.Fatal(err)
			}
			s := &Sink{subject: parts}
			got := s.render(&cdc.Record{Event: cdc.Event{Namespace: tc.ns, Op: tc.op, Route: "eu.de"}})
			if got != tc.want {
				t.Errorf("render = %q, want %q", got, tc.want)
			}
		})
	}
}

func TestMsgID(t *testing.T) {
	short := msgID(nil, "p", cdc.Position(`{"stream_seq":5}`))
	if string(short) != `p:{"stream_seq":5}` {
		t.Errorf("short id %q", short)
	}
	long := cdc.Position(`{"_data":"` + strings.Repeat("8263", 40) + `"}`)
	a, b := msgID(nil, "p", long), msgID(nil, "p", append(long[:len(long)-2:len(long)-2], `0"}`...))
	if len(a) != 2+32 || string(a) == string(b) || string(a) != string(msgID(nil, "p", long)) {
		t.Errorf("long ids %q %q: want distinct, stable 128-bit hashes", a, b)
	}
	if bin := msgID(nil, "p", cdc.Position{0, 1, 2}); len(bin) != 34 {
		t.Errorf("binary position id %q, want a hash", bin)
	}
}
