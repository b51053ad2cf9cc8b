package store

import (
	"errors"
	"slices"
	"sort"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/tide-cdc/tide/mongowire/internal/mongoerr"
	"github.com/tide-cdc/tide/mongowire/internal/mql"
)

// Transactions
//
// A transaction writes in place: its statements run the ordinary write
// code under the write lock, so its own writes are visible to it through
// the ordinary read paths, and each write records an undo record (the
// record id and the document as it was). Its oplog entries are held back.
// Commit journals them with one write(2) and appends them to the oplog,
// all at one cluster time; abort applies the undo records in reverse.
//
// Everyone else must not see the uncommitted writes, and the transaction
// must not see writes committed after it began (snapshot isolation). Both
// are answered by an overlay: the documents whose current version is not
// the one a reader should see, by _id, with the version it should see
// (nil: none). For a reader outside any transaction that is the first
// pre-image of every document an open transaction wrote; for a
// transaction it is also, for every document written by a commit after
// its snapshot, the pre-image of the first such commit, kept in a
// history only while a transaction is open. A read with an overlay scans
// the collection instead of using an index; a read without one (no
// transaction open on that collection: the common case) is unchanged.
//
// Conflicts are found when they happen, as mongod's first writer wins: a
// transaction writing a document another open transaction wrote, or one
// committed after its snapshot, fails with WriteConflict and is aborted.
// A write outside a transaction that meets a document an open transaction
// wrote undoes what it did, waits for that transaction to end and runs
// again, as mongod retries it.

// Txn is an open multi-document transaction. Its methods mirror the
// Store's reads and writes; Commit or Abort ends it.
type Txn struct {
	s       *Store
	snap    bson.Timestamp // the newest commit it sees
	lsid    bson.Raw
	number  int64
	undo    []undoRec
	dirty   map[Namespace]map[string]bson.Raw // the first pre-image of each document written, by _id; nil: none
	entries []OplogEntry
	kept    []keptVersion        // for the snapshot history, by index in entries
	made    map[*collection]bool // the collections it created: nobody else sees them until it commits
	done    chan struct{}        // closed when it ends
	ended   bool
	endErr  error // why it ended, for a statement that comes after: nil once committed
}

// undoRec is how to take back one write: restore pre as the document of
// record rid (nil pre: remove the record the write inserted), or drop
// the collection the write created.
type undoRec struct {
	ns      Namespace
	c       *collection
	rid     uint64
	pre     bson.Raw
	created bool
}

// histRec is one committed write of a document while a transaction was
// open: its cluster time and the document before it (nil: none).
type histRec struct {
	ts  bson.Timestamp
	pre bson.Raw
}

type pendingHist struct {
	ns  Namespace
	id  string
	pre bson.Raw
}

// txnState is the store's record of open transactions, guarded by s.mu.
type txnState struct {
	open    map[*Txn]struct{}
	history map[Namespace]map[string][]histRec // oldest first
}

// blockedError is what a write outside a transaction returns from its
// body on meeting a document an open transaction wrote.
type blockedError struct{ done chan struct{} }

func (*blockedError) Error() string { return "blocked by an open transaction" }

func writeConflict() *mongoerr.Error {
	return mongoerr.New(mongoerr.WriteConflict,
		"Caused by :: Write conflict during plan execution and yielding is disabled. :: Please retry your operation or multi-document transaction.").
		WithLabels(mongoerr.LabelTransient)
}

// idKey identifies a document by the raw bytes of its _id (type and value).
func idKey(doc bson.Raw) string {
	v := idOf(doc)
	return string(append([]byte{byte(v.Type)}, v.Value...))
}

// Begin opens a transaction that sees every write committed so far. lsid
// and number are the session and transaction number its oplog entries
// carry.
func (s *Store) Begin(lsid bson.Raw, number int64) (*Txn, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return nil, errClosed
	}
	x := &Txn{s: s, snap: s.ClusterTime(), lsid: clone(lsid), number: number,
		dirty: make(map[Namespace]map[string]bson.Raw), done: make(chan struct{})}
	if s.txns.open == nil {
		s.txns.open = make(map[*Txn]struct{})
	}
	s.txns.open[x] = struct{}{}
	return x, nil
}

// OpenTransactions counts the transactions in progress.
func (s *Store) OpenTransactions() int {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return len(s.txns.open)
}

// Snapshot returns the cluster time the transaction reads at.
func (x *Txn) Snapshot() bson.Timestamp { return x.snap }

// Done is closed when the transaction has ended.
func (x *Txn) Done() <-chan struct{} { return x.done }

// Err returns why the transaction can no longer be used (aborted by a
// write conflict, by a DDL command on a collection it wrote, or ended),
// or nil while it is open.
func (x *Txn) Err() error {
	x.s.mu.RLock()
	defer x.s.mu.RUnlock()
	return x.usableLocked()
}

func (x *Txn) usableLocked() error {
	if !x.ended {
		return nil
	}
	if x.endErr != nil {
		return x.endErr
	}
	return mongoerr.New(mongoerr.TransactionCommitted, "Transaction %d has been committed.", x.number)
}

// touch records a write of the document doc (its _id) at record rid of c,
// which was pre before it (nil: it did not exist), and reports a conflict.
// It costs one map-length check when no transaction is open.
func (t *tx) touch(ns Namespace, c *collection, rid uint64, doc, pre bson.Raw) error {
	st := &t.s.txns
	if t.txn == nil && len(st.open) == 0 {
		return nil
	}
	t.undo = append(t.undo, undoRec{ns: ns, c: c, rid: rid, pre: pre})
	id := idKey(doc)
	if o := t.s.madeByOtherLocked(t.txn, c); o != nil {
		// A collection another transaction created: it does not exist
		// for this writer until that transaction commits.
		if t.txn != nil {
			return writeConflict()
		}
		return &blockedError{done: o.done}
	}
	if o := t.s.keyFreedByOtherLocked(t.txn, ns, c, doc, pre); o != nil {
		if t.txn != nil {
			return writeConflict()
		}
		return &blockedError{done: o.done}
	}
	if t.txn == nil {
		for o := range st.open {
			if _, ok := o.dirty[ns][id]; ok {
				return &blockedError{done: o.done}
			}
		}
		t.hist = append(t.hist, pendingHist{ns: ns, id: id, pre: pre})
		return nil
	}
	x := t.txn
	for o := range st.open {
		if _, ok := o.dirty[ns][id]; ok && o != x {
			return writeConflict()
		}
	}
	for _, h := range st.history[ns][id] {
		if tsLess(x.snap, h.ts) {
			return writeConflict()
		}
	}
	m := x.dirty[ns]
	if m == nil {
		m = make(map[string]bson.Raw)
		x.dirty[ns] = m
	}
	if _, ok := m[id]; !ok {
		m[id] = pre
	}
	return nil
}

// created records that the write created collection c.
func (t *tx) created(ns Namespace, c *collection) {
	if t.txn != nil || len(t.s.txns.open) > 0 {
		t.undo = append(t.undo, undoRec{ns: ns, c: c, created: true})
	}
	if x := t.txn; x != nil {
		if x.made == nil {
			x.made = make(map[*collection]bool)
		}
		x.made[c] = true
	}
}

// heldByOther looks at a write's duplicate key error werr: when the
// record holding the key is one an open transaction other than t's wrote,
// the key may never commit, so the write conflicts (in a transaction) or
// waits for that transaction (outside one), as in mongod, instead of
// failing. It returns nil when werr stands as it is.
func (t *tx) heldByOther(ns Namespace, c *collection, doc bson.Raw, self uint64, werr *mongoerr.Error) error {
	if werr.Code != mongoerr.DuplicateKey || len(t.s.txns.open) == 0 {
		return nil
	}
	keys, err := c.keysOf(doc, self)
	if err != nil {
		return nil
	}
	for i, ix := range c.indexes {
		if !ix.unique() && !ix.prepared() && i != 0 {
			continue
		}
		for j := range keys[i] {
			p := c.pos(ix.conflict(&keys[i][j], self))
			if p < 0 {
				continue
			}
			id := idKey(c.recs[p].doc)
			for o := range t.s.txns.open {
				if _, ok := o.dirty[ns][id]; ok && o != t.txn {
					if t.txn != nil {
						return writeConflict()
					}
					return &blockedError{done: o.done}
				}
			}
		}
	}
	return nil
}

// keyFreedByOtherLocked returns the open transaction other than rd that
// changed or deleted a document of ns whose committed version holds a
// secondary unique key doc now takes: taking it would let that
// transaction's abort restore a duplicate, so the writer conflicts or
// waits, as in mongod. A delete (doc is pre) takes no key.
func (s *Store) keyFreedByOtherLocked(rd *Txn, ns Namespace, c *collection, doc, pre bson.Raw) *Txn {
	if len(c.indexes) < 2 || (pre != nil && &doc[0] == &pre[0]) {
		return nil
	}
	var mine [][]entry
	for o := range s.txns.open {
		if o == rd {
			continue
		}
		for _, old := range o.dirty[ns] {
			if old == nil {
				continue
			}
			if mine == nil {
				var err error
				if mine, err = c.keysOf(doc, 0); err != nil {
					return nil
				}
			}
			theirs, err := c.keysOf(old, 0)
			if err != nil {
				continue
			}
			for i, ix := range c.indexes[1:] {
				if !ix.unique() && !ix.prepared() {
					continue
				}
				for j := range mine[i+1] {
					for k := range theirs[i+1] {
						if ix.compareKeys(&mine[i+1][j], &theirs[i+1][k]) == 0 {
							return o
						}
					}
				}
			}
		}
	}
	return nil
}

// madeByOtherLocked returns the open transaction other than rd that
// created c, or nil.
func (s *Store) madeByOtherLocked(rd *Txn, c *collection) *Txn {
	for o := range s.txns.open {
		if o != rd && o.made[c] {
			return o
		}
	}
	return nil
}

// recordHistoryLocked keeps the pre-images of a committed write while
// transactions are open, at ts.
func (s *Store) recordHistoryLocked(ts bson.Timestamp, recs []pendingHist) {
	if len(s.txns.open) == 0 {
		return
	}
	if s.txns.history == nil {
		s.txns.history = make(map[Namespace]map[string][]histRec)
	}
	for _, r := range recs {
		m := s.txns.history[r.ns]
		if m == nil {
			m = make(map[string][]histRec)
			s.txns.history[r.ns] = m
		}
		m[r.id] = append(m[r.id], histRec{ts: ts, pre: r.pre})
	}
}

// writeIn runs one statement of transaction x under the write lock. Its
// entries are held back until commit. A failure aborts the transaction,
// as mongod aborts a transaction whose statement fails.
func (s *Store) writeIn(x *Txn, fn func(t *tx) error) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	switch {
	case s.closed:
		return errClosed
	case s.broken != nil:
		return brokenError(s.broken)
	}
	if err := x.usableLocked(); err != nil {
		return err
	}
	t := &tx{s: s, wall: time.Now().Truncate(time.Millisecond), txn: x}
	err := fn(t)
	x.undo = append(x.undo, t.undo...)
	for _, k := range t.kept {
		k.entry += len(x.entries)
		x.kept = append(x.kept, k)
	}
	x.entries = append(x.entries, t.entries...)
	if err != nil {
		s.abortLocked(x, asMongo(err))
	}
	return err
}

// Commit makes the transaction's writes visible at once: its oplog
// entries are journaled with one write and appended to the oplog, all at
// one cluster time, in statement order. Committing again is no error.
// It returns the commit's cluster time (zero for a transaction that
// wrote nothing).
func (x *Txn) Commit() (bson.Timestamp, error) {
	s := x.s
	s.mu.Lock()
	defer s.mu.Unlock()
	if x.ended {
		return bson.Timestamp{}, x.endErr
	}
	switch {
	case s.closed:
		return bson.Timestamp{}, errClosed
	case s.broken != nil:
		return bson.Timestamp{}, brokenError(s.broken)
	}
	var ts bson.Timestamp
	if n := len(x.entries); n > 0 {
		now := time.Now().Truncate(time.Millisecond)
		ts = s.tick(now)
		for i := range x.entries {
			e := &x.entries[i]
			e.TS, e.Wall = ts, now
			e.Txn = &TxnInfo{LSID: x.lsid, Number: x.number, OpIndex: i, Last: i == n-1}
			e.Size = entrySize(e)
		}
		if s.jr != nil {
			if err := s.jr.append(x.entries); err != nil {
				s.broken = err
				s.log.Error("journal write failed; refusing further writes", "err", err)
				s.abortLocked(x, asMongo(brokenError(err)))
				return bson.Timestamp{}, brokenError(err)
			}
		}
		s.hist.keepWrite(x.entries, x.kept)
		s.oplog.append(now, x.entries...)
	}
	x.ended = true
	delete(s.txns.open, x)
	if len(s.txns.open) > 0 {
		var recs []pendingHist
		for ns, m := range x.dirty {
			for id, pre := range m {
				recs = append(recs, pendingHist{ns: ns, id: id, pre: pre})
			}
		}
		s.recordHistoryLocked(ts, recs)
	}
	s.endedLocked(x)
	return ts, nil
}

// Abort takes back every write of the transaction. Aborting an ended
// transaction does nothing.
func (x *Txn) Abort() {
	x.s.mu.Lock()
	defer x.s.mu.Unlock()
	if !x.ended {
		x.s.abortLocked(x, nil)
	}
}

// abortLocked ends x and undoes its writes; why is what a later statement
// of it is told (nil: NoSuchTransaction, aborted).
func (s *Store) abortLocked(x *Txn, why *mongoerr.Error) {
	x.ended = true
	if why == nil || why.Code == mongoerr.WriteConflict {
		x.endErr = mongoerr.New(mongoerr.NoSuchTransaction, "Transaction with { txnNumber: %d } has been aborted.", x.number).
			WithLabels(mongoerr.LabelTransient)
	} else {
		x.endErr = why
	}
	delete(s.txns.open, x)
	s.undoLocked(x.undo)
	x.undo, x.entries, x.kept = nil, nil, nil
	s.endedLocked(x)
}

// endedLocked releases what only open transactions needed.
func (s *Store) endedLocked(x *Txn) {
	x.dirty = nil
	close(x.done)
	if len(s.txns.open) == 0 {
		s.txns.history = nil
		return
	}
	oldest := bson.Timestamp{T: ^uint32(0), I: ^uint32(0)}
	for o := range s.txns.open {
		if tsLess(o.snap, oldest) {
			oldest = o.snap
		}
	}
	for ns, m := range s.txns.history {
		for id, hs := range m {
			hs = slices.DeleteFunc(hs, func(h histRec) bool { return !tsLess(oldest, h.ts) })
			if len(hs) == 0 {
				delete(m, id)
			} else {
				m[id] = hs
			}
		}
		if len(m) == 0 {
			delete(s.txns.history, ns)
		}
	}
}

// abortOnLocked aborts the open transactions that wrote ns, before a DDL
// command changes it under them (mongod makes the DDL wait for them; here
// they lose, and are told so by a transient error).
func (s *Store) abortOnLocked(ns Namespace) {
	for o := range s.txns.open {
		if len(o.dirty[ns]) > 0 || slices.ContainsFunc(o.undo, func(u undoRec) bool { return u.ns == ns }) {
			s.abortLocked(o, nil)
		}
	}
}

// undoLocked takes back writes, the newest first.
func (s *Store) undoLocked(recs []undoRec) {
	for i := len(recs) - 1; i >= 0; i-- {
		u := recs[i]
		if s.collLocked(u.ns) != u.c {
			continue // dropped since
		}
		if u.created {
			s.dropLocked(u.ns)
			continue
		}
		if p := u.c.pos(u.rid); p >= 0 {
			u.c.remove(p)
		}
		if u.pre != nil {
			u.c.restore(u.rid, u.pre)
		}
	}
}

// restore puts doc back as record rid, in its natural place, with its
// index keys; it skips the unique checks, since doc held its keys before.
func (c *collection) restore(rid uint64, doc bson.Raw) {
	i := sort.Search(len(c.recs), func(j int) bool { return c.recs[j].rid >= rid })
	if i < len(c.recs) && c.recs[i].rid == rid {
		c.recs[i].doc = doc
	} else {
		c.recs = slices.Insert(c.recs, i, record{rid: rid, doc: doc})
	}
	c.live++
	c.size += int64(len(doc))
	keys, _ := c.keysOf(doc, rid)
	for i, ix := range c.indexes {
		for _, e := range keys[i] {
			ix.tree.insert(e)
		}
	}
}

// overlay is what a reader must see instead of the current version of
// some documents of one collection: by _id, the version to show (nil:
// none), with the _ids in a stable order.
type overlay struct {
	docs map[string]bson.Raw
	ids  []string
}

func (o *overlay) set(id string, doc bson.Raw) {
	if _, ok := o.docs[id]; ok {
		return
	}
	o.docs[id] = doc
	o.ids = append(o.ids, id)
}

// overlayLocked returns the overlay of reader rd (nil: outside any
// transaction) on ns, or nil when the current versions are all right.
func (s *Store) overlayLocked(rd *Txn, ns Namespace) *overlay {
	if len(s.txns.open) == 0 {
		return nil
	}
	need := rd != nil && len(s.txns.history[ns]) > 0
	for x := range s.txns.open {
		if need {
			break
		}
		need = x != rd && len(x.dirty[ns]) > 0
	}
	if !need {
		return nil
	}
	o := &overlay{docs: make(map[string]bson.Raw)}
	own := func(id string) bool {
		if rd == nil {
			return false
		}
		_, ok := rd.dirty[ns][id]
		return ok
	}
	if rd != nil {
		var ids []string
		for id := range s.txns.history[ns] {
			ids = append(ids, id)
		}
		sort.Strings(ids)
		for _, id := range ids {
			for _, h := range s.txns.history[ns][id] {
				if tsLess(rd.snap, h.ts) {
					if !own(id) {
						o.set(id, h.pre)
					}
					break
				}
			}
		}
	}
	others := make([]*Txn, 0, len(s.txns.open))
	for x := range s.txns.open {
		if x != rd {
			others = append(others, x)
		}
	}
	sort.Slice(others, func(i, j int) bool { return tsLess(others[i].snap, others[j].snap) })
	for _, x := range others {
		ids := make([]string, 0, len(x.dirty[ns]))
		for id := range x.dirty[ns] {
			ids = append(ids, id)
		}
		sort.Strings(ids)
		for _, id := range ids {
			if !own(id) {
				o.set(id, x.dirty[ns][id])
			}
		}
	}
	if len(o.ids) == 0 {
		return nil
	}
	return o
}

// each calls fn with every document of c as the overlay shows them, in
// natural order, then those only the overlay holds (rid 0); shown tells
// whether the overlay changed it. fn returns false to stop.
func (o *overlay) each(c *collection, fn func(doc bson.Raw, rid uint64, shown bool) bool) {
	seen := make(map[string]bool, len(o.ids))
	for _, r := range c.recs {
		if r.doc == nil {
			continue
		}
		doc, shown := r.doc, false
		id := idKey(doc)
		if v, ok := o.docs[id]; ok {
			seen[id], shown = true, true
			if doc = v; doc == nil {
				continue
			}
		}
		if !fn(doc, r.rid, shown) {
			return
		}
	}
	for _, id := range o.ids {
		if d := o.docs[id]; d != nil && !seen[id] {
			if !fn(d, 0, true) {
				return
			}
		}
	}
}

// hits is the package's hits for a write of t: a document whose version
// the writer sees is not the current one is a conflict (in a transaction)
// or makes the write wait for the transaction that wrote it.
func (t *tx) hits(ns Namespace, c *collection, f *query, limit int) ([]hit, error) {
	o := t.s.overlayLocked(t.txn, ns)
	if o == nil {
		return hits(c, f, limit), nil
	}
	var out []hit
	var err error
	o.each(c, func(doc bson.Raw, rid uint64, shown bool) bool {
		ok, pos := f.MatchPositional(doc)
		if !ok {
			return true
		}
		if shown {
			err = t.conflict(ns, idKey(doc))
			return false
		}
		out = append(out, hit{rid: rid, pos: pos})
		return limit <= 0 || len(out) < limit
	})
	return out, err
}

// conflict is the error of a write of t meeting a document whose current
// version it may not write.
func (t *tx) conflict(ns Namespace, id string) error {
	if t.txn == nil {
		for o := range t.s.txns.open {
			if _, ok := o.dirty[ns][id]; ok {
				return &blockedError{done: o.done}
			}
		}
	}
	return writeConflict()
}

// docsAsLocked returns the documents of c as reader rd sees them.
func (s *Store) docsAsLocked(rd *Txn, ns Namespace, c *collection) []bson.Raw {
	o := s.overlayLocked(rd, ns)
	if o == nil {
		return c.docs()
	}
	out := make([]bson.Raw, 0, c.live)
	o.each(c, func(d bson.Raw, _ uint64, _ bool) bool { out = append(out, d); return true })
	return out
}

// Reads and writes of a transaction.

// Find is Store.Find as the transaction sees the data.
func (x *Txn) Find(ns Namespace, spec FindSpec) ([]bson.Raw, error) {
	docs, _, err := x.s.find(x, ns, spec)
	return docs, err
}

// Count is Store.Count as the transaction sees the data.
func (x *Txn) Count(ns Namespace, filter bson.Raw, skip, limit int64) (int64, error) {
	return x.s.count(x, ns, FindSpec{Filter: filter, Skip: skip, Limit: limit})
}

// CountWith is Store.CountWith as the transaction sees the data.
func (x *Txn) CountWith(ns Namespace, spec FindSpec) (int64, error) {
	return x.s.count(x, ns, spec)
}

// Distinct is Store.Distinct as the transaction sees the data.
func (x *Txn) Distinct(ns Namespace, key string, filter bson.Raw) ([]bson.RawValue, error) {
	return x.s.distinct(x, ns, key, FindSpec{Filter: filter})
}

// DistinctWith is Store.DistinctWith as the transaction sees the data.
func (x *Txn) DistinctWith(ns Namespace, key string, spec FindSpec) ([]bson.RawValue, error) {
	return x.s.distinct(x, ns, key, spec)
}

// Aggregate is Store.Aggregate as the transaction sees the data.
func (x *Txn) Aggregate(ns Namespace, stages []bson.Raw, lim mql.Limits) ([]bson.Raw, error) {
	return x.s.aggregate(x, ns, stages, lim, bson.RawValue{})
}

// AggregateWith is Store.AggregateWith as the transaction sees the data.
func (x *Txn) AggregateWith(ns Namespace, stages []bson.Raw, lim mql.Limits, collation bson.RawValue) ([]bson.Raw, error) {
	return x.s.aggregate(x, ns, stages, lim, collation)
}

// Insert is Store.Insert within the transaction.
func (x *Txn) Insert(ns Namespace, docs []bson.Raw, ordered bool) (int, []WriteError) {
	return x.s.insert(x, ns, docs, InsertOptions{Ordered: ordered})
}

// InsertWith is Store.InsertWith within the transaction.
func (x *Txn) InsertWith(ns Namespace, docs []bson.Raw, opts InsertOptions) (int, []WriteError) {
	return x.s.insert(x, ns, docs, opts)
}

// Update is Store.Update within the transaction.
func (x *Txn) Update(ns Namespace, spec UpdateSpec) (UpdateResult, error) {
	return x.s.update(x, ns, spec)
}

// Delete is Store.Delete within the transaction.
func (x *Txn) Delete(ns Namespace, filter bson.Raw, limit int) (int, error) {
	return x.s.delete(x, ns, DeleteSpec{Filter: filter, Limit: limit})
}

// DeleteWith is Store.DeleteWith within the transaction.
func (x *Txn) DeleteWith(ns Namespace, spec DeleteSpec) (int, error) {
	return x.s.delete(x, ns, spec)
}

// FindAndModify is Store.FindAndModify within the transaction.
func (x *Txn) FindAndModify(ns Namespace, spec FindAndModifySpec) (FindAndModifyResult, error) {
	return x.s.findAndModify(x, ns, spec)
}

// writeAs runs a write for reader rd: in its transaction, or as a write
// command of its own.
func (s *Store) writeAs(rd *Txn, fn func(t *tx) error) error {
	if rd != nil {
		return s.writeIn(rd, fn)
	}
	return s.write(fn)
}

// errBlockedStop is returned to a blocked write when the store closes.
var errBlockedStop = errors.New("store closed while waiting for a transaction")

// Create creates a collection, without options, within the transaction:
// an abort drops it again, and its create entry is committed with the
// rest. The collection is in the catalog from now on (listCollections
// shows it before the commit); its documents are not.
func (x *Txn) Create(ns Namespace) error {
	s := x.s
	return s.writeIn(x, func(t *tx) error {
		if s.collLocked(ns) != nil {
			return mongoerr.New(mongoerr.NamespaceExists, "Collection %s already exists.", ns)
		}
		if err := validNamespace(ns); err != nil {
			return err
		}
		c := s.createLocked(ns, newUUID(), nil)
		t.created(ns, c)
		t.emit(OplogEntry{Op: "create", NS: ns, UUID: c.info.UUID, Extra: createExtra(nil)})
		return nil
	})
}
