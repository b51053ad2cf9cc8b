package mongo

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"
	"go.mongodb.org/mongo-driver/v2/mongo/readconcern"
	"go.mongodb.org/mongo-driver/v2/x/bsonx/bsoncore"
	"golang.org/x/sync/errgroup"

	"github.com/tide-cdc/tide/cdc"
)

// isnapStep copies chunks of the incremental snapshots, at a batch
// boundary of the stream: until the stream has events again, so that it
// never waits on the snapshots for longer than a chunk, or for at most
// isnapMaxRounds, so that its cursor is read now and then.
func (r *reader) isnapStep(ctx context.Context) error {
	if !r.s.isnap.work.Load() || r.lastTok == nil || r.startAfter || r.frags.pending() {
		return nil
	}
	until := time.Now().Add(isnapMaxRounds)
	for r.s.isnap.work.Load() && time.Now().Before(until) {
		more, err := r.isnapRound(ctx)
		if err != nil || more {
			return err
		}
	}
	return nil
}

// testChunkRead, if set by a test, runs after each round's chunk reads:
// a pause there widens the window.
var testChunkRead atomic.Pointer[func()]

// chunk is what one task's chunk read found.
type chunk struct {
	task    *isnapTask
	run     *isnapRun
	docs    []snapDoc
	ids     []bson.RawValue
	at      bson.Timestamp // the read's operation time
	short   bool           // fewer documents than asked for
	expr    bool           // read with the type-crossing query
	reread  int            // docs[:reread] are documents read again (isnapTask.reread), before the chunk's own
	err     error          // a failure of this run only (the server refused its query)
	missing bool           // the collection does not exist
}

// isnapRound copies one chunk of each collection being copied (up to
// snapshot_parallelism of them, over all snapshots), with the watermark
// rule. more reports that the stream has events to read.
func (r *reader) isnapRound(ctx context.Context) (more bool, err error) {
	s := r.s
	m := &s.isnap
	changed := r.isnapSchedule(ctx)
	m.mu.Lock()
	var chunks []*chunk
	for _, run := range m.runs {
		for _, t := range run.active {
			chunks = append(chunks, &chunk{task: t, run: run})
		}
	}
	m.mu.Unlock()
	if len(chunks) == 0 {
		if changed {
			return false, r.isnapMarker(ctx)
		}
		return false, nil
	}

	// Read the chunks, at once.
	g, gctx := errgroup.WithContext(ctx)
	for _, c := range chunks {
		g.Go(func() error { return r.readChunk(gctx, c) })
	}
	if err := g.Wait(); err != nil {
		return false, err
	}
	if f := testChunkRead.Load(); f != nil {
		(*f)()
	}
	var high bson.Timestamp
	nss := map[string]bool{}
	for _, c := range chunks {
		if c.err == nil {
			nss[c.task.ns] = true
			if tsAfter(c.at, high) {
				high = c.at
			}
		}
	}

	// The window: the changes after the last position handed out, up to high.
	var win window
	if len(nss) > 0 {
		if win, err = r.scanWindow(ctx, high, nss); err != nil {
			return false, err
		}
		if win.tooLong {
			s.log.Debug("incremental snapshot: the stream is behind; the chunk waits", "window_events", win.events)
			return true, nil
		}
	}

	// Hand out what the window left, run by run.
	for _, c := range chunks {
		if err := r.flushChunk(ctx, c, high, &win); err != nil {
			return false, err
		}
	}
	if err := r.isnapMarker(ctx); err != nil {
		return false, err
	}
	return win.events > 0, nil
}

// isnapSchedule applies cancellations and failures and starts
// collections in the free slots. It reports whether the snapshots changed.
func (r *reader) isnapSchedule(ctx context.Context) bool {
	s := r.s
	m := &s.isnap
	m.mu.Lock()
	changed := false
	for _, run := range slices.Clone(m.runs) {
		switch {
		case run.failWith != "":
			m.finishLocked(s, run, cdc.SnapshotFailed, run.failWith)
			changed = true
		case run.cancel != "":
			m.finishLocked(s, run, cdc.SnapshotCancelled, run.cancel)
			changed = true
		}
	}
	busy := 0
	for _, run := range m.runs {
		busy += len(run.active)
	}
	var count []*isnapRun
	for _, run := range m.runs {
		for busy < s.cfg.SnapshotParallelism && run.next < len(run.req.Collections) {
			if !run.running {
				run.running = true
				s.log.Info("incremental snapshot started", "snapshot", run.req.ID, "collections", run.req.Collections)
			}
			run.active = append(run.active, &isnapTask{ns: run.req.Collections[run.next]})
			run.next++
			busy++
			changed = true
		}
		if run.running && len(run.active) == 0 && run.next == len(run.req.Collections) {
			m.finishLocked(s, run, cdc.SnapshotDone, "")
			changed = true
			continue
		}
		if run.running && !run.counted {
			run.counted = true
			run.started, run.doneAt0 = time.Now(), run.done
			count = append(count, run)
		}
	}
	if changed {
		r.isnapFrag, _ = appendISnap(r.isnapFrag[:0], m.runs, nil)
	}
	m.mu.Unlock()
	// The estimated totals, counted beside the stream: a count with a
	// filter may scan the collection.
	for _, run := range count {
		m.counting.Add(1)
		go func() { // owned by the source: Close waits for it
			defer m.counting.Done()
			r.countRun(ctx, run)
		}()
	}
	return changed
}

// countRun estimates what is left of each collection of run not done.
func (r *reader) countRun(ctx context.Context, run *isnapRun) {
	m := &r.s.isnap
	m.mu.Lock()
	todo := map[string]bson.RawValue{}
	for _, ns := range run.req.Collections[run.next:] {
		todo[ns] = bson.RawValue{}
	}
	for _, t := range run.active {
		todo[t.ns] = t.last
	}
	filter, done0 := run.filter, run.done
	m.mu.Unlock()
	var total int64
	for ns, last := range todo {
		n, err := r.countLeft(ctx, ns, filter, last)
		if err != nil {
			r.s.log.Debug("incremental snapshot: cannot estimate the documents left", "namespace", ns, "err", err)
			continue
		}
		total += n
	}
	m.mu.Lock()
	run.total = done0 + total
	m.mu.Unlock()
}

// countLeft estimates the documents left to copy of ns after last.
func (r *reader) countLeft(ctx context.Context, ns string, filter bson.Raw, last bson.RawValue) (int64, error) {
	db, name, _ := strings.Cut(ns, ".")
	coll := r.s.client.Database(db).Collection(name)
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if filter == nil && last.Type == 0 {
		return coll.EstimatedDocumentCount(ctx)
	}
	return coll.CountDocuments(ctx, chunkQuery(filter, last, true))
}

// chunkQuery is the query of the documents after last that filter
// matches. Without expr, _id > last compares within last's BSON type (and
// uses the _id index); with expr, across types in sort order, as the sort
// does.
func chunkQuery(filter bson.Raw, last bson.RawValue, expr bool) any {
	var cond bson.D
	switch {
	case last.Type == 0:
	case expr:
		cond = afterFilter(last)
	default:
		cond = bson.D{{Key: "_id", Value: bson.D{{Key: "$gt", Value: last}}}}
	}
	switch {
	case filter == nil && cond == nil:
		return bson.D{}
	case filter == nil:
		return cond
	case cond == nil:
		return filter
	}
	return bson.D{{Key: "$and", Value: bson.A{filter, cond}}}
}

// readChunk reads the next chunk of c's task, with majority read concern
// in a session whose operation time is the chunk's time.
func (r *reader) readChunk(ctx context.Context, c *chunk) error {
	s := r.s
	db, name, _ := strings.Cut(c.task.ns, ".")
	coll := s.client.Database(db).Collection(name, options.Collection().SetReadConcern(readconcern.Majority()))
	n := c.run.req.Chunk
	c.expr = c.task.probe || c.task.last.Type == 0
	q := chunkQuery(c.run.filter, c.task.last, c.task.probe)
	sess, err := s.client.StartSession(options.Session().SetCausalConsistency(false))
	if err != nil {
		return fmt.Errorf("incremental snapshot of %s: start a session: %w", c.task.ns, err)
	}
	defer sess.EndSession(context.WithoutCancel(ctx))
	sctx := mongo.NewSessionContext(ctx, sess)
	if len(c.task.reread) > 0 {
		ids := make(bson.A, len(c.task.reread))
		for i, d := range c.task.reread {
			ids[i] = d.id
		}
		// Kept until the flush replaces them: a chunk given up (its
		// window too long) reads them again.
		in := bson.D{{Key: "_id", Value: bson.D{{Key: "$in", Value: ids}}}}
		var q any = in
		if c.run.filter != nil {
			q = bson.D{{Key: "$and", Value: bson.A{c.run.filter, in}}}
		}
		if err := c.read(sctx, coll, q, options.Find().SetSort(bson.D{{Key: "_id", Value: 1}})); err != nil || c.err != nil {
			return err
		}
		c.reread = len(c.docs)
	}
	opts := options.Find().SetSort(bson.D{{Key: "_id", Value: 1}}).SetLimit(int64(n)).SetBatchSize(int32(min(n, 10_000)))
	if err := c.read(sctx, coll, q, opts); err != nil || c.err != nil {
		return err
	}
	if t := sess.OperationTime(); t != nil {
		c.at = *t
	} else {
		return fmt.Errorf("incremental snapshot of %s: the server sent no operationTime", c.task.ns)
	}
	c.short = len(c.docs)-c.reread < n
	if len(c.docs) == 0 && c.task.last.Type == 0 {
		// Nothing at all: a collection that does not exist (asked for
		// with the pipeline stopped, or dropped since) fails its snapshot.
		names, err := s.client.Database(db).ListCollectionNames(ctx, bson.D{{Key: "name", Value: name}})
		if err != nil {
			return c.fail(err)
		}
		if len(names) == 0 {
			c.missing = true
		}
	}
	return nil
}

// read appends the documents a find returns to c.
func (c *chunk) read(ctx context.Context, coll *mongo.Collection, q any, opts *options.FindOptionsBuilder) error {
	cur, err := coll.Find(ctx, q, opts)
	if err != nil {
		return c.fail(err)
	}
	defer cur.Close(context.WithoutCancel(ctx))
	for cur.Next(ctx) {
		raw := slices.Clone(cur.Current)
		id, err := raw.LookupErr("_id")
		if err != nil {
			return &permanentError{fmt.Errorf("incremental snapshot: a document of %s has no _id", c.task.ns)}
		}
		idj, err := idJSON(id)
		if err != nil {
			return &permanentError{err}
		}
		key := bsoncore.BuildDocumentFromElements(nil,
			bsoncore.AppendValueElement(nil, "_id", bsoncore.Value{Type: bsoncore.Type(id.Type), Data: id.Value}))
		c.docs = append(c.docs, snapDoc{raw: raw, key: key, idJSON: idj})
		c.ids = append(c.ids, id)
	}
	return c.fail(cur.Err())
}

// fail keeps an error the server answered for the run (a filter it
// refuses, an unauthorized read): the snapshot fails, not the pipeline.
func (c *chunk) fail(err error) error {
	if err == nil || transient(err) || !isServerError(err) {
		return err
	}
	c.err = err
	return nil
}

// window is what the changes of a chunk's window hold.
type window struct {
	events  int               // change events in the window
	changed map[string]bool   // namespace "\x00" _id (type byte + data) of a document changed -> its last change is an update
	ddl     map[string]string // namespace -> why its copy ends (dropped, renamed)
	tooLong bool              // more than isnapWindowMax events
}

func keyOf(ns string, id bson.RawValue) string {
	return ns + "\x00" + string(rune(id.Type)) + string(id.Value)
}

// scanWindow reads the changes after the last position handed out up to
// high, from a second change stream on what the reader watches, and
// records the documents they change. The reader hands these changes out
// afterwards from its own stream, after the chunk's documents.
func (r *reader) scanWindow(ctx context.Context, high bson.Timestamp, nss map[string]bool) (window, error) {
	s := r.s
	w := window{changed: map[string]bool{}, ddl: map[string]string{}}
	o := options.ChangeStream().SetShowExpandedEvents(true).SetMaxAwaitTime(20 * time.Millisecond).SetBatchSize(10_000).SetResumeAfter(r.lastTok)
	var pipeline bson.A
	if s.multi != nil {
		pipeline = append(pipeline, s.multi.filter.stage())
	}
	if len(s.pipeline) > 0 {
		// The user's stages decide which changes the stream carries;
		// they may look at the full document.
		pipeline = append(pipeline, s.pipeline...)
		switch s.cfg.FullDocument {
		case "update_lookup":
			o.SetFullDocument(options.UpdateLookup)
		case "when_available":
			o.SetFullDocument(options.WhenAvailable)
		case "required":
			o.SetFullDocument(options.Required)
		}
	}
	pipeline = append(pipeline, bson.D{{Key: "$project", Value: bson.D{
		{Key: "ns", Value: 1}, {Key: "documentKey", Value: 1}, {Key: "clusterTime", Value: 1},
		{Key: "operationType", Value: 1}, {Key: "to", Value: 1},
	}}})
	var cs *mongo.ChangeStream
	var err error
	switch {
	case s.multi == nil:
		cs, err = s.coll.Watch(ctx, pipeline, o)
	case s.cfg.Database != "":
		cs, err = s.client.Database(s.cfg.Database).Watch(ctx, pipeline, o)
	default:
		cs, err = s.client.Watch(ctx, pipeline, o)
	}
	if err != nil {
		return w, fmt.Errorf("incremental snapshot: open the chunk's window: %w", err)
	}
	defer cs.Close(context.WithoutCancel(ctx))
	deadline := time.Now().Add(time.Minute)
	for {
		if cs.TryNext(ctx) {
			ev := cs.Current
			t, i, _ := ev.Lookup("clusterTime").TimestampOK()
			at := bson.Timestamp{T: t, I: i}
			if tsAfter(at, high) {
				w.events++ // the stream has more
				return w, nil
			}
			w.events++
			if w.events > isnapWindowMax {
				w.tooLong = true
				return w, nil
			}
			db, _ := ev.Lookup("ns", "db").StringValueOK()
			coll, _ := ev.Lookup("ns", "coll").StringValueOK()
			ns := db + "." + coll
			op, _ := ev.Lookup("operationType").StringValueOK()
			switch op {
			case "drop":
				if nss[ns] {
					w.ddl[ns] = "collection " + ns + " was dropped during its snapshot"
				}
			case "rename":
				if nss[ns] {
					w.ddl[ns] = "collection " + ns + " was renamed during its snapshot"
				}
			case "dropDatabase":
				for n := range nss {
					if strings.HasPrefix(n, db+".") {
						w.ddl[n] = "database " + db + " was dropped during the snapshot of " + n
					}
				}
			}
			if !nss[ns] {
				continue
			}
			if id, err := ev.LookupErr("documentKey", "_id"); err == nil {
				w.changed[keyOf(ns, id)] = op == "update"
			}
			continue
		}
		if err := cs.Err(); err != nil {
			return w, fmt.Errorf("incremental snapshot: read the chunk's window: %w", err)
		}
		if t, ok := tokenTimeRaw(cs.ResumeToken()); ok && !tsAfter(high, t) {
			return w, nil
		}
		if time.Now().After(deadline) {
			return w, fmt.Errorf("incremental snapshot: the change stream did not reach the chunk's time %v within a minute", high)
		}
	}
}

// tokenTimeRaw is the cluster time of a resume token.
func tokenTimeRaw(tok bson.Raw) (bson.Timestamp, bool) {
	if len(tok) == 0 {
		return bson.Timestamp{}, false
	}
	data, ok := tok.Lookup("_data").StringValueOK()
	if !ok {
		return bson.Timestamp{}, false
	}
	t, ok := tokenTime(data)
	return bson.Timestamp{T: t.T, I: t.I}, ok
}

func tsAfter(a, b bson.Timestamp) bool { return a.T > b.T || a.T == b.T && a.I > b.I }

// flushChunk hands out the documents of c the window left, and moves its
// task on.
func (r *reader) flushChunk(ctx context.Context, c *chunk, high bson.Timestamp, w *window) error {
	s := r.s
	m := &s.isnap
	if c.err != nil {
		m.mu.Lock()
		if c.run.failWith == "" {
			c.run.failWith = fmt.Sprintf("reading %s: %v", c.task.ns, c.err)
		}
		m.mu.Unlock()
		return nil
	}
	if c.missing {
		m.mu.Lock()
		if c.run.failWith == "" {
			c.run.failWith = "collection " + c.task.ns + " does not exist"
		}
		m.mu.Unlock()
		return nil
	}
	if why := w.ddl[c.task.ns]; why != "" {
		m.mu.Lock()
		if c.run.failWith == "" {
			c.run.failWith = why
		}
		m.mu.Unlock()
		return nil
	}
	m.mu.Lock()
	prefix, suffix := appendISnap(nil, m.runs, c.task)
	m.mu.Unlock()
	tok := tokenJSON(r.lastTok)
	now := time.Now().UnixMilli()
	at := cdc.Timestamp{T: high.T, I: high.I}
	delta := s.cfg.FullDocument == "delta"
	tries := map[string]int{}
	for _, d := range c.task.reread {
		tries[keyOf("", d.id)] = d.tries
	}
	var reread []rereadDoc
	gaveUp := 0
	for i, d := range c.docs {
		if update, ok := w.changed[keyOf(c.task.ns, c.ids[i])]; ok {
			m.dropped.Add(1)
			if n := tries[keyOf("", c.ids[i])] + 1; update && delta && n <= maxRereads {
				reread = append(reread, rereadDoc{c.ids[i], n})
			} else if update && delta {
				gaveUp++
			}
			continue
		}
		progress := d.idJSON
		if i < c.reread {
			// Read again: the task's progress does not move.
			if progress = c.task.lastJSON; progress == nil {
				progress = []byte("null")
			}
		}
		pos := r.isnapPos(tok, prefix, progress, suffix)
		ev := cdc.Event{Op: cdc.OpSnapshot, Namespace: c.task.ns, DocumentKey: d.key, FullDocument: d.raw,
			ClusterTime: at, WallTimeMS: now, Pos: pos}
		ev.Size = len(d.raw) + len(d.key) + len(pos) + eventOverhead
		if err := s.q.push(ctx, ev); err != nil {
			return &permanentError{err}
		}
		m.mu.Lock()
		if i >= c.reread {
			c.task.last, c.task.lastJSON = c.ids[i], d.idJSON
		}
		c.run.done++
		m.mu.Unlock()
		m.rows.Add(1)
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if n := len(c.docs); n > c.reread {
		c.task.last, c.task.lastJSON = c.ids[n-1], c.docs[n-1].idJSON
	}
	if gaveUp > 0 {
		s.log.Warn("incremental snapshot: documents updated in every window; the stream's updates stand for them",
			"snapshot", c.run.req.ID, "namespace", c.task.ns, "documents", gaveUp, "reads", maxRereads+1)
	}
	c.task.reread = reread
	switch {
	case c.short && c.expr && len(reread) > 0:
		// Copied, but for the documents to read again.
	case c.short && c.expr:
		c.run.active = slices.DeleteFunc(c.run.active, func(t *isnapTask) bool { return t == c.task })
		s.log.Info("incremental snapshot: collection copied", "snapshot", c.run.req.ID, "namespace", c.task.ns)
	case c.short:
		c.task.probe = true // past the last _id of its type: look at the next types
	default:
		c.task.probe = false
	}
	r.isnapFrag, _ = appendISnap(r.isnapFrag[:0], m.runs, nil)
	return nil
}

// isnapPos is the resume position after the token tok, with the isnap
// member split around an active _id: prefix, id, suffix.
func (r *reader) isnapPos(tok, prefix, id, suffix []byte) cdc.Position {
	b := make([]byte, 0, len(resumePrefix)+len(tok)+len(prefix)+len(id)+len(suffix)+32)
	b = append(b, resumePrefix...)
	b = append(b, tok...)
	b = append(b, ',')
	b = append(b, prefix...)
	b = append(b, id...)
	b = append(b, suffix...)
	if r.s.multi != nil {
		b = append(b, `,"catalog":`...)
		b = strconv.AppendUint(b, r.epoch, 10)
	}
	return append(b, '}')
}

// isnapMarker hands out a marker at the last position with the
// snapshots' state as it is now, so that a checkpoint records it even
// when the stream is idle.
func (r *reader) isnapMarker(ctx context.Context) error {
	if r.lastTok == nil {
		return nil
	}
	if err := r.s.q.push(ctx, marker(r.resumePos(r.lastTok))); err != nil {
		return &permanentError{err}
	}
	return nil
}

// isnapDDL ends the snapshots copying a collection that the stream says
// was dropped or renamed.
func (r *reader) isnapDDL(ev *cdc.Event) {
	m := &r.s.isnap
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, run := range m.runs {
		for _, t := range run.active {
			switch {
			case ev.Op == cdc.OpDropDatabase && strings.HasPrefix(t.ns, ev.Namespace+"."):
				run.failWith = "database " + ev.Namespace + " was dropped during the snapshot of " + t.ns
			case ev.Namespace == t.ns && ev.Op == cdc.OpDrop:
				run.failWith = "collection " + t.ns + " was dropped during its snapshot"
			case ev.Namespace == t.ns && ev.Op == cdc.OpRename:
				run.failWith = "collection " + t.ns + " was renamed during its snapshot"
			}
		}
	}
}
