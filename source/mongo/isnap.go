package mongo

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"

	"github.com/tide-cdc/tide/cdc"
)

// Incremental snapshots copy chosen collections again while the stream
// runs (tide snapshot --collection, POST /api/snapshots, a signal). The
// reader copies them a chunk at a time, between two batches of the
// stream, with the watermark rule of DBLog: a chunk is read at a cluster
// time high; the change events after the last position handed out and
// up to high (the chunk's window) are scanned; a chunk document whose key
// has a change in the window is dropped, the others are handed out right
// away, before any event of the window. So a snapshot row never follows a
// newer change of its document: the row is the document as of high, and
// every change after high comes after it; a change inside the window
// comes after too, and replaces the row it dropped.
//
// What survives a restart is in the checkpoint: each running snapshot's
// progress (the collections started, the last _id handed out of each one
// being copied, the documents done) in every position handed out while it
// runs ("isnap"), and in the identity the requests themselves
// (isnap.req.<id>), the last finished ones (isnap.done) and the next id
// (isnap.seq). A request in the identity that the position does not name
// has not started (or was recorded with the pipeline stopped); one the
// position names resumes after its last _id.

// Identity keys of incremental snapshots.
const (
	isnapReqPrefix = "isnap.req."
	isnapDoneKey   = "isnap.done"
	isnapSeqKey    = "isnap.seq"
)

// DefaultSnapshotChunk is the chunk size of an incremental snapshot
// request that names none.
const DefaultSnapshotChunk = 1000

// MaxSnapshotChunk bounds a request's chunk size: a chunk is held in
// memory while its window is scanned.
const MaxSnapshotChunk = 100_000

// maxFinishedSnapshots is how many finished snapshots the checkpoint keeps.
const maxFinishedSnapshots = 100

// isnapWindowMax is how many change events a chunk's window may hold
// before the chunk is given up for now: the stream is far behind, and it
// catches up first.
const isnapWindowMax = 5_000

// isnapMaxRounds bounds how long the reader copies chunks, while the
// stream has nothing new, before it reads the stream again.
const isnapMaxRounds = 30 * time.Second

// isnapReq is a request as the identity keeps it: what does not change.
type isnapReq struct {
	ID          string    `json:"id"`
	Collections []string  `json:"collections"`      // sorted, distinct
	Filter      string    `json:"filter,omitempty"` // canonical Extended JSON
	Chunk       int       `json:"chunk"`
	Requested   time.Time `json:"requested"`
	Signal      string    `json:"signal,omitempty"` // the _id of the signal document that asked, as Extended JSON
}

// isnapPosRun is a running snapshot's progress in a position.
type isnapPosRun struct {
	Next   int                        `json:"next"` // Collections[:Next] are started
	Done   int64                      `json:"done"` // documents handed out
	Active map[string]json.RawMessage `json:"active,omitempty"`
}

// isnapRun is a snapshot not yet finished.
type isnapRun struct {
	req      isnapReq
	reqJSON  string
	filter   bson.Raw // nil: every document
	running  bool     // named by positions; false: pending
	next     int
	active   []*isnapTask // in collection order
	done     int64
	total    int64 // estimated; 0 until counted
	counted  bool
	started  time.Time // when this process started it
	doneAt0  int64     // done when this process started it
	cancel   string    // a cancellation asked for, its reason
	failWith string    // a failure seen by the stream (a drop), its reason
}

// isnapTask is one collection being copied.
type isnapTask struct {
	ns       string
	last     bson.RawValue // zero before the first document
	lastJSON []byte        // last as canonical Extended JSON; nil before the first
	probe    bool          // the last chunk ended a type bracket of _id: look past it
	// reread are documents dropped from a chunk for an update in its
	// window, with full_document delta: the update carries no document,
	// so they are read again with the next chunk, each at most
	// maxRereads times in a row. Not kept across a restart.
	reread []rereadDoc
}

// rereadDoc is a document to read again, and how many times it was.
type rereadDoc struct {
	id    bson.RawValue
	tries int
}

// maxRereads bounds how many times in a row a document updated in every
// window is read again.
const maxRereads = 10

// isnapState is the source's incremental snapshots. The reader changes
// them; requests, cancellations and listings come from other goroutines.
type isnapState struct {
	work    atomic.Bool  // runs is not empty
	dropped atomic.Int64 // chunk documents dropped for a change in their window
	rows    atomic.Int64 // snapshot rows handed out
	// counting tracks the goroutines that estimate totals; Close waits.
	counting sync.WaitGroup

	mu       sync.Mutex // guards the fields below
	client   *mongo.Client
	seq      int
	runs     []*isnapRun        // pending and running, in request order
	finished []cdc.SnapshotInfo // oldest first, at most maxFinishedSnapshots
	doneJSON string             // finished, as isnap.done
	retired  map[string]string  // id -> request JSON of finished runs a saved position may still name
}

func (m *isnapState) setWorkLocked() { m.work.Store(len(m.runs) > 0) }

// parseFilter reads a request's filter, relaxed Extended JSON of a
// query document, and returns it with its canonical form.
func parseFilter(text []byte) (bson.Raw, string, error) {
	t := bytes.TrimSpace(text)
	if len(t) == 0 || string(t) == "null" {
		return nil, "", nil
	}
	if t[0] != '{' {
		return nil, "", fmt.Errorf("%w: filter must be a JSON object (a query document), not %.40s", cdc.ErrSnapshotRequest, t)
	}
	var doc bson.Raw
	if err := bson.UnmarshalExtJSON(t, false, &doc); err != nil {
		return nil, "", fmt.Errorf("%w: filter is not Extended JSON: %v", cdc.ErrSnapshotRequest, err)
	}
	if len(doc) <= 5 {
		return nil, "", nil
	}
	canon, err := bson.MarshalExtJSON(doc, true, false)
	if err != nil {
		return nil, "", fmt.Errorf("%w: filter: %v", cdc.ErrSnapshotRequest, err)
	}
	return doc, string(canon), nil
}

// checkRequest validates what can be validated without a server: the
// collections (captured by the source), the filter and the chunk.
func checkRequest(cfg Config, req cdc.SnapshotRequest) (isnapReq, bson.Raw, error) {
	var out isnapReq
	if len(req.Collections) == 0 {
		return out, nil, fmt.Errorf("%w: collections: name at least one collection, as \"db.coll\"", cdc.ErrSnapshotRequest)
	}
	var f *filter
	if len(cfg.Collections) > 0 {
		var err error
		if f, err = newFilter(cfg.Database, cfg.Collections, cfg.Exclude); err != nil {
			return out, nil, fmt.Errorf("%w: %v", cdc.ErrSnapshotRequest, err)
		}
	}
	seen := map[string]bool{}
	for _, ns := range req.Collections {
		db, coll, ok := strings.Cut(ns, ".")
		if !ok || db == "" || coll == "" {
			return out, nil, fmt.Errorf("%w: collection %q: name it as \"db.coll\"", cdc.ErrSnapshotRequest, ns)
		}
		captured := false
		if f != nil {
			captured = f.match(db, coll) && capturable(db, coll)
		} else {
			captured = db == cfg.Database && coll == cfg.Collection
		}
		if !captured {
			return out, nil, fmt.Errorf("%w: collection %s is not captured by this pipeline's source (an incremental snapshot copies only collections the stream follows)", cdc.ErrSnapshotRequest, ns)
		}
		if !seen[ns] {
			seen[ns] = true
			out.Collections = append(out.Collections, ns)
		}
	}
	slices.Sort(out.Collections)
	switch {
	case req.Chunk == 0:
		out.Chunk = DefaultSnapshotChunk
	case req.Chunk < 1 || req.Chunk > MaxSnapshotChunk:
		return out, nil, fmt.Errorf("%w: chunk %d is not between 1 and %d", cdc.ErrSnapshotRequest, req.Chunk, MaxSnapshotChunk)
	default:
		out.Chunk = req.Chunk
	}
	doc, canon, err := parseFilter(req.Filter)
	if err != nil {
		return out, nil, err
	}
	out.Filter = canon
	return out, doc, nil
}

// conflictLocked refuses a request for a collection that a snapshot not
// finished copies: two copies of one collection would only double the
// work. Ask again when it is done, or cancel it first.
func (m *isnapState) conflictLocked(req isnapReq) error {
	for _, r := range m.runs {
		for _, ns := range req.Collections {
			if slices.Contains(r.req.Collections, ns) {
				return fmt.Errorf("%w: collection %s is already being copied by snapshot %s (cancel it first: DELETE /api/snapshots/%s)",
					cdc.ErrSnapshotConflict, ns, r.req.ID, r.req.ID)
			}
		}
	}
	return nil
}

// RequestSnapshot queues an incremental snapshot: see
// cdc.IncrementalSnapshotter. The filter is tried on the server first, so
// that one the server refuses is refused here, before anything starts.
func (s *Source) RequestSnapshot(ctx context.Context, req cdc.SnapshotRequest) (string, error) {
	r, filter, err := checkRequest(s.cfg, req)
	if err != nil {
		return "", err
	}
	m := &s.isnap
	m.mu.Lock()
	client := m.client
	m.mu.Unlock()
	if client == nil {
		return "", fmt.Errorf("%w: it opens its connection first; ask again in a moment", cdc.ErrSnapshotNotReady)
	}
	if err := checkOnServer(ctx, client, r, filter); err != nil {
		return "", err
	}
	return s.enqueue(r, filter)
}

// checkOnServer runs the filter on each collection once, and checks that
// the collections exist.
func checkOnServer(ctx context.Context, client *mongo.Client, r isnapReq, filter bson.Raw) error {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	for _, ns := range r.Collections {
		db, name, _ := strings.Cut(ns, ".")
		names, err := client.Database(db).ListCollectionNames(ctx, bson.D{{Key: "name", Value: name}})
		if err != nil {
			return fmt.Errorf("list collections of %s: %w", db, err)
		}
		if len(names) == 0 {
			return fmt.Errorf("%w: collection %s does not exist", cdc.ErrSnapshotRequest, ns)
		}
		if filter == nil {
			continue
		}
		q := bson.Raw(filter)
		if err := client.Database(db).Collection(name).FindOne(ctx, q).Err(); err != nil && !errors.Is(err, mongo.ErrNoDocuments) {
			var ce mongo.CommandError
			if errors.As(err, &ce) || isServerError(err) {
				return fmt.Errorf("%w: filter refused by the server on %s: %v", cdc.ErrSnapshotRequest, ns, err)
			}
			return fmt.Errorf("try the filter on %s: %w", ns, err)
		}
	}
	return nil
}

// isServerError reports whether err is an error the server answered.
func isServerError(err error) bool {
	var se mongo.ServerError
	return errors.As(err, &se)
}

// enqueue gives the request an id and queues it.
func (s *Source) enqueue(r isnapReq, filter bson.Raw) (string, error) {
	m := &s.isnap
	m.mu.Lock()
	defer m.mu.Unlock()
	if err := m.conflictLocked(r); err != nil {
		return "", err
	}
	m.seq++
	r.ID = strconv.Itoa(m.seq)
	if r.Requested.IsZero() {
		r.Requested = time.Now().UTC().Truncate(time.Millisecond)
	}
	j, _ := json.Marshal(r)
	m.runs = append(m.runs, &isnapRun{req: r, reqJSON: string(j), filter: filter})
	m.setWorkLocked()
	s.log.Info("incremental snapshot requested", "snapshot", r.ID, "collections", r.Collections, "filter", r.Filter, "chunk", r.Chunk)
	return r.ID, nil
}

// CancelSnapshot stops a snapshot at its next chunk boundary.
func (s *Source) CancelSnapshot(id string) error {
	m := &s.isnap
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, r := range m.runs {
		if r.req.ID == id {
			if r.cancel == "" {
				r.cancel = "cancelled by request"
			}
			return nil
		}
	}
	for _, f := range m.finished {
		if f.ID == id {
			return fmt.Errorf("%w: snapshot %s is already %s", cdc.ErrSnapshotConflict, id, f.State)
		}
	}
	return fmt.Errorf("%w: %q", cdc.ErrSnapshotNotFound, id)
}

// Snapshots lists the finished snapshots the checkpoint keeps, oldest
// first, then those not finished.
func (s *Source) Snapshots() []cdc.SnapshotInfo {
	m := &s.isnap
	m.mu.Lock()
	defer m.mu.Unlock()
	out := slices.Clone(m.finished)
	now := time.Now()
	for _, r := range m.runs {
		out = append(out, r.infoLocked(now))
	}
	if out == nil {
		out = []cdc.SnapshotInfo{}
	}
	return out
}

func (r *isnapRun) infoLocked(now time.Time) cdc.SnapshotInfo {
	in := cdc.SnapshotInfo{
		ID: r.req.ID, Collections: r.req.Collections, Filter: r.req.Filter, Chunk: r.req.Chunk,
		State: cdc.SnapshotRunning, DoneDocuments: r.done, TotalDocuments: max(r.total, r.done), Requested: r.req.Requested,
		Signal: r.req.Signal,
	}
	for _, t := range r.active {
		in.Current = append(in.Current, t.ns)
	}
	if !r.started.IsZero() {
		if secs := now.Sub(r.started).Seconds(); secs > 0.5 {
			in.Rate = float64(r.done-r.doneAt0) / secs
			if in.Rate > 0 && r.total > r.done {
				in.ETASeconds = float64(r.total-r.done) / in.Rate
			}
		}
	}
	return in
}

// finishLocked ends a run: it leaves runs for the finished list, and its
// request stays in the identity until a saved position no longer names it.
func (m *isnapState) finishLocked(s *Source, r *isnapRun, state, reason string) {
	now := time.Now()
	in := r.infoLocked(now)
	in.State, in.Reason, in.Finished, in.Current = state, reason, now.UTC().Truncate(time.Millisecond), nil
	in.Rate, in.ETASeconds = 0, 0
	if state == cdc.SnapshotDone {
		in.TotalDocuments = r.done
	}
	m.runs = slices.DeleteFunc(m.runs, func(x *isnapRun) bool { return x == r })
	m.setWorkLocked()
	m.addFinishedLocked(in)
	if r.running {
		if m.retired == nil {
			m.retired = map[string]string{}
		}
		m.retired[r.req.ID] = r.reqJSON
	}
	log := s.log.Info
	if state == cdc.SnapshotFailed {
		log = s.log.Warn
	}
	log("incremental snapshot "+state, "snapshot", r.req.ID, "collections", r.req.Collections, "documents", r.done, "reason", reason)
}

func (m *isnapState) addFinishedLocked(in cdc.SnapshotInfo) {
	m.finished = slices.DeleteFunc(m.finished, func(x cdc.SnapshotInfo) bool { return x.ID == in.ID })
	m.finished = append(m.finished, in)
	if n := len(m.finished) - maxFinishedSnapshots; n > 0 {
		m.finished = slices.Delete(m.finished, 0, n)
	}
	m.doneJSON = encodeFinished(m.finished)
}

// identity adds the snapshots' keys to an identity map.
func (m *isnapState) identity(id map[string]string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.seq > 0 {
		id[isnapSeqKey] = strconv.Itoa(m.seq)
	}
	if m.doneJSON != "" {
		id[isnapDoneKey] = m.doneJSON
	}
	for _, r := range m.runs {
		id[isnapReqPrefix+r.req.ID] = r.reqJSON
	}
	for k, v := range m.retired {
		id[isnapReqPrefix+k] = v
	}
}

// ack forgets the requests of finished runs once a saved position no
// longer names them.
func (m *isnapState) ack(upTo cdc.Position) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if len(m.retired) == 0 {
		return
	}
	var named map[string]isnapPosRun
	if bytes.Contains(upTo, []byte(`"isnap"`)) {
		if pos, err := parsePosition(upTo); err == nil {
			named = pos.ISnap
		}
	}
	for id := range m.retired {
		if _, ok := named[id]; !ok {
			delete(m.retired, id)
		}
	}
}

// restore sets the snapshots from a checkpoint: its identity and the
// progress its position names.
func (m *isnapState) restore(meta map[string]string, pos *position) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if v := meta[isnapSeqKey]; v != "" {
		n, err := strconv.Atoi(v)
		if err != nil {
			return fmt.Errorf("checkpoint identity %s: %q is not a number", isnapSeqKey, v)
		}
		m.seq = n
	}
	if v := meta[isnapDoneKey]; v != "" {
		var err error
		if m.finished, err = decodeFinished(v); err != nil {
			return fmt.Errorf("checkpoint identity %s: %v", isnapDoneKey, err)
		}
	}
	var named map[string]isnapPosRun
	if pos != nil {
		named = pos.ISnap
	}
	var ids []int
	reqs := map[int]isnapReq{}
	for k, v := range meta {
		id, ok := strings.CutPrefix(k, isnapReqPrefix)
		if !ok {
			continue
		}
		var r isnapReq
		if err := json.Unmarshal([]byte(v), &r); err != nil || r.ID != id {
			return fmt.Errorf("checkpoint identity %s: not a snapshot request: %.200s", k, v)
		}
		n, err := strconv.Atoi(id)
		if err != nil {
			return fmt.Errorf("checkpoint identity %s: the id is not a number", k)
		}
		ids = append(ids, n)
		reqs[n] = r
		m.seq = max(m.seq, n)
	}
	slices.Sort(ids)
	for _, n := range ids {
		r := reqs[n]
		p, running := named[r.ID]
		if !running && slices.ContainsFunc(m.finished, func(f cdc.SnapshotInfo) bool { return f.ID == r.ID }) {
			continue // finished; its request waited for a saved position without it
		}
		m.finished = slices.DeleteFunc(m.finished, func(f cdc.SnapshotInfo) bool { return f.ID == r.ID })
		doc, _, err := parseFilter([]byte(r.Filter))
		if err != nil {
			return fmt.Errorf("checkpoint identity %s%s: %v", isnapReqPrefix, r.ID, err)
		}
		j, _ := json.Marshal(r)
		run := &isnapRun{req: r, reqJSON: string(j), filter: doc}
		if running {
			if p.Next < 0 || p.Next > len(r.Collections) {
				return fmt.Errorf("checkpoint position: isnap[%s].next %d is not between 0 and %d", r.ID, p.Next, len(r.Collections))
			}
			run.running, run.next, run.done = true, p.Next, p.Done
			for _, ns := range r.Collections[:p.Next] {
				j, ok := p.Active[ns]
				if !ok {
					continue // done
				}
				t := &isnapTask{ns: ns}
				last, err := parseLastID(j)
				if err != nil {
					return fmt.Errorf("checkpoint position: isnap[%s].active[%s]: %w", r.ID, quote(ns), err)
				}
				if last.Type != 0 {
					t.last, t.lastJSON = last, slices.Clone([]byte(j))
				}
				run.active = append(run.active, t)
			}
		}
		m.runs = append(m.runs, run)
	}
	for id := range named {
		if !slices.ContainsFunc(m.runs, func(r *isnapRun) bool { return r.req.ID == id && r.running }) {
			return fmt.Errorf("checkpoint position names incremental snapshot %s, whose request is not in the checkpoint's identity (%s%s); %s",
				id, isnapReqPrefix, id, resetHint)
		}
	}
	if len(m.finished) > 0 {
		m.doneJSON = encodeFinished(m.finished)
	}
	m.setWorkLocked()
	return nil
}

// recordSnapshot adds a request to a stopped pipeline's checkpoint
// identity, for the next run to carry out.
func recordSnapshot(cfg Config, meta map[string]string, pos cdc.Position, req cdc.SnapshotRequest, now time.Time) (string, error) {
	r, _, err := checkRequest(cfg, req)
	if err != nil {
		return "", err
	}
	var m isnapState
	var p *position
	if len(pos) > 0 {
		pp, err := parsePosition(pos)
		if err != nil {
			return "", err
		}
		p = &pp
	}
	if err := m.restore(meta, p); err != nil {
		return "", err
	}
	if err := m.conflictLocked(r); err != nil {
		return "", err
	}
	m.seq++
	r.ID = strconv.Itoa(m.seq)
	r.Requested = now.UTC().Truncate(time.Millisecond)
	j, _ := json.Marshal(r)
	meta[isnapReqPrefix+r.ID] = string(j)
	meta[isnapSeqKey] = strconv.Itoa(m.seq)
	return r.ID, nil
}

// appendISnap appends the "isnap" member of a position for the running
// snapshots, or nothing when none runs. With sub, the active _id of that
// task is left out: the result is split there into prefix and suffix.
func appendISnap(dst []byte, runs []*isnapRun, sub *isnapTask) (prefix, suffix []byte) {
	any := false
	for _, r := range runs {
		if !r.running {
			continue
		}
		if !any {
			dst = append(dst, `"isnap":{`...)
			any = true
		} else {
			dst = append(dst, ',')
		}
		dst = strconv.AppendQuote(dst, r.req.ID)
		dst = append(dst, `:{"next":`...)
		dst = strconv.AppendInt(dst, int64(r.next), 10)
		dst = append(dst, `,"done":`...)
		dst = strconv.AppendInt(dst, r.done, 10)
		if len(r.active) > 0 {
			dst = append(dst, `,"active":{`...)
			for i, t := range r.active {
				if i > 0 {
					dst = append(dst, ',')
				}
				k, _ := json.Marshal(t.ns)
				dst = append(dst, k...)
				dst = append(dst, ':')
				if t == sub {
					prefix, dst = dst, nil
					continue
				}
				if t.lastJSON != nil {
					dst = append(dst, t.lastJSON...)
				} else {
					dst = append(dst, "null"...)
				}
			}
			dst = append(dst, '}')
		}
		dst = append(dst, '}')
	}
	if !any {
		return dst, nil
	}
	dst = append(dst, '}')
	if prefix != nil {
		return prefix, dst
	}
	return dst, nil
}

var _ cdc.IncrementalSnapshotter = (*Source)(nil)

// RecordSnapshot adds an incremental snapshot request to a stopped
// pipeline's checkpoint (tide snapshot --collection with the pipeline
// stopped); the next run carries it out. It checks what it can without a
// server: the collections against the configuration, the filter's
// syntax, the chunk, and a request not finished for the same collection.
func (c Config) RecordSnapshot(cp *cdc.Checkpoint, req cdc.SnapshotRequest, now time.Time) (string, error) {
	if c.SnapshotParallelism == 0 {
		c.SnapshotParallelism = DefaultSnapshotParallelism
	}
	if _, _, err := checkRequest(c, req); err != nil {
		return "", err
	}
	if cp == nil || len(cp.Meta) == 0 {
		return "", errors.New("there is no checkpoint yet: the first run starts with the configured snapshot; ask for an incremental snapshot once it runs")
	}
	if cp.Meta["connector"] != "mongo" {
		return "", fmt.Errorf("the checkpoint was not written by a mongo source (connector %q)", cp.Meta["connector"])
	}
	return recordSnapshot(c, cp.Meta, cp.Source, req, now)
}

// storedFinished is a finished snapshot as the checkpoint keeps it: short
// keys and Unix milliseconds, since every checkpoint carries up to
// maxFinishedSnapshots of them (and the local store saves a record of up
// to one 4 KiB page in place, a longer one by a rename).
type storedFinished struct {
	ID          string   `json:"i"`
	Collections []string `json:"c"`
	Filter      string   `json:"f,omitempty"`
	Chunk       int      `json:"k"`
	State       string   `json:"s"`
	Done        int64    `json:"d"`
	Total       int64    `json:"t,omitempty"` // omitted when equal to Done
	Requested   int64    `json:"r"`
	Finished    int64    `json:"e"`
	Reason      string   `json:"w,omitempty"`
	Signal      string   `json:"g,omitempty"`
}

func encodeFinished(list []cdc.SnapshotInfo) string {
	out := make([]storedFinished, len(list))
	for i, in := range list {
		out[i] = storedFinished{ID: in.ID, Collections: in.Collections, Filter: in.Filter, Chunk: in.Chunk, State: in.State,
			Done: in.DoneDocuments, Requested: in.Requested.UnixMilli(), Finished: in.Finished.UnixMilli(), Reason: in.Reason, Signal: in.Signal}
		if in.TotalDocuments != in.DoneDocuments {
			out[i].Total = in.TotalDocuments
		}
	}
	j, _ := json.Marshal(out)
	return string(j)
}

func decodeFinished(v string) ([]cdc.SnapshotInfo, error) {
	var stored []storedFinished
	if err := json.Unmarshal([]byte(v), &stored); err != nil {
		return nil, err
	}
	out := make([]cdc.SnapshotInfo, len(stored))
	for i, f := range stored {
		out[i] = cdc.SnapshotInfo{ID: f.ID, Collections: f.Collections, Filter: f.Filter, Chunk: f.Chunk, State: f.State,
			DoneDocuments: f.Done, TotalDocuments: f.Total, Requested: time.UnixMilli(f.Requested).UTC(),
			Finished: time.UnixMilli(f.Finished).UTC(), Reason: f.Reason, Signal: f.Signal}
		if f.Total == 0 {
			out[i].TotalDocuments = f.Done
		}
	}
	return out, nil
}
