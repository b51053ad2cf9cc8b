package store

import (
	"cmp"
	"fmt"
	"slices"
	"time"
	"unsafe"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/tide-cdc/tide/mongowire/internal/mongoerr"
	"github.com/tide-cdc/tide/mongowire/internal/mql"
)

// Snapshot reads (readConcern level "snapshot", with or without
// atClusterTime) read a collection as it was at a cluster time. The store
// keeps, in memory, the version each write replaced: for every document
// write the record id and the document before it (nil for an insert), and
// for every DDL write the namespaces it changed. Reading at ts takes the
// current documents and undoes, newest first, every write after ts. The
// history covers SnapshotHistory (300 s by default, mongod's
// minSnapshotHistoryWindowInSeconds) and at most snapshotHistoryBytes of
// replaced documents and bookkeeping (so a burst of writes shortens it); a read older than what is kept, or older than the
// store's opening (the journal keeps no pre-images), fails with
// SnapshotTooOld, and a read across a DDL change of its collection with
// SnapshotUnavailable, as mongod's do. The versions are shared slices of
// documents that are never modified, so keeping them copies nothing.

const (
	snapshotHistoryWindow = 300 * time.Second
	snapshotHistoryBytes  = 64 << 20
)

// version is one write as the snapshot history keeps it: 48 bytes.
type version struct {
	ts   bson.Timestamp
	wall int64       // Unix nanoseconds
	c    *collection // a document write: its collection; nil for DDL
	rid  uint64      // a document write: its record
	pre  bson.Raw    // the document before the write; nil for an insert
	ddl  *ddlMark    // a DDL write: the namespaces it changed
}

type ddlMark struct{ ns, to Namespace }

// history is the snapshot history; it is guarded by Store.mu.
type history struct {
	versions []version // versions[head:] are kept, in cluster-time order
	head     int
	bytes    int            // replaced documents plus versionSize per version
	floor    bson.Timestamp // reads at or after floor are complete
}

// versionSize is what a version costs beyond its document.
const versionSize = int(unsafe.Sizeof(version{}))

// keptVersion is a version waiting for its write to commit: the history
// holds only committed writes, at the cluster time they committed at (a
// transaction's statements get theirs at commit), so that a snapshot read
// never sees a write that was taken back or not yet visible.
type keptVersion struct {
	entry int // index of its oplog entry in the write's entries
	c     *collection
	rid   uint64
	pre   bson.Raw
}

// keep records that the write just emitted on t replaced pre (nil: the
// record did not exist) in record rid of c.
func (t *tx) keep(c *collection, rid uint64, pre bson.Raw) {
	t.kept = append(t.kept, keptVersion{entry: len(t.entries) - 1, c: c, rid: rid, pre: pre})
}

// keepWrite adds a committed write's versions and DDL marks, in entry
// order, to the history.
func (h *history) keepWrite(entries []OplogEntry, kept []keptVersion) {
	k := 0
	for i := range entries {
		e := &entries[i]
		for ; k < len(kept) && kept[k].entry == i; k++ {
			v := kept[k]
			h.add(version{ts: e.TS, wall: e.Wall.UnixNano(), c: v.c, rid: v.rid, pre: v.pre})
		}
		if e.DocKey == nil {
			h.keepDDL(e)
		}
	}
}

// keepDDL records a DDL entry: a read across it is refused.
func (h *history) keepDDL(e *OplogEntry) {
	m := &ddlMark{ns: e.NS}
	if e.Op == "rename" {
		for _, x := range e.Extra {
			if s, ok := x.Value.(string); ok && x.Key == "to" {
				if db, coll, ok := cutNS(s); ok {
					m.to = Namespace{DB: db, Coll: coll}
				}
			}
		}
	}
	h.add(version{ts: e.TS, wall: e.Wall.UnixNano(), ddl: m})
	// A dropped collection's versions can no longer be read (a read
	// before the drop is refused by its mark, one after it finds another
	// collection), and they would keep the whole collection alive.
	switch e.Op {
	case "drop":
		h.release(e.UUID)
	case "rename":
		for _, x := range e.Extra {
			if b, ok := x.Value.(bson.Binary); ok && x.Key == "dropTarget" {
				h.release(b)
			}
		}
	}
}

// release forgets the document versions of the collection with uuid.
func (h *history) release(uuid bson.Binary) {
	if len(uuid.Data) == 0 {
		return
	}
	kept := h.versions[h.head:]
	n := 0
	for _, v := range kept {
		if v.c != nil && string(v.c.info.UUID.Data) == string(uuid.Data) {
			h.bytes -= len(v.pre) + versionSize
			continue
		}
		n++
	}
	if n == len(kept) {
		return
	}
	// A fresh array, so that the dropped collection's share is freed.
	out := make([]version, 0, n)
	for _, v := range kept {
		if v.c == nil || string(v.c.info.UUID.Data) != string(uuid.Data) {
			out = append(out, v)
		}
	}
	h.versions, h.head = out, 0
}

func cutNS(s string) (string, string, bool) {
	for i := range len(s) {
		if s[i] == '.' {
			return s[:i], s[i+1:], true
		}
	}
	return "", "", false
}

func (h *history) add(v version) {
	h.versions = append(h.versions, v)
	h.bytes += len(v.pre) + versionSize
	// Forget what is past the window or the byte bound.
	for h.head < len(h.versions) && (h.bytes > snapshotHistoryBytes || v.wall-h.versions[h.head].wall > int64(snapshotHistoryWindow)) {
		old := &h.versions[h.head]
		h.bytes -= len(old.pre) + versionSize
		h.floor = old.ts
		*old = version{} // let the document go
		h.head++
	}
	if h.head > 1024 && h.head > len(h.versions)/2 { // reclaim the front
		n := copy(h.versions, h.versions[h.head:])
		clear(h.versions[n:])
		h.versions, h.head = h.versions[:n], 0
	}
}

// kept returns the versions kept, oldest first.
func (h *history) kept() []version { return h.versions[h.head:] }

// affects reports whether a DDL version changes ns.
func (v *version) affects(ns Namespace) bool {
	hit := func(n Namespace) bool { return n.DB == ns.DB && (n.Coll == "" || n.Coll == ns.Coll) }
	return v.ddl != nil && (hit(v.ddl.ns) || v.ddl.to != Namespace{} && hit(v.ddl.to))
}

// SnapshotFloor returns the oldest cluster time a snapshot read may ask for.
func (s *Store) SnapshotFloor() bson.Timestamp {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return s.hist.floor
}

// readAt returns the documents of ns as they were at ts, in natural order.
func (s *Store) readAt(ns Namespace, ts bson.Timestamp) ([]bson.Raw, error) {
	var out []bson.Raw
	err := s.read(func() error {
		if tsLess(ts, s.hist.floor) {
			return mongoerr.New(mongoerr.SnapshotTooOld, "Read timestamp %s is older than the oldest available timestamp.", tsString(ts))
		}
		undo := map[uint64]bson.Raw{}
		c := s.collLocked(ns)
		// Open transactions wrote in place: take their writes back first
		// (the oldest undo record of a record wins), then the committed
		// writes after ts.
		for x := range s.txns.open {
			for i := len(x.undo) - 1; i >= 0; i-- {
				switch u := &x.undo[i]; {
				case u.c != c || c == nil:
				case u.created:
					c = nil // created by the transaction: not there yet
				default:
					undo[u.rid] = u.pre
				}
			}
		}
		vs := s.hist.kept()
		for i := len(vs) - 1; i >= 0 && tsLess(ts, vs[i].ts); i-- {
			v := &vs[i]
			switch {
			case v.affects(ns):
				return mongoerr.New(mongoerr.SnapshotUnavailable,
					"Unable to read from a snapshot due to pending collection catalog changes; please retry the operation. Snapshot timestamp is %s. Collection minimum is %s.",
					tsString(ts), tsString(v.ts))
			case c != nil && v.c == c:
				undo[v.rid] = v.pre // the oldest write after ts comes last and wins
			}
		}
		type ridDoc struct {
			rid uint64
			doc bson.Raw
		}
		var all []ridDoc
		if c != nil {
			all = make([]ridDoc, 0, c.live)
			for _, r := range c.recs {
				doc := r.doc
				if pre, ok := undo[r.rid]; ok {
					doc = pre
					delete(undo, r.rid)
				}
				if doc != nil {
					all = append(all, ridDoc{r.rid, doc})
				}
			}
		}
		sorted := true
		for rid, pre := range undo { // deleted since ts, and gone from recs
			if pre != nil {
				all = append(all, ridDoc{rid, pre})
				sorted = false
			}
		}
		if !sorted {
			slices.SortFunc(all, func(a, b ridDoc) int { return cmp.Compare(a.rid, b.rid) })
		}
		out = make([]bson.Raw, len(all))
		for i, rd := range all {
			out[i] = rd.doc
		}
		return nil
	})
	return out, err
}

func tsString(ts bson.Timestamp) string { return fmt.Sprintf("Timestamp(%d, %d)", ts.T, ts.I) }

// FindAt runs a query against the documents of ns as they were at ts.
func (s *Store) FindAt(ns Namespace, spec FindSpec, ts bson.Timestamp) ([]bson.Raw, error) {
	coll, err := s.collationFor(ns, spec.Collation)
	if err != nil {
		return nil, err
	}
	f, err := compileQuery(spec.Filter, coll)
	if err != nil {
		return nil, err
	}
	var sorter *mql.Sort
	if len(spec.Sort) > 0 {
		if sorter, err = mql.CompileSortCollated(spec.Sort, coll); err != nil {
			return nil, err
		}
	}
	var proj *mql.Projection
	if len(spec.Projection) > 0 {
		if proj, err = mql.CompileProjection(spec.Projection); err != nil {
			return nil, err
		}
	}
	all, err := s.readAt(ns, ts)
	if err != nil {
		return nil, err
	}
	docs := all[:0:0]
	for _, d := range all {
		if f.Match(d) {
			docs = append(docs, d)
		}
	}
	if sorter != nil {
		sorter.SortDocs(docs)
	}
	limit := spec.Limit
	if limit < 0 {
		limit = -limit
	}
	docs = window(docs, max(spec.Skip, 0), limit)
	if proj != nil {
		for i, d := range docs {
			_, pos := f.MatchPositional(d)
			if docs[i], err = proj.Apply(d, pos); err != nil {
				return nil, err
			}
		}
	}
	return docs, nil
}

// AggregateAt runs a pipeline over the documents of ns as they were at
// ts, within lim; $lookup and the other stages that read collections read
// them at ts too.
func (s *Store) AggregateAt(ns Namespace, stages []bson.Raw, ts bson.Timestamp, lim mql.Limits) ([]bson.Raw, error) {
	return s.AggregateAtWith(ns, stages, ts, lim, bson.RawValue{})
}

// AggregateAtWith is AggregateAt under the given collation (absent: the
// collection's default).
func (s *Store) AggregateAtWith(ns Namespace, stages []bson.Raw, ts bson.Timestamp, lim mql.Limits, collation bson.RawValue) ([]bson.Raw, error) {
	coll, err := s.collationFor(ns, collation)
	if err != nil {
		return nil, err
	}
	p, err := mql.CompilePipelineCollated(stages, coll)
	if err != nil {
		return nil, err
	}
	var input []bson.Raw
	if ns.Coll != "" {
		if input, err = s.readAt(ns, ts); err != nil {
			return nil, err
		}
	}
	return p.RunLimited(envAt{s: s, db: ns.DB, ts: ts}, input, lim)
}

// DistinctAt is Distinct over the documents of ns as they were at ts.
func (s *Store) DistinctAt(ns Namespace, key string, filter bson.Raw, ts bson.Timestamp) ([]bson.RawValue, error) {
	return s.DistinctAtWith(ns, key, FindSpec{Filter: filter}, ts)
}

// DistinctAtWith is DistinctAt of spec's Filter under spec's Collation.
func (s *Store) DistinctAtWith(ns Namespace, key string, spec FindSpec, ts bson.Timestamp) ([]bson.RawValue, error) {
	filter := spec.Filter
	coll, err := s.collationFor(ns, spec.Collation)
	if err != nil {
		return nil, err
	}
	f, err := compileQuery(filter, coll)
	if err != nil {
		return nil, err
	}
	all, err := s.readAt(ns, ts)
	if err != nil {
		return nil, err
	}
	docs := all[:0:0]
	for _, d := range all {
		if f.Match(d) {
			docs = append(docs, d)
		}
	}
	return distinctOf(docs, key, coll), nil
}

// envAt gives a pipeline the other collections of a database at ts.
type envAt struct {
	s  *Store
	db string
	ts bson.Timestamp
}

func (e envAt) Collection(name string) ([]bson.Raw, error) {
	return e.s.readAt(Namespace{DB: e.db, Coll: name}, e.ts)
}
