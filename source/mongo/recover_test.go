package mongo

import (
	"context"
	"encoding/json"
	"log/slog"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/tide-cdc/tide/cdc"
	"github.com/tide-cdc/tide/internal/testenv"
	"github.com/tide-cdc/tide/mongowire"
)

func TestParseClusterTime(t *testing.T) {
	for in, want := range map[string]cdc.Timestamp{
		"Timestamp(1764638400, 7)":  {T: 1764638400, I: 7},
		"Timestamp(1764638400,7)":   {T: 1764638400, I: 7},
		"1764638400.7":              {T: 1764638400, I: 7},
		"2025-12-02T01:20:00Z":      {T: 1764638400},
		"2025-12-02T02:20:00+01:00": {T: 1764638400},
	} {
		got, err := ParseClusterTime(in)
		if err != nil || got != want {
			t.Errorf("ParseClusterTime(%q) = %v, %v; want %v", in, got, err, want)
		}
	}
	for in, words := range map[string][]string{
		"yesterday":                 {`"yesterday"`, "RFC 3339", "Timestamp(sec, inc)", "sec.inc"},
		"2025-12-02 01:20:00":       {"RFC 3339"},
		"2025-12-02T01:20:00.5Z":    {"fraction of a second", "Timestamp(sec, inc)"},
		"Timestamp(99999999999, 1)": {"32 bits"},
		"0.5":                       {"must not be 0"},
		"Timestamp(1764638400, -1)": {"RFC 3339"},
		"1964-01-01T00:00:00Z":      {"outside the range"},
	} {
		_, err := ParseClusterTime(in)
		wantErr(t, err, nil, words...)
	}
}

// eventsAt inserts ids and returns their change events, with cluster times.
func eventsAt(t *testing.T, e *env, ids ...int) ([]cdc.Event, cdc.Checkpoint) {
	t.Helper()
	src := openSource(t, e.config(t), nil)
	evs, err := pollUntil(t, src, func(evs []cdc.Event) bool { return len(evs) > 0 })
	if err != nil {
		t.Fatal(err)
	}
	cp := checkpointOf(evs[len(evs)-1].Pos, src.Identity())
	insert(t, e.coll, ids...)
	evs, err = pollUntil(t, src, countOps(len(ids)))
	if err != nil {
		t.Fatal(err)
	}
	src.Close()
	return nonMarkers(evs), cp
}

// A checkpoint set to a cluster time resumes with the first change after
// it: startAtOperationTime is inclusive, so the source starts one
// increment later.
func TestClusterTimeResumesExactlyAfter(t *testing.T) {
	e := newEnv(t)
	evs, cp := eventsAt(t, e, 1, 2, 3, 4, 5)
	at := evs[2].ClusterTime // the insert of 3
	pos, err := ClusterTimePosition(cp.Source, at)
	if err != nil {
		t.Fatal(err)
	}
	if want := DescribePosition(pos); !strings.Contains(want, "after cluster time Timestamp(") {
		t.Errorf("DescribePosition = %q", want)
	}
	cp.Source = pos
	src := openSource(t, e.config(t), &cp)
	got, err := pollUntil(t, src, countOps(2))
	if err != nil {
		t.Fatal(err)
	}
	got = nonMarkers(got)
	if len(got) != 2 || docID(t, got[0]) != 4 || docID(t, got[1]) != 5 {
		t.Fatalf("resumed after %v with %v, want the inserts of 4 and 5", at, ops(got))
	}
	if !strings.Contains(string(got[1].Pos), "resume_token") {
		t.Errorf("a later event's position is %s, want a resume token", got[1].Pos)
	}
}

// A cluster time older than the oplog's first entry fails Open with 286
// and names both recovery commands; one in the future is refused.
func TestClusterTimeOutsideWindow(t *testing.T) {
	e := newEnv(t, func(c *mongowire.Config) { c.OplogBytes = 16 << 10 })
	evs, cp := eventsAt(t, e, 1)
	for i := range 300 {
		if _, err := e.coll.InsertOne(context.Background(), bson.D{{Key: "_id", Value: 100 + i}, {Key: "pad", Value: strings.Repeat("y", 200)}}); err != nil {
			t.Fatal(err)
		}
	}
	old := cp
	var err error
	if old.Source, err = ClusterTimePosition(cp.Source, evs[0].ClusterTime); err != nil {
		t.Fatal(err)
	}
	err = New(e.config(t)).Open(t.Context(), &old)
	wantErr(t, err, ErrHistoryLost, "286", "older than the oldest oplog entry", "tide checkpoint set -f FILE --cluster-time T", "tide snapshot -f FILE")

	future := cp
	if future.Source, err = ClusterTimePosition(cp.Source, cdc.Timestamp{T: uint32(time.Now().Add(24 * time.Hour).Unix())}); err != nil {
		t.Fatal(err)
	}
	err = New(e.config(t)).Open(t.Context(), &future)
	wantErr(t, err, ErrIdentity, "in the future", "inside the oplog window")
}

func TestResumeTokenPosition(t *testing.T) {
	e := newEnv(t)
	evs, cp := eventsAt(t, e, 1, 2, 3)
	tok, err := bson.MarshalExtJSON(bson.Raw(evs[0].ResumeToken), false, false)
	if err != nil {
		t.Fatal(err)
	}
	if cp.Source, err = ResumeTokenPosition(cp.Source, string(tok)); err != nil {
		t.Fatal(err)
	}
	src := openSource(t, e.config(t), &cp)
	got, err := pollUntil(t, src, countOps(2))
	if err != nil {
		t.Fatal(err)
	}
	if got = nonMarkers(got); docID(t, got[0]) != 2 {
		t.Fatalf("resumed with %d, want 2", docID(t, got[0]))
	}
	for in, words := range map[string][]string{
		`{"_data": 1`: {"not a JSON document"},
		`{"x": "1"}`:  {"no _data string"},
	} {
		_, err := ResumeTokenPosition(cp.Source, in)
		wantErr(t, err, nil, words...)
	}
}

// gapLine reports a re-snapshot's begin or end line.
func gapLine(t *testing.T, ev cdc.Event) string {
	t.Helper()
	if ev.Op != cdc.OpSnapshot || ev.DocumentKey != nil {
		return ""
	}
	s, _ := bson.Raw(ev.Extra).Lookup("resnapshot").StringValueOK()
	return s
}

// A re-snapshot copies the collection as it is now between a begin and
// an end line, then streams on; restarted mid-copy it resumes the copy
// and still ends with the end line.
func TestResnapshot(t *testing.T) {
	e := newEnv(t)
	evs, cp := eventsAt(t, e, 1, 2, 3)
	if _, err := e.coll.DeleteOne(context.Background(), bson.D{{Key: "_id", Value: 2}}); err != nil {
		t.Fatal(err)
	}
	insert(t, e.coll, 4)
	pos, err := ResnapshotPosition(evs[2].Pos, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	if d := DescribePosition(pos); !strings.Contains(d, "re-snapshot") {
		t.Errorf("DescribePosition = %q", d)
	}
	cp.Source = pos
	cfg := e.config(t)
	cfg.SnapshotBatch = 1
	src := openSource(t, cfg, &cp)
	got, err := pollUntil(t, src, func(evs []cdc.Event) bool { return len(evs) >= 2 })
	if err != nil {
		t.Fatal(err)
	}
	if gapLine(t, got[0]) != "begin" || !strings.Contains(string(got[0].Pos), `"gap":true`) {
		t.Fatalf("first event %v %s, want the begin line", got[0].Op, got[0].Pos)
	}
	var x struct {
		GapAfter bson.Timestamp `bson:"gap_after"`
	}
	if err := bson.Unmarshal(got[0].Extra, &x); err != nil || x.GapAfter.T != evs[2].ClusterTime.T || x.GapAfter.I != evs[2].ClusterTime.I {
		t.Errorf("begin line's gap_after = %v (%v), want %v", x.GapAfter, err, evs[2].ClusterTime)
	}
	// Stop after the first copied document and restart from it.
	mid := checkpointOf(got[1].Pos, src.Identity())
	src.Close()
	// Written after the start token: the copy finds it, and the stream
	// from the token delivers its insert too, as after an initial
	// snapshot.
	insert(t, e.coll, 5)
	src = openSource(t, cfg, &mid)
	rest, err := pollUntil(t, src, func(evs []cdc.Event) bool {
		return len(evs) > 0 && evs[len(evs)-1].Op == cdc.OpInsert
	})
	if err != nil {
		t.Fatal(err)
	}
	all := append(got[:2], nonMarkers(rest)...)
	var ids []int
	var lines []string
	for _, ev := range all {
		if l := gapLine(t, ev); l != "" {
			lines = append(lines, l)
			continue
		}
		ids = append(ids, docID(t, ev))
	}
	if strings.Join(lines, ",") != "begin,end" {
		t.Errorf("snapshot lines %v, want begin,end", lines)
	}
	if len(ids) != 5 || ids[0] != 1 || ids[1] != 3 || ids[2] != 4 || ids[3] != 5 || ids[4] != 5 || all[len(all)-1].Op != cdc.OpInsert {
		t.Errorf("documents %v (%v), want the copy 1, 3, 4, 5 and then the insert of 5", ids, ops(all))
	}
}

func TestMultiResnapshot(t *testing.T) {
	e := newMultiEnv(t, "shop.a", "shop.b")
	cfg := e.config(t, "shop", "*")
	src := openSource(t, cfg, nil)
	evs, err := pollUntil(t, src, func(evs []cdc.Event) bool { return len(evs) > 0 })
	if err != nil {
		t.Fatal(err)
	}
	cp := checkpointOf(evs[len(evs)-1].Pos, src.Identity())
	src.Close()
	insert(t, e.coll("shop.a"), 1, 2)
	insert(t, e.coll("shop.b"), 3)
	if cp.Source, err = ResnapshotPosition(cp.Source, time.Now()); err != nil {
		t.Fatal(err)
	}
	src = openSource(t, cfg, &cp)
	got, err := pollUntil(t, src, func(evs []cdc.Event) bool {
		n := 0
		for _, ev := range evs {
			if gapLine(t, ev) == "end" {
				n++
			}
		}
		return n == 2
	})
	if err != nil {
		t.Fatal(err)
	}
	var summary []string
	for _, ev := range nonMarkers(got) {
		if l := gapLine(t, ev); l != "" {
			summary = append(summary, l+":"+ev.Namespace)
		} else {
			summary = append(summary, ev.Namespace)
		}
	}
	want := "begin:shop.a,begin:shop.b,shop.a,shop.a,shop.b,end:shop.a,end:shop.b"
	if s := strings.Join(summary, ","); s != want {
		// The copy of a and b may interleave; only the frame is fixed.
		if !strings.HasPrefix(s, "begin:shop.a,begin:shop.b,") || !strings.HasSuffix(s, ",end:shop.a,end:shop.b") || len(summary) != 7 {
			t.Errorf("events %s, want %s", s, want)
		}
	}
}

// The oplog window and the checkpoint headroom, against the embedded
// server with an oplog small enough to roll within the test.
func TestOplogHeadroom(t *testing.T) {
	e := newEnv(t, func(c *mongowire.Config) { c.OplogBytes = 64 << 10 })
	cfg := e.config(t)
	cfg.OplogPoll = 100 * time.Millisecond
	cfg.HeadroomWarn = time.Hour
	var logs testenv.Buffer
	cfg.Logger = slog.New(slog.NewTextHandler(&logs, nil))
	src := openSource(t, cfg, nil)
	first, err := pollUntil(t, src, func(evs []cdc.Event) bool { return len(evs) > 0 })
	if err != nil {
		t.Fatal(err)
	}
	if err := src.Ack(context.Background(), first[len(first)-1].Pos); err != nil {
		t.Fatal(err)
	}
	// Write for a few seconds, so that the oplog rolls: its first entry
	// moves, which is the rate the headroom divides by.
	deadline := time.Now().Add(3 * time.Second)
	for i := 0; time.Now().Before(deadline); i++ {
		if _, err := e.coll.InsertOne(context.Background(), bson.D{{Key: "_id", Value: i}, {Key: "pad", Value: strings.Repeat("z", 300)}}); err != nil {
			t.Fatal(err)
		}
		if i%50 == 0 {
			time.Sleep(20 * time.Millisecond)
		}
	}
	var d map[string]any
	waitFor(t, "a bounded headroom", func() bool {
		d = src.StatusDetails()
		return d != nil && d["checkpoint_headroom_seconds"] != nil
	})
	if _, err := json.Marshal(d); err != nil {
		t.Fatalf("StatusDetails is not JSON: %v", err)
	}
	if d["headroom_warning"] != true || d["headroom_warn_seconds"] != 3600.0 {
		t.Errorf("StatusDetails = %v: the checkpoint falls out within seconds, want a warning against 3600 s", d)
	}
	if h := d["checkpoint_headroom_seconds"].(float64); h < 0 || h > 600 {
		t.Errorf("headroom %v s, want a few seconds: the checkpoint is at the start and the oplog rolls every few seconds", h)
	}
	if !strings.Contains(logs.String(), "checkpoint headroom is low") {
		t.Errorf("no warning logged:\n%s", logs.String())
	}
	reg := prometheus.NewPedanticRegistry()
	reg.MustRegister(src.Collector("p"))
	families, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	seen := map[string]float64{}
	for _, f := range families {
		for _, m := range f.GetMetric() {
			seen[f.GetName()] = m.GetGauge().GetValue()
		}
	}
	if w, ok := seen["tide_mongo_oplog_window_seconds"]; !ok || w < 0 || w > 10 {
		t.Errorf("tide_mongo_oplog_window_seconds = %v (%v), want a few seconds", w, ok)
	}
	if _, ok := seen["tide_mongo_checkpoint_headroom_seconds"]; !ok {
		t.Error("no tide_mongo_checkpoint_headroom_seconds")
	}
}

// An oplog that drops nothing gives an unbounded headroom: no warning.
func TestOplogHeadroomUnbounded(t *testing.T) {
	e := newEnv(t)
	cfg := e.config(t)
	cfg.OplogPoll = 100 * time.Millisecond
	src := openSource(t, cfg, nil)
	insert(t, e.coll, 1)
	if _, err := pollUntil(t, src, countOps(1)); err != nil {
		t.Fatal(err)
	}
	var d map[string]any
	waitFor(t, "the oplog window", func() bool { d = src.StatusDetails(); return d != nil })
	if d["checkpoint_headroom_seconds"] != nil || d["headroom_warning"] != false {
		t.Errorf("StatusDetails = %v, want an unbounded headroom and no warning", d)
	}
}

// A user who may not read local.oplog.rs: logged once, nothing exported.
func TestOplogHeadroomRefused(t *testing.T) {
	srv := testenv.MongoWire(t, func(c *mongowire.Config) {
		c.Auth, c.AdminUser, c.AdminPassword, c.AuthFailureDelay = true, "admin", "admin-pw", -1
	})
	root := testenv.MongoClient(t, "mongodb://admin:admin-pw@"+srv.Addr()+"/?replicaSet=rs0&authSource=admin")
	ctx := context.Background()
	if err := root.Database("shop").CreateCollection(ctx, "orders"); err != nil {
		t.Fatal(err)
	}
	if err := root.Database("admin").RunCommand(ctx, bson.D{{Key: "createUser", Value: "app"}, {Key: "pwd", Value: "app-pw"},
		{Key: "roles", Value: bson.A{bson.D{{Key: "role", Value: "read"}, {Key: "db", Value: "shop"}}, "clusterMonitor"}}}).Err(); err != nil {
		t.Fatal(err)
	}
	var logs testenv.Buffer
	cfg := (&env{srv: srv}).config(t)
	cfg.URI = "mongodb://" + url.UserPassword("app", "app-pw").String() + "@" + srv.Addr() + "/?replicaSet=rs0&authSource=admin"
	cfg.OplogPoll = 100 * time.Millisecond
	cfg.Logger = slog.New(slog.NewTextHandler(&logs, nil))
	src := openSource(t, cfg, nil)
	waitFor(t, "the refusal logged", func() bool { return strings.Contains(logs.String(), "cannot read the oplog window") })
	time.Sleep(300 * time.Millisecond)
	if n := strings.Count(logs.String(), "cannot read the oplog window"); n != 1 {
		t.Errorf("refusal logged %d times, want once:\n%s", n, logs.String())
	}
	if d := src.StatusDetails(); d != nil {
		t.Errorf("StatusDetails = %v, want nil", d)
	}
	reg := prometheus.NewPedanticRegistry()
	reg.MustRegister(src.Collector("p"))
	families, _ := reg.Gather()
	for _, f := range families {
		if strings.Contains(f.GetName(), "oplog") || strings.Contains(f.GetName(), "headroom") {
			t.Errorf("exported %s without an oplog window", f.GetName())
		}
	}
}

// A many-collection checkpoint set to a cluster time keeps its catalog
// epoch, and resumes exactly after that time.
func TestMultiClusterTime(t *testing.T) {
	e := newMultiEnv(t, "shop.a", "shop.b")
	cfg := e.config(t, "shop", "*")
	src := openSource(t, cfg, nil)
	if _, err := pollUntil(t, src, func(evs []cdc.Event) bool { return len(evs) > 0 }); err != nil {
		t.Fatal(err)
	}
	insert(t, e.coll("shop.a"), 1)
	insert(t, e.coll("shop.b"), 2)
	insert(t, e.coll("shop.a"), 3)
	evs, err := pollUntil(t, src, countOps(3))
	if err != nil {
		t.Fatal(err)
	}
	evs = nonMarkers(evs)
	cp := checkpointOf(evs[len(evs)-1].Pos, src.Identity())
	src.Close()
	if cp.Source, err = ClusterTimePosition(cp.Source, evs[0].ClusterTime); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(cp.Source), `"catalog":`) {
		t.Fatalf("position %s lost its catalog epoch", cp.Source)
	}
	if ts, ok := positionTime(cp.Source); !ok || ts != evs[0].ClusterTime {
		t.Errorf("positionTime = %v, %v; want %v", ts, ok, evs[0].ClusterTime)
	}
	src = openSource(t, cfg, &cp)
	got, err := pollUntil(t, src, countOps(2))
	if err != nil {
		t.Fatal(err)
	}
	got = nonMarkers(got)
	if len(got) != 2 || got[0].Namespace != "shop.b" || docID(t, got[0]) != 2 || docID(t, got[1]) != 3 {
		t.Errorf("resumed with %v, want the inserts of 2 (shop.b) and 3", ops(got))
	}
}
