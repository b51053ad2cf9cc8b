package mongo

import (
	"context"
	"fmt"
	"math/rand/v2"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/tide-cdc/tide/cdc"
)

// mirror applies events to a map, as a mirror sink does, and checks on
// the way that no snapshot row of a document comes after a newer change
// of it: each document carries a version v that only grows, and a
// deleted document never comes back.
type mirror struct {
	t       testing.TB
	docs    map[string]bson.Raw // namespace + canonical _id -> document
	v       map[string]int64    // the highest version handed out
	deleted map[string]bool
	snaps   int                 // snapshot rows applied
	hist    map[string][]string // the last events of each key, to explain a failed check
	lookup  bool                // the source looks updates' documents up (full_document: update_lookup)
}

// newMirror is a mirror of what src hands out.
func newMirror(t testing.TB, src *Source) *mirror {
	return &mirror{t: t, docs: map[string]bson.Raw{}, v: map[string]int64{}, deleted: map[string]bool{}, hist: map[string][]string{},
		lookup: src.cfg.FullDocument == "update_lookup"}
}

func mkey(ns string, key []byte) string {
	id := bson.Raw(key).Lookup("_id")
	return ns + " " + id.String()
}

func (m *mirror) apply(evs []cdc.Event) {
	m.t.Helper()
	for _, ev := range evs {
		switch ev.Op {
		case cdc.OpUpdate:
			if ev.FullDocument != nil {
				m.put(ev)
				continue
			}
			if m.lookup || ev.UpdateDesc == nil {
				// The lookup found the document deleted since: its delete
				// follows. Its delta is no version to check: a lookup reads
				// the document as it is when the stream reads the change,
				// so an earlier change of it may have carried a later
				// version (TestLookupOfDeletedDocument).
				continue
			}
			// delta: the writer's updates set v only
			k := mkey(ev.Namespace, ev.DocumentKey)
			v, ok := bson.Raw(ev.UpdateDesc).Lookup("updatedFields", "v").AsInt64OK()
			if !ok {
				m.t.Fatalf("update of %s without updatedFields.v: %v", k, bson.Raw(ev.UpdateDesc))
			}
			m.check(ev, k, v)
			if d, ok := m.docs[k]; ok {
				var doc bson.D
				if err := bson.Unmarshal(d, &doc); err != nil {
					m.t.Fatal(err)
				}
				for i := range doc {
					if doc[i].Key == "v" {
						doc[i].Value = int32(v)
					}
				}
				m.docs[k], _ = bson.Marshal(doc)
			}
		case cdc.OpSnapshot, cdc.OpInsert, cdc.OpReplace:
			m.put(ev)
		case cdc.OpDelete:
			k := mkey(ev.Namespace, ev.DocumentKey)
			delete(m.docs, k)
			m.deleted[k] = true
		}
	}
}

// check fails when a version of k comes after a newer one, or after its delete.
func (m *mirror) check(ev cdc.Event, k string, v int64) {
	m.t.Helper()
	h := append(m.hist[k], fmt.Sprintf("%s v%d at %d.%d pos %s", ev.Op, v, ev.ClusterTime.T, ev.ClusterTime.I, ev.Pos))
	if len(h) > 8 {
		h = h[1:]
	}
	m.hist[k] = h
	if m.deleted[k] {
		m.t.Fatalf("%s of %s after its delete; its last events:\n%s", ev.Op, k, strings.Join(h, "\n"))
	}
	if old, ok := m.v[k]; ok && v < old {
		m.t.Fatalf("%s of %s with version %d after version %d: a row older than a change already handed out; its last events:\n%s", ev.Op, k, v, old, strings.Join(h, "\n"))
	}
	m.v[k] = v
}

func (m *mirror) put(ev cdc.Event) {
	m.t.Helper()
	k := mkey(ev.Namespace, ev.DocumentKey)
	v, _ := bson.Raw(ev.FullDocument).Lookup("v").AsInt64OK()
	m.check(ev, k, v)
	m.docs[k] = ev.FullDocument
	if ev.Op == cdc.OpSnapshot {
		m.snaps++
	}
}

// equal compares the mirror with the collections.
func (m *mirror) equal(e *multiEnv, nss ...string) {
	m.t.Helper()
	want := map[string]bson.Raw{}
	for _, ns := range nss {
		cur, err := e.coll(ns).Find(context.Background(), bson.D{})
		if err != nil {
			m.t.Fatal(err)
		}
		for cur.Next(context.Background()) {
			d := bson.Raw(append([]byte(nil), cur.Current...))
			want[mkey(ns, bsonKey(d))] = d
		}
		cur.Close(context.Background())
	}
	bad := 0
	for k, d := range want {
		got, ok := m.docs[k]
		if !ok || !bytesEqual(got, d) {
			if bad++; bad < 5 {
				m.t.Errorf("%s: mirror has %v, source %v", k, got, d)
			}
		}
	}
	for k := range m.docs {
		if _, ok := want[k]; !ok {
			if bad++; bad < 5 {
				m.t.Errorf("%s: in the mirror, not in the source", k)
			}
		}
	}
	if bad > 0 {
		m.t.Fatalf("%d differences (mirror %d documents, source %d)", bad, len(m.docs), len(want))
	}
}

func bsonKey(d bson.Raw) []byte {
	id := d.Lookup("_id")
	k, _ := bson.Marshal(bson.D{{Key: "_id", Value: id}})
	return k
}

func bytesEqual(a, b []byte) bool { return string(a) == string(b) }

// writer changes documents of the collections until stopped: updates
// (v+1), deletes and inserts over the keys being copied.
type writer struct {
	stop chan struct{}
	done chan error
}

// hot, if not nil, names keys about to be copied: half the writes go there.
func startWriter(t testing.TB, e *multiEnv, n int, hot func() (string, int, bool), nss ...string) *writer {
	w := &writer{stop: make(chan struct{}), done: make(chan error, 1)}
	go func() { // owned by the test: stopWriter stops it and waits
		rng := rand.New(rand.NewPCG(1, 2))
		next := 1_000_000
		for i := 0; ; i++ {
			select {
			case <-w.stop:
				w.done <- nil
				return
			default:
			}
			coll := e.coll(nss[rng.IntN(len(nss))])
			id := rng.IntN(n)
			if hot != nil && rng.IntN(2) == 0 {
				if ns, lo, ok := hot(); ok {
					// Two updates in a row: a window that holds both
					// shows a row handed out before them as a regression.
					coll, id = e.coll(ns), lo+1+rng.IntN(100)
					if _, err := coll.UpdateOne(context.Background(), bson.D{{Key: "_id", Value: id}}, bson.D{{Key: "$inc", Value: bson.D{{Key: "v", Value: 1}}}}); err != nil {
						w.done <- err
						return
					}
				}
			}
			var err error
			switch r := rng.IntN(10); {
			case r < 7:
				_, err = coll.UpdateOne(context.Background(), bson.D{{Key: "_id", Value: id}}, bson.D{{Key: "$inc", Value: bson.D{{Key: "v", Value: 1}}}})
			case r < 8:
				_, err = coll.DeleteOne(context.Background(), bson.D{{Key: "_id", Value: id}})
			default:
				next++
				_, err = coll.InsertOne(context.Background(), bson.D{{Key: "_id", Value: next}, {Key: "v", Value: 0}, {Key: "pad", Value: strings.Repeat("x", 50)}})
			}
			if err != nil {
				w.done <- err
				return
			}
			if i%20 == 0 {
				time.Sleep(time.Millisecond)
			}
		}
	}()
	return w
}

func (w *writer) halt(t testing.TB) {
	t.Helper()
	close(w.stop)
	if err := <-w.done; err != nil {
		t.Fatalf("writer: %v", err)
	}
}

func fill(t testing.TB, e *multiEnv, ns string, n int) {
	t.Helper()
	docs := make([]any, 0, 1000)
	for i := 0; i < n; i++ {
		docs = append(docs, bson.D{{Key: "_id", Value: i}, {Key: "v", Value: 0}, {Key: "status", Value: []string{"open", "closed"}[i%2]}, {Key: "pad", Value: strings.Repeat("x", 50)}})
		if len(docs) == cap(docs) || i == n-1 {
			if _, err := e.coll(ns).InsertMany(context.Background(), docs); err != nil {
				t.Fatal(err)
			}
			docs = docs[:0]
		}
	}
}

// hotKeys returns the last _id copied of a collection being copied.
func hotKeys(src *Source) func() (string, int, bool) {
	return func() (string, int, bool) {
		m := &src.isnap
		m.mu.Lock()
		defer m.mu.Unlock()
		for _, r := range m.runs {
			for _, t := range r.active {
				if n, ok := t.last.AsInt64OK(); ok {
					return t.ns, int(n), true
				}
			}
		}
		return "", 0, false
	}
}

// isnapInfo returns snapshot id as src lists it.
func isnapInfo(src *Source, id string) cdc.SnapshotInfo {
	for _, in := range src.Snapshots() {
		if in.ID == id {
			return in
		}
	}
	return cdc.SnapshotInfo{}
}

// drainUntil polls src into m until cond, which sees each batch, holds.
func drainUntil(t testing.TB, src *Source, m *mirror, cond func([]cdc.Event) bool) []cdc.Event {
	t.Helper()
	var all []cdc.Event
	deadline := time.Now().Add(60 * time.Second)
	for {
		evs, err := src.Poll(t.Context(), nil, 1000)
		if err != nil {
			t.Fatalf("poll: %v", err)
		}
		m.apply(evs)
		all = append(all, evs...)
		if cond(evs) {
			return all
		}
		if len(evs) == 0 {
			select {
			case <-src.Ready():
			case <-time.After(100 * time.Millisecond):
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("not reached within 60s; snapshots %+v", src.Snapshots())
		}
	}
}

// drainIdle polls src into m until nothing comes for 200 ms: a snapshot
// is listed as done once its last row is queued, maybe before it is polled.
func drainIdle(t testing.TB, src *Source, m *mirror) []cdc.Event {
	t.Helper()
	quiet := time.Now()
	return drainUntil(t, src, m, func(evs []cdc.Event) bool {
		if len(nonMarkers(evs)) > 0 {
			quiet = time.Now()
		}
		return time.Since(quiet) > 200*time.Millisecond
	})
}

func stateIs(src *Source, id, state string) func([]cdc.Event) bool {
	return func([]cdc.Event) bool { return isnapInfo(src, id).State == state }
}

// catchUp inserts a sentinel and polls until it arrives.
func catchUp(t testing.TB, e *multiEnv, src *Source, m *mirror, ns string) {
	t.Helper()
	id := fmt.Sprintf("sentinel-%d", time.Now().UnixNano())
	if _, err := e.coll(ns).InsertOne(context.Background(), bson.D{{Key: "_id", Value: id}, {Key: "v", Value: 0}}); err != nil {
		t.Fatal(err)
	}
	drainUntil(t, src, m, func(evs []cdc.Event) bool {
		for _, ev := range evs {
			if got, _ := bson.Raw(ev.DocumentKey).Lookup("_id").StringValueOK(); ev.Op == cdc.OpInsert && got == id {
				return true
			}
		}
		return false
	})
}

func TestIncrementalSnapshotWhileWriting(t *testing.T) {
	pause := func() { time.Sleep(3 * time.Millisecond) }
	testChunkRead.Store(&pause)
	t.Cleanup(func() { testChunkRead.Store(nil) })
	for _, mode := range []string{"delta", "update_lookup"} {
		t.Run(mode, func(t *testing.T) { testIncrementalWhileWriting(t, mode) })
	}
}

func testIncrementalWhileWriting(t *testing.T, mode string) {
	e := newMultiEnv(t, "shop.a", "shop.b", "shop.c")
	fill(t, e, "shop.a", 6000)
	fill(t, e, "shop.b", 3000)
	cfg := e.config(t, "shop", "*")
	cfg.FullDocument = mode
	src := openSource(t, cfg, nil)
	m := newMirror(t, src)
	// In delta mode too, every document ends whole: one dropped for an
	// update in its window is read again with a later chunk.
	w := startWriter(t, e, 6000, hotKeys(src), "shop.a", "shop.b")
	defer func() {
		select {
		case <-w.stop:
		default:
			w.halt(t)
		}
	}()
	id, err := src.RequestSnapshot(t.Context(), cdc.SnapshotRequest{Collections: []string{"shop.b", "shop.a"}, Chunk: 100})
	if err != nil {
		t.Fatal(err)
	}
	// A second request for a collection being copied is refused.
	_, err = src.RequestSnapshot(t.Context(), cdc.SnapshotRequest{Collections: []string{"shop.a"}})
	wantErr(t, err, cdc.ErrSnapshotConflict, "shop.a", "snapshot "+id)

	drainUntil(t, src, m, stateIs(src, id, cdc.SnapshotDone))
	w.halt(t)
	catchUp(t, e, src, m, "shop.b")
	m.equal(e, "shop.a", "shop.b")
	in := isnapInfo(src, id)
	if in.DoneDocuments == 0 || m.snaps != int(in.DoneDocuments) {
		t.Errorf("done_documents %d, snapshot rows %d", in.DoneDocuments, m.snaps)
	}
	if src.isnap.dropped.Load() == 0 {
		t.Errorf("no chunk document was dropped for a change in its window: the writer did not overlap the copy")
	}
	t.Logf("snapshot rows %d, dropped %d; info %+v", m.snaps, src.isnap.dropped.Load(), in)
}

// TestIncrementalSnapshotResumes stops the source five times during a
// snapshot, each time restoring the checkpoint of an event polled before
// (what the sink had committed), and requires the mirror to end equal to
// the source with no row older than a change before it.
func TestIncrementalSnapshotResumes(t *testing.T) {
	pause := func() { time.Sleep(time.Millisecond) }
	testChunkRead.Store(&pause)
	t.Cleanup(func() { testChunkRead.Store(nil) })
	e := newMultiEnv(t, "shop.a", "shop.b")
	fill(t, e, "shop.a", 5000)
	fill(t, e, "shop.b", 5000)
	cfg := e.config(t, "shop", "*")
	cfg.FullDocument = "update_lookup"
	cfg.SnapshotParallelism = 1
	src := New(cfg)
	if err := src.Open(t.Context(), nil); err != nil {
		t.Fatal(err)
	}
	defer func() { src.Close() }()
	var hotSrc atomic.Pointer[Source]
	hotSrc.Store(src)
	w := startWriter(t, e, 5000, func() (string, int, bool) { return hotKeys(hotSrc.Load())() }, "shop.a", "shop.b")
	defer func() {
		select {
		case <-w.stop:
		default:
			w.halt(t)
		}
	}()
	id, err := src.RequestSnapshot(t.Context(), cdc.SnapshotRequest{Collections: []string{"shop.a", "shop.b"}, Chunk: 200})
	if err != nil {
		t.Fatal(err)
	}
	m := newMirror(t, src)
	rng := rand.New(rand.NewPCG(3, 4))
	var cp cdc.Checkpoint
	for crash := 0; crash < 5; crash++ {
		var evs []cdc.Event
		for len(evs) < 1500 && isnapInfo(src, id).State != cdc.SnapshotDone {
			got, err := src.Poll(t.Context(), nil, 500)
			if err != nil {
				t.Fatal(err)
			}
			evs = append(evs, got...)
			if len(got) == 0 {
				select {
				case <-src.Ready():
				case <-time.After(100 * time.Millisecond):
				}
			}
		}
		if len(evs) == 0 {
			t.Fatalf("crash %d: nothing polled; snapshots %+v", crash, src.Snapshots())
		}
		// The sink committed up to event k; the identity is the source's
		// as of the commit, which Poll may have run ahead of.
		k := rng.IntN(len(evs))
		m.apply(evs[:k+1])
		cp = cdc.Checkpoint{Source: evs[k].Pos, Meta: src.Identity()}
		if err := src.Ack(t.Context(), evs[k].Pos); err != nil {
			t.Fatal(err)
		}
		if err := src.Close(); err != nil {
			t.Fatal(err)
		}
		src = New(cfg)
		if err := src.Open(t.Context(), &cp); err != nil {
			t.Fatalf("crash %d: open from %s: %v", crash, cp.Source, err)
		}
		hotSrc.Store(src)
		t.Logf("crash %d after %d of %d events: %+v", crash, k+1, len(evs), isnapInfo(src, id))
	}
	drainUntil(t, src, m, stateIs(src, id, cdc.SnapshotDone))
	w.halt(t)
	catchUp(t, e, src, m, "shop.b")
	m.equal(e, "shop.a", "shop.b")
	// Listed as done after a restart too.
	cp = cdc.Checkpoint{Source: nil, Meta: src.Identity()}
	ids := src.Snapshots()
	if len(ids) != 1 || ids[0].State != cdc.SnapshotDone {
		t.Fatalf("snapshots %+v, want one done", ids)
	}
}

func TestIncrementalSnapshotFilter(t *testing.T) {
	e := newMultiEnv(t, "shop.a")
	fill(t, e, "shop.a", 1000)
	src := openSource(t, e.config(t, "shop", "*"), nil)
	id, err := src.RequestSnapshot(t.Context(), cdc.SnapshotRequest{Collections: []string{"shop.a"}, Filter: []byte(`{"status": "open", "_id": {"$gte": 100}}`), Chunk: 64})
	if err != nil {
		t.Fatal(err)
	}
	m := newMirror(t, src)
	evs := drainUntil(t, src, m, stateIs(src, id, cdc.SnapshotDone))
	evs = append(evs, drainIdle(t, src, m)...)
	seen := map[int]bool{}
	for _, ev := range evs {
		if ev.Op != cdc.OpSnapshot {
			continue
		}
		n := docID(t, ev)
		if seen[n] {
			t.Errorf("document %d copied twice", n)
		}
		seen[n] = true
		if n < 100 || n%2 != 0 {
			t.Errorf("document %d does not match the filter", n)
		}
	}
	if len(seen) != 450 {
		t.Errorf("copied %d documents, want the 450 that match", len(seen))
	}
	in := isnapInfo(src, id)
	if in.DoneDocuments != 450 || in.Filter == "" {
		t.Errorf("info %+v", in)
	}
}

func TestIncrementalSnapshotRefused(t *testing.T) {
	e := newMultiEnv(t, "shop.a", "other.x")
	src := openSource(t, e.config(t, "shop", "*"), nil)
	cases := map[string]struct {
		req    cdc.SnapshotRequest
		target error
		words  []string
	}{
		"no collections":  {cdc.SnapshotRequest{}, cdc.ErrSnapshotRequest, []string{"at least one"}},
		"no database":     {cdc.SnapshotRequest{Collections: []string{"a"}}, cdc.ErrSnapshotRequest, []string{`"db.coll"`}},
		"not captured":    {cdc.SnapshotRequest{Collections: []string{"other.x"}}, cdc.ErrSnapshotRequest, []string{"other.x", "not captured"}},
		"missing":         {cdc.SnapshotRequest{Collections: []string{"shop.nope"}}, cdc.ErrSnapshotRequest, []string{"shop.nope", "does not exist"}},
		"filter not JSON": {cdc.SnapshotRequest{Collections: []string{"shop.a"}, Filter: []byte(`{"status":`)}, cdc.ErrSnapshotRequest, []string{"filter", "Extended JSON"}},
		"filter array":    {cdc.SnapshotRequest{Collections: []string{"shop.a"}, Filter: []byte(`[1]`)}, cdc.ErrSnapshotRequest, []string{"filter", "object"}},
		"filter operator": {cdc.SnapshotRequest{Collections: []string{"shop.a"}, Filter: []byte(`{"status": {"$bogus": 1}}`)}, cdc.ErrSnapshotRequest, []string{"filter", "refused by the server", "$bogus"}},
		"chunk negative":  {cdc.SnapshotRequest{Collections: []string{"shop.a"}, Chunk: -1}, cdc.ErrSnapshotRequest, []string{"chunk -1"}},
		"chunk too big":   {cdc.SnapshotRequest{Collections: []string{"shop.a"}, Chunk: 1 << 30}, cdc.ErrSnapshotRequest, []string{"chunk"}},
	}
	for name, c := range cases {
		t.Run(name, func(t *testing.T) {
			_, err := src.RequestSnapshot(t.Context(), c.req)
			wantErr(t, err, c.target, c.words...)
		})
	}
	if got := src.Snapshots(); len(got) != 0 {
		t.Errorf("refused requests left snapshots: %+v", got)
	}
	// Single collection: only that one.
	e2 := newEnv(t)
	one := openSource(t, e2.config(t), nil)
	_, err := one.RequestSnapshot(t.Context(), cdc.SnapshotRequest{Collections: []string{"shop.other"}})
	wantErr(t, err, cdc.ErrSnapshotRequest, "not captured")
	wantErr(t, one.CancelSnapshot("7"), cdc.ErrSnapshotNotFound)
}

func TestIncrementalSnapshotCancel(t *testing.T) {
	pause := func() { time.Sleep(2 * time.Millisecond) }
	testChunkRead.Store(&pause)
	t.Cleanup(func() { testChunkRead.Store(nil) })
	e := newMultiEnv(t, "shop.a")
	fill(t, e, "shop.a", 3000)
	src := openSource(t, e.config(t, "shop", "*"), nil)
	id, err := src.RequestSnapshot(t.Context(), cdc.SnapshotRequest{Collections: []string{"shop.a"}, Chunk: 10})
	if err != nil {
		t.Fatal(err)
	}
	m := newMirror(t, src)
	drainUntil(t, src, m, func([]cdc.Event) bool { return m.snaps >= 100 })
	// While it runs: its metrics and its status details.
	reg := prometheus.NewPedanticRegistry()
	reg.MustRegister(src.Collector("p"))
	families, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	seen := map[string]float64{}
	for _, f := range families {
		for _, mt := range f.GetMetric() {
			key := f.GetName()
			for _, l := range mt.GetLabel() {
				if l.GetName() != "pipeline" {
					key += "," + l.GetName() + "=" + l.GetValue()
				}
			}
			seen[key] = mt.GetGauge().GetValue() + mt.GetCounter().GetValue()
		}
	}
	for _, k := range []string{
		"tide_mongo_incremental_snapshot_documents,snapshot=" + id + ",state=done",
		"tide_mongo_incremental_snapshot_documents,snapshot=" + id + ",state=total",
		"tide_mongo_incremental_snapshot_rows_total",
		"tide_mongo_incremental_snapshots,state=running",
	} {
		if v, ok := seen[k]; !ok || v <= 0 {
			t.Errorf("metric %s = %v (present %v), want > 0", k, v, ok)
		}
	}
	if d := src.StatusDetails(); d == nil || d["incremental_snapshots"] == nil {
		t.Errorf("status details %v: no incremental_snapshots", d)
	}
	if err := src.CancelSnapshot(id); err != nil {
		t.Fatal(err)
	}
	drainUntil(t, src, m, stateIs(src, id, cdc.SnapshotCancelled))
	drainIdle(t, src, m)
	after := m.snaps
	time.Sleep(100 * time.Millisecond)
	drainUntil(t, src, m, func(evs []cdc.Event) bool { return len(evs) == 0 })
	if m.snaps != after || after >= 3000 || after%10 != 0 {
		t.Errorf("rows %d at the cancellation, %d after: want a chunk boundary and nothing after", after, m.snaps)
	}
	in := isnapInfo(src, id)
	if in.Reason == "" || in.DoneDocuments != int64(after) {
		t.Errorf("info %+v", in)
	}
	wantErr(t, src.CancelSnapshot(id), cdc.ErrSnapshotConflict, "already cancelled")
	// The collection may be asked for again.
	if _, err := src.RequestSnapshot(t.Context(), cdc.SnapshotRequest{Collections: []string{"shop.a"}}); err != nil {
		t.Fatal(err)
	}
}

func TestIncrementalSnapshotDropped(t *testing.T) {
	pause := func() { time.Sleep(2 * time.Millisecond) }
	testChunkRead.Store(&pause)
	t.Cleanup(func() { testChunkRead.Store(nil) })
	e := newMultiEnv(t, "shop.a", "shop.b")
	fill(t, e, "shop.a", 3000)
	fill(t, e, "shop.b", 100)
	src := openSource(t, e.config(t, "shop", "*"), nil)
	id, err := src.RequestSnapshot(t.Context(), cdc.SnapshotRequest{Collections: []string{"shop.a", "shop.b"}, Chunk: 10})
	if err != nil {
		t.Fatal(err)
	}
	m := newMirror(t, src)
	drainUntil(t, src, m, func([]cdc.Event) bool { return m.snaps >= 50 })
	if err := e.coll("shop.a").Drop(context.Background()); err != nil {
		t.Fatal(err)
	}
	drainUntil(t, src, m, stateIs(src, id, cdc.SnapshotFailed))
	in := isnapInfo(src, id)
	if !strings.Contains(in.Reason, "shop.a was dropped") {
		t.Errorf("reason %q, want the drop named", in.Reason)
	}
}

func TestIncrementalSnapshotSignal(t *testing.T) {
	e := newMultiEnv(t, "shop.a", "shop.signals")
	fill(t, e, "shop.a", 300)
	cfg := e.config(t, "shop", "*")
	cfg.SignalCollection = "signals"
	src := New(cfg)
	if err := src.Open(t.Context(), nil); err != nil {
		t.Fatal(err)
	}
	defer func() { src.Close() }()
	m := newMirror(t, src)
	// A first event, to restart from below.
	insert := func(coll string, d bson.D) {
		t.Helper()
		if _, err := e.coll(coll).InsertOne(context.Background(), d); err != nil {
			t.Fatal(err)
		}
	}
	insert("shop.a", bson.D{{Key: "_id", Value: 5000}, {Key: "v", Value: 0}, {Key: "status", Value: "open"}})
	first := drainUntil(t, src, m, func(evs []cdc.Event) bool { return len(nonMarkers(evs)) > 0 })
	from := nonMarkers(first)[0].Pos

	insert("shop.signals", bson.D{{Key: "_id", Value: "bad"}, {Key: "type", Value: "snapshot"}, {Key: "collections", Value: bson.A{"nope"}}})
	insert("shop.signals", bson.D{{Key: "_id", Value: "other"}, {Key: "type", Value: "vacuum"}})
	insert("shop.signals", bson.D{{Key: "_id", Value: "s1"}, {Key: "type", Value: "snapshot"}, {Key: "collections", Value: bson.A{"a"}},
		{Key: "filter", Value: bson.D{{Key: "status", Value: "open"}}}, {Key: "chunk", Value: 40}})
	var list []cdc.SnapshotInfo
	evs := drainUntil(t, src, m, func([]cdc.Event) bool {
		list = src.Snapshots()
		return len(list) == 1 && list[0].State == cdc.SnapshotDone
	})
	if list[0].Signal != `"s1"` || list[0].DoneDocuments != 151 || list[0].Chunk != 40 || list[0].Filter == "" {
		t.Errorf("snapshot %+v, want the signal's, 151 open documents", list[0])
	}
	for _, ev := range append(first, evs...) {
		if ev.Namespace == "shop.signals" {
			t.Errorf("a %s event of the signal collection was forwarded", ev.Op)
		}
	}
	// From a checkpoint before the signal: it is seen again, and not taken again.
	cp := cdc.Checkpoint{Source: from, Meta: src.Identity()}
	if err := src.Close(); err != nil {
		t.Fatal(err)
	}
	src = New(cfg)
	if err := src.Open(t.Context(), &cp); err != nil {
		t.Fatal(err)
	}
	insert("shop.a", bson.D{{Key: "_id", Value: 5001}, {Key: "v", Value: 0}})
	m2 := newMirror(t, src)
	drainUntil(t, src, m2, func(evs []cdc.Event) bool {
		for _, ev := range evs {
			if ev.Op == cdc.OpInsert && docID(t, ev) == 5001 {
				return true
			}
		}
		return false
	})
	time.Sleep(300 * time.Millisecond) // the signal watch reads the signals again
	if got := src.Snapshots(); len(got) != 1 || m2.snaps != 0 {
		t.Errorf("after the restart: snapshots %+v, %d snapshot rows; want the one done, none again", got, m2.snaps)
	}
}

// TestIncrementalSnapshotRecorded: a request recorded in a stopped
// pipeline's checkpoint (RecordSnapshot) is carried out by the next Open;
// one for a collection that does not exist fails with that reason.
func TestIncrementalSnapshotRecorded(t *testing.T) {
	e := newMultiEnv(t, "shop.a")
	fill(t, e, "shop.a", 120)
	cfg := e.config(t, "shop", "*")
	src := New(cfg)
	if err := src.Open(t.Context(), nil); err != nil {
		t.Fatal(err)
	}
	evs, err := pollUntil(t, src, func(evs []cdc.Event) bool { return len(evs) > 0 })
	if err != nil {
		t.Fatal(err)
	}
	cp := cdc.Checkpoint{Source: evs[len(evs)-1].Pos, Meta: src.Identity()}
	src.Close()
	if _, err := cfg.RecordSnapshot(&cdc.Checkpoint{}, cdc.SnapshotRequest{Collections: []string{"shop.a"}}, time.Now()); err == nil {
		t.Fatal("recorded without a checkpoint")
	}
	idA, err := cfg.RecordSnapshot(&cp, cdc.SnapshotRequest{Collections: []string{"shop.a"}, Chunk: 50}, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	_, err = cfg.RecordSnapshot(&cp, cdc.SnapshotRequest{Collections: []string{"shop.a"}}, time.Now())
	wantErr(t, err, cdc.ErrSnapshotConflict, "already being copied")
	idGone, err := cfg.RecordSnapshot(&cp, cdc.SnapshotRequest{Collections: []string{"shop.gone"}}, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	src = openSource(t, cfg, &cp)
	if got := src.Snapshots(); len(got) != 2 || got[0].State != cdc.SnapshotRunning || got[0].DoneDocuments != 0 {
		t.Fatalf("after Open: %+v, want two waiting to start", got)
	}
	m := newMirror(t, src)
	drainUntil(t, src, m, func([]cdc.Event) bool {
		return isnapInfo(src, idA).State == cdc.SnapshotDone && isnapInfo(src, idGone).State == cdc.SnapshotFailed
	})
	drainIdle(t, src, m)
	if m.snaps != 120 {
		t.Errorf("%d snapshot rows, want 120", m.snaps)
	}
	if r := isnapInfo(src, idGone).Reason; !strings.Contains(r, "shop.gone does not exist") {
		t.Errorf("reason %q", r)
	}
}
