package store

import (
	"sort"
	"sync"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
)

const (
	defaultOplogBytes = 256 << 20
	entryOverhead     = 256 // bytes charged per entry for the struct and its headers
)

// Oplog is the bounded, ordered record of every write: one entry per
// document written and per DDL command, in commit order, which is also
// cluster-time order. The store appends under its write lock; readers
// (change streams) read concurrently.
type Oplog struct {
	maxBytes     int64
	minRetention time.Duration

	mu          sync.Mutex // guards the fields below
	entries     entryQueue // the retained entries
	bytes       int64
	newest      bson.Timestamp // TS of the newest entry ever appended
	evictedUpTo bson.Timestamp // TS of the newest entry dropped by the bound
	changed     chan struct{}
}

func newOplog(maxBytes int64, minRetention time.Duration) *Oplog {
	if maxBytes <= 0 {
		maxBytes = defaultOplogBytes
	}
	return &Oplog{maxBytes: maxBytes, minRetention: minRetention, changed: make(chan struct{})}
}

// tsLess reports whether a is before b.
func tsLess(a, b bson.Timestamp) bool {
	return a.T < b.T || a.T == b.T && a.I < b.I
}

// entrySize is what an entry is charged against the bound: its documents
// and an estimate of the memory of its structure (the entry itself, the
// document key, the update description's fields and strings).
func entrySize(e *OplogEntry) int {
	n := entryOverhead + len(e.DocKey) + len(e.Doc) + len(e.Pre) + len(e.UUID.Data) + len(e.NS.DB) + len(e.NS.Coll)
	if u := e.Update; u != nil {
		n += 128
		for _, f := range u.UpdatedFields {
			n += len(f.Key) + 96
			if rv, ok := f.Value.(bson.RawValue); ok {
				n += len(rv.Value)
			}
		}
		for _, f := range u.RemovedFields {
			n += len(f) + 32
		}
		n += len(u.TruncatedArrays)*48 + len(u.DisambiguatedPaths)*128
	}
	n += len(e.Extra) * 128
	if e.Txn != nil {
		n += 64 + len(e.Txn.LSID)
	}
	return n
}

// append adds entries and wakes waiting readers; it then drops the oldest
// entries past the bound.
func (o *Oplog) append(now time.Time, entries ...OplogEntry) {
	if len(entries) == 0 {
		return
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	for i := range entries {
		e := &entries[i]
		if e.Size == 0 {
			e.Size = entrySize(e)
		}
		o.bytes += int64(e.Size)
	}
	for _, e := range entries {
		o.entries.push(e)
	}
	o.newest = entries[len(entries)-1].TS
	o.evictLocked(now)
	close(o.changed)
	o.changed = make(chan struct{})
}

// evictLocked drops the oldest entries while the oplog is over its bound,
// except those younger than the minimum retention.
func (o *Oplog) evictLocked(now time.Time) {
	for o.bytes > o.maxBytes && o.entries.len() > 0 {
		e := o.entries.at(0)
		if o.minRetention > 0 && now.Sub(e.Wall) < o.minRetention {
			break
		}
		o.bytes -= int64(e.Size)
		o.evictedUpTo = e.TS
		o.entries.pop()
	}
}

// Oldest returns the TS of the oldest retained entry.
func (o *Oplog) Oldest() (bson.Timestamp, bool) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.entries.len() == 0 {
		return bson.Timestamp{}, false
	}
	return o.entries.at(0).TS, true
}

// Newest returns the TS of the newest entry ever appended (zero before the
// first write), whether or not it is still retained.
func (o *Oplog) Newest() bson.Timestamp {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.newest
}

// ReadAfter returns up to max entries (0 = no limit), and up to maxBytes of
// them (0 = no limit; at least one entry is returned if any is due), that
// come strictly after ts. scannedUpTo is the TS the reader has now seen
// everything up to: the last entry returned when the read was cut short,
// otherwise Newest. lost reports that entries after ts were already dropped
// by the bound, so the history from ts on is incomplete.
func (o *Oplog) ReadAfter(ts bson.Timestamp, max int, maxBytes int) (entries []OplogEntry, scannedUpTo bson.Timestamp, lost bool) {
	o.mu.Lock()
	defer o.mu.Unlock()
	lost = tsLess(ts, o.evictedUpTo)
	q := &o.entries
	i := sort.Search(q.len(), func(j int) bool { return tsLess(ts, q.at(j).TS) })
	bytes := 0
	for ; i < q.len(); i++ {
		e := q.at(i)
		if max > 0 && len(entries) >= max || maxBytes > 0 && len(entries) > 0 && bytes+e.Size > maxBytes {
			// The entries of a transaction share one TS: never cut
			// between them, or a reader going on after that TS would
			// miss the rest.
			if last := entries[len(entries)-1].TS; e.TS != last {
				return entries, last, lost
			}
		}
		bytes += e.Size
		entries = append(entries, *e)
	}
	scannedUpTo = o.newest
	if tsLess(scannedUpTo, ts) {
		scannedUpTo = ts
	}
	return entries, scannedUpTo, lost
}

// advance moves the newest scanned time to ts without an entry, and wakes
// waiters, as a no-op oplog write would. The caller holds the store's write
// lock, so no entry with an earlier time can follow.
func (o *Oplog) advance(ts bson.Timestamp) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if !tsLess(o.newest, ts) {
		return
	}
	o.newest = ts
	close(o.changed)
	o.changed = make(chan struct{})
}

// Changed returns a channel that is closed by the next append.
func (o *Oplog) Changed() <-chan struct{} {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.changed
}

// stats returns the retained entry count and bytes.
func (o *Oplog) stats() (n int, bytes int64) {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.entries.len(), o.bytes
}

// retained returns a copy of the retained entries, for a snapshot.
func (o *Oplog) retained() ([]OplogEntry, bson.Timestamp, bson.Timestamp) {
	o.mu.Lock()
	defer o.mu.Unlock()
	out := make([]OplogEntry, o.entries.len())
	for i := range out {
		out[i] = *o.entries.at(i)
	}
	return out, o.newest, o.evictedUpTo
}

// restore loads the entries of a snapshot, at Open.
func (o *Oplog) restore(entries []OplogEntry, newest, evicted bson.Timestamp) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.entries, o.bytes = entryQueue{}, 0
	for i := range entries {
		o.bytes += int64(entries[i].Size)
		o.entries.push(entries[i])
	}
	o.newest, o.evictedUpTo = newest, evicted
	o.evictLocked(time.Now())
}

// restoreAppend appends replayed entries, at Open: nobody is waiting yet.
func (o *Oplog) restoreAppend(entries []OplogEntry) {
	if len(entries) == 0 {
		return
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	for i := range entries {
		o.bytes += int64(entries[i].Size)
	}
	for _, e := range entries {
		o.entries.push(e)
	}
	o.newest = entries[len(entries)-1].TS
	o.evictLocked(time.Now())
}

// queueChunk is the number of entries per chunk of an entryQueue.
const queueChunk = 256

// entryQueue is a FIFO of entries in fixed-size chunks: memory follows the
// retained entries closely (at most one partly used chunk at each end),
// where a slice would keep up to twice its peak.
type entryQueue struct {
	chunks [][]OplogEntry
	head   int // index of the first entry in chunks[0]
	n      int
}

func (q *entryQueue) len() int { return q.n }

func (q *entryQueue) at(i int) *OplogEntry {
	j := q.head + i
	return &q.chunks[j/queueChunk][j%queueChunk]
}

func (q *entryQueue) push(e OplogEntry) {
	if len(q.chunks) == 0 || len(q.chunks[len(q.chunks)-1]) == queueChunk {
		q.chunks = append(q.chunks, make([]OplogEntry, 0, queueChunk))
	}
	last := &q.chunks[len(q.chunks)-1]
	*last = append(*last, e)
	q.n++
}

func (q *entryQueue) pop() {
	q.chunks[0][q.head] = OplogEntry{}
	q.head++
	q.n--
	if q.head == queueChunk || q.n == 0 {
		q.chunks[0] = nil
		q.chunks = q.chunks[1:]
		q.head = 0
		if q.n == 0 {
			q.chunks = nil
		}
	}
}

// Range returns up to max entries (max > 0) whose TS is strictly after
// after and strictly before before (a zero before: no upper bound), the
// oldest first, or the newest first when reverse. It copies them out
// under the lock, so a caller reads a large oplog in chunks without
// holding writers back.
func (o *Oplog) Range(after, before bson.Timestamp, max int, reverse bool) []OplogEntry {
	o.mu.Lock()
	defer o.mu.Unlock()
	q := &o.entries
	lo := sort.Search(q.len(), func(j int) bool { return tsLess(after, q.at(j).TS) })
	hi := q.len()
	if !before.IsZero() {
		hi = sort.Search(q.len(), func(j int) bool { return !tsLess(q.at(j).TS, before) })
	}
	var out []OplogEntry
	for n := 0; lo < hi; n++ {
		if n >= max { // past max only to keep a transaction's entries (one TS) together
			next := q.at(lo)
			if reverse {
				next = q.at(hi - 1)
			}
			if next.TS != out[len(out)-1].TS {
				break
			}
		}
		if reverse {
			hi--
			out = append(out, *q.at(hi))
		} else {
			out = append(out, *q.at(lo))
			lo++
		}
	}
	return out
}

// Stats reports the retained entries, their charged bytes and the bound,
// for collStats on local.oplog.rs.
func (o *Oplog) Stats() (entries int, bytes, maxBytes int64) {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.entries.len(), o.bytes, o.maxBytes
}
