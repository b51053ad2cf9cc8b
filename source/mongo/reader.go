package mongo

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"

	"github.com/tide-cdc/tide/cdc"
)

// permanentError marks an error that retrying cannot fix although it is
// not a server error (a malformed event, an event over the budget).
type permanentError struct{ err error }

func (e *permanentError) Error() string { return e.err.Error() }
func (e *permanentError) Unwrap() error { return e.err }

var errCursorClosed = errors.New("change stream cursor closed by the server without an invalidate")

// reader owns the driver cursor; only its goroutine touches its fields
// after Open.
type reader struct {
	s  *Source
	cs *mongo.ChangeStream // nil between streams

	first      []cdc.Event // markers to hand out before anything else
	lastTok    bson.Raw    // token of the last position handed out
	startAfter bool        // lastTok is an invalidate's: reopen with startAfter
	lastDDL    cdc.Op      // the last drop, rename or dropDatabase: what an invalidate follows
	renamedTo  string      // with lastDDL rename: the new namespace
	frags      fragments   // the fragments of a split event read so far
	snap       *snapshotState
	startAt    *bson.Timestamp // with no lastTok: open at this operation time (tide checkpoint set)
	gap        *gapInfo        // a re-snapshot is under way: it ends with a snapshot line

	// Many collections only.
	catalog  catalog                // the captured collections as of the last position handed out
	epoch    uint64                 // catalog's epoch, named by every position
	vanished map[string]bool        // captured in the checkpoint, gone now, and no drop seen yet
	replaced map[string]replacement // captured in the checkpoint, another UUID now, and no drop seen yet
	msnap    *multiSnapshot

	lastNS nsCache // the namespace of the last event, reused by the next

	// isnapFrag is the "isnap" member of stream positions: the progress
	// of the running incremental snapshots; empty when none runs.
	isnapFrag []byte
	signal    string // the signal collection's namespace, if it is captured
	// batchEvents counts the events of the cursor's current batch.
	batchEvents int
}

// resumePos is resumePos, naming the catalog epoch for many collections.
func (r *reader) resumePos(tok bson.Raw) cdc.Position {
	return r.withEpoch(resumePos(tok))
}

func (r *reader) startAfterPos(tok bson.Raw) cdc.Position {
	return r.withEpoch(startAfterPos(tok))
}

// withEpoch turns {...} into {...,"catalog":n} for many collections, and
// adds the progress of running incremental snapshots ("isnap") before it.
func (r *reader) withEpoch(p cdc.Position) cdc.Position {
	if r.s.multi == nil && len(r.isnapFrag) == 0 {
		return p
	}
	p = p[:len(p)-1]
	if len(r.isnapFrag) > 0 {
		p = append(p, ',')
		p = append(p, r.isnapFrag...)
	}
	if r.s.multi != nil {
		p = append(p, `,"catalog":`...)
		p = strconv.AppendUint(p, r.epoch, 10)
	}
	return append(p, '}')
}

type snapshotState struct {
	startTok  bson.Raw
	startJSON []byte        // startTok as canonical Extended JSON
	lastID    bson.RawValue // zero before the first document
	gap       bool          // a re-snapshot (tide snapshot): positions say so
}

// pos is the snapshot position after the document whose _id is idJSON
// (nil: before the first).
func (st *snapshotState) pos(idJSON []byte) cdc.Position {
	p := snapshotPosJSON(st.startJSON, idJSON)
	if st.gap {
		p = gapPos(p)
	}
	return p
}

// gapInfo describes the re-snapshot under way, for its snapshot lines.
type gapInfo struct {
	after     cdc.Timestamp // where the gap began; zero if unknown
	requested string        // when tide snapshot asked, RFC 3339; "" on a resumed copy
}

// prepare decides where to start, and opens the stream for a fresh start
// (to take its postBatchResumeToken) or a resume (so that lost history
// fails Open rather than the first Poll).
func (r *reader) prepare(ctx context.Context, pos *position) error {
	s := r.s
	switch {
	case pos == nil:
		return r.fresh(ctx, s.cfg.Snapshot == "initial")
	case pos.Resnapshot != nil:
		r.gap = &gapInfo{requested: pos.Resnapshot.Requested}
		if a := pos.Resnapshot.After; a != nil {
			r.gap.after = cdc.Timestamp{T: a.T, I: a.I}
		}
		s.log.Info("re-snapshot requested (tide snapshot): copying the collection(s) again", "requested", pos.Resnapshot.Requested)
		return r.fresh(ctx, true)
	case pos.AfterClusterTime != nil:
		at := nextTimestamp(bson.Timestamp{T: pos.AfterClusterTime.T, I: pos.AfterClusterTime.I})
		if err := r.checkStartAt(ctx, at); err != nil {
			return err
		}
		r.startAt = &at
		var cs *mongo.ChangeStream
		err := s.retry(ctx, "open change stream on "+s.ns, func() (err error) {
			cs, err = r.open(ctx, nil, false, s.cfg.BatchSize)
			return err
		})
		if err != nil {
			return err
		}
		r.cs = cs
		s.log.Info("resuming after the cluster time set by tide checkpoint set", "after", fmt.Sprintf("Timestamp(%d, %d)", pos.AfterClusterTime.T, pos.AfterClusterTime.I))
	case pos.Snapshot != nil && s.multi != nil:
		if pos.Snapshot.Next == nil {
			return fmt.Errorf("%w: the checkpoint's snapshot position has no next (it was written by a single-collection source); %s", ErrIdentity, resetHint)
		}
		tok, _ := parseToken("snapshot.start_token", pos.Snapshot.StartToken)
		ms := newMultiSnapshot(tok, r.catalog, *pos.Snapshot.Next, pos.Snapshot.Active, pos.Snapshot.Turn)
		if ms.next > len(ms.plan) {
			return fmt.Errorf("%w: the checkpoint's snapshot.next %d is past its %d collections; %s", ErrIdentity, ms.next, len(ms.plan), resetHint)
		}
		r.msnap = ms
		if pos.Snapshot.Gap {
			ms.gap, r.gap = true, &gapInfo{}
		}
		s.log.Info("resuming the initial snapshot", "started", ms.next, "collections", len(ms.plan), "active", len(ms.active))
	case pos.Snapshot != nil:
		tok, _ := parseToken("snapshot.start_token", pos.Snapshot.StartToken)
		last, _ := parseLastID(pos.Snapshot.LastID)
		r.snap = &snapshotState{startTok: tok, startJSON: tokenJSON(tok), lastID: last, gap: pos.Snapshot.Gap}
		if pos.Snapshot.Gap {
			r.gap = &gapInfo{}
		}
		s.log.Info("resuming the initial snapshot", "last_id", string(pos.Snapshot.LastID))
	default:
		field, j := "resume_token", pos.ResumeToken
		if pos.StartAfterToken != nil {
			field, j = "start_after_token", pos.StartAfterToken
		}
		tok, _ := parseToken(field, j)
		r.lastTok, r.startAfter = tok, pos.StartAfterToken != nil
		var cs *mongo.ChangeStream
		err := s.retry(ctx, "resume change stream on "+s.ns, func() (err error) {
			cs, err = r.open(ctx, tok, r.startAfter, s.cfg.BatchSize)
			return err
		})
		if err != nil {
			return err
		}
		r.cs = cs
		s.log.Info("resuming", field, string(j))
	}
	return nil
}

// fresh starts from now: it opens the stream to take its
// postBatchResumeToken and, with snapshot, prepares a copy of the
// collection(s) from that token (a re-snapshot when r.gap is set).
func (r *reader) fresh(ctx context.Context, snapshot bool) error {
	s := r.s
	var cs *mongo.ChangeStream
	err := s.retry(ctx, "open change stream on "+s.ns, func() (err error) {
		cs, err = r.open(ctx, nil, false, 0)
		if err != nil || s.multi == nil {
			return err
		}
		// The catalog was listed before the token was taken: it is
		// the catalog at the token if listing again finds the same.
		now, err := s.listCaptured(ctx)
		if err == nil && !maps.Equal(now, r.catalog) {
			r.catalog = now
			s.multi.epochs.add(0, now)
			err = errCatalogMoved
		}
		if err != nil {
			cs.Close(context.WithoutCancel(ctx))
		}
		return err
	})
	if err != nil {
		return err
	}
	tok := slices.Clone(cs.ResumeToken())
	if len(tok) == 0 {
		cs.Close(context.WithoutCancel(ctx))
		return fmt.Errorf("open change stream on %s: the server sent no postBatchResumeToken", s.ns)
	}
	if snapshot && s.multi != nil {
		cs.Close(context.WithoutCancel(ctx))
		r.msnap = newMultiSnapshot(tok, r.catalog, 0, nil, "")
		if r.gap != nil {
			r.msnap.gap = true
			r.first = append(r.first, r.gapLines("begin", r.msnap.plan, r.msnap.pos(r), tok)...)
		} else {
			r.first = append(r.first, marker(r.msnap.pos(r)))
		}
		s.log.Info("starting with an initial snapshot", "start_token", string(r.msnap.startJSON), "collections", len(r.msnap.plan))
		return nil
	}
	if snapshot {
		// The copy may outlast the cursor's idle timeout; the stream
		// is reopened from tok once the copy is done.
		cs.Close(context.WithoutCancel(ctx))
		r.snap = &snapshotState{startTok: tok, startJSON: tokenJSON(tok), gap: r.gap != nil}
		if r.gap != nil {
			r.first = append(r.first, r.gapLines("begin", []string{s.ns}, r.snap.pos(nil), tok)...)
		} else {
			r.first = append(r.first, marker(r.snap.pos(nil)))
		}
		s.log.Info("starting with an initial snapshot", "start_token", string(r.snap.startJSON))
		return nil
	}
	cs.SetBatchSize(s.cfg.BatchSize)
	r.cs, r.lastTok = cs, tok
	r.first = append(r.first, marker(r.resumePos(tok))) // the first checkpoint position
	s.log.Info("starting from now", "start_token", string(tokenJSON(tok)))
	return nil
}

func marker(pos cdc.Position) cdc.Event {
	return cdc.Event{Op: cdc.OpMarker, Pos: pos, Size: len(pos) + eventOverhead}
}

// open opens a change stream after tok (nil: from now).
func (r *reader) open(ctx context.Context, tok bson.Raw, startAfter bool, batch int32) (*mongo.ChangeStream, error) {
	cfg := r.s.cfg
	o := options.ChangeStream().
		SetShowExpandedEvents(true).
		SetMaxAwaitTime(cfg.MaxAwait).
		SetBatchSize(batch)
	switch cfg.FullDocument {
	case "update_lookup":
		o.SetFullDocument(options.UpdateLookup)
	case "when_available":
		o.SetFullDocument(options.WhenAvailable)
	case "required":
		o.SetFullDocument(options.Required)
	}
	switch cfg.BeforeChange {
	case "when_available":
		o.SetFullDocumentBeforeChange(options.WhenAvailable)
	case "required":
		o.SetFullDocumentBeforeChange(options.Required)
	}
	if tok == nil && r.startAt != nil {
		o.SetStartAtOperationTime(r.startAt)
	}
	if tok != nil {
		if startAfter {
			o.SetStartAfter(tok)
		} else {
			o.SetResumeAfter(tok)
		}
	}
	var pipeline bson.A
	if r.s.multi != nil {
		pipeline = append(pipeline, r.s.multi.filter.stage())
	}
	pipeline = append(pipeline, r.s.pipeline...)
	if r.s.split {
		pipeline = append(pipeline, bson.D{{Key: splitStage, Value: bson.D{}}})
	}
	switch {
	case r.s.multi == nil:
		return r.s.coll.Watch(ctx, pipeline, o)
	case r.s.cfg.Database != "":
		return r.s.client.Database(r.s.cfg.Database).Watch(ctx, pipeline, o)
	}
	return r.s.client.Watch(ctx, pipeline, o)
}

// run reads until ctx is done or the stream ends or fails, and leaves
// its last word in the queue.
func (r *reader) run(ctx context.Context) {
	err := r.read(ctx)
	if r.cs != nil {
		closeCtx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		r.cs.Close(closeCtx)
		cancel()
		r.cs = nil
	}
	if ctx.Err() != nil {
		err = ctx.Err()
	} else if !errors.Is(err, cdc.ErrEnd) {
		r.s.metrics.errors.Add(1)
	}
	r.s.q.fail(err)
}

func (r *reader) read(ctx context.Context) error {
	s := r.s
	for _, ev := range r.first {
		if err := s.q.push(ctx, ev); err != nil {
			return err
		}
	}
	r.first = nil
	if r.msnap != nil {
		if err := r.snapshotMulti(ctx); err != nil {
			return err
		}
		if err := r.snapshotDone(ctx, r.msnap.plan, r.resumePos(r.msnap.startTok), r.msnap.startTok); err != nil {
			return err
		}
		r.lastTok, r.startAfter = r.msnap.startTok, false
		r.msnap = nil
	}
	if r.snap != nil {
		if err := r.snapshot(ctx); err != nil {
			return err
		}
		// The copy is complete: from here on, a restart streams from the
		// token taken before the copy began.
		if err := r.snapshotDone(ctx, []string{s.ns}, resumePos(r.snap.startTok), r.snap.startTok); err != nil {
			return err
		}
		r.lastTok, r.startAfter = r.snap.startTok, false
		r.snap = nil
	}
	return r.streamLoop(ctx, r.cs != nil)
}

// snapshotDone hands out the position that streams from the start token
// once the copy is complete: a marker, or after a re-snapshot, a snapshot
// line per namespace saying that the gap is closed.
func (r *reader) snapshotDone(ctx context.Context, namespaces []string, pos cdc.Position, tok bson.Raw) error {
	evs := []cdc.Event{marker(pos)}
	if r.gap != nil {
		evs = r.gapLines("end", namespaces, pos, tok)
		r.s.log.Info("re-snapshot complete: the gap is closed", "collections", len(namespaces))
		r.gap = nil
	}
	for _, ev := range evs {
		if err := r.s.q.push(ctx, ev); err != nil {
			return err
		}
	}
	return nil
}

// gapLines are a re-snapshot's snapshot lines, one per namespace: events
// of op snapshot without a document, whose _extra says
// {resnapshot: "begin"|"end", gap_after: <cluster time the gap began>,
// requested: <when tide snapshot asked>}, so that a reader of the output
// sees that the documents between begin and end are a re-copy closing a
// gap in the change history. All carry pos.
func (r *reader) gapLines(phase string, namespaces []string, pos cdc.Position, tok bson.Raw) []cdc.Event {
	extra := bson.D{{Key: "resnapshot", Value: phase}}
	if g := r.gap; g != nil && g.after.T != 0 {
		extra = append(extra, bson.E{Key: "gap_after", Value: bson.Timestamp{T: g.after.T, I: g.after.I}})
	}
	if g := r.gap; g != nil && g.requested != "" {
		extra = append(extra, bson.E{Key: "requested", Value: g.requested})
	}
	raw, err := bson.Marshal(extra)
	if err != nil {
		panic(fmt.Sprintf("mongosource: marshal a snapshot line: %v", err)) // strings and a timestamp
	}
	at := startTime(tok)
	now := time.Now().UnixMilli()
	evs := make([]cdc.Event, 0, len(namespaces))
	for _, ns := range namespaces {
		ev := cdc.Event{Op: cdc.OpSnapshot, Namespace: ns, ClusterTime: at, WallTimeMS: now, Extra: raw, Pos: pos}
		ev.Size = len(raw) + len(ns) + len(pos) + eventOverhead
		evs = append(evs, ev)
	}
	return evs
}

// startTime is the cluster time of a snapshot's start token. A
// re-snapshot's documents carry it, so that a mirror sink can tell the
// rows copied again (at or after it) from those the copy did not find
// (before it: deleted during the gap).
func startTime(tok bson.Raw) cdc.Timestamp {
	data, _ := bson.Raw(tok).Lookup("_data").StringValueOK()
	ts, _ := tokenTime(data)
	return ts
}

// nextTimestamp is the cluster time right after ts.
func nextTimestamp(ts bson.Timestamp) bson.Timestamp {
	if ts.I == ^uint32(0) {
		return bson.Timestamp{T: ts.T + 1}
	}
	return bson.Timestamp{T: ts.T, I: ts.I + 1}
}

// checkStartAt checks a cluster time set by tide checkpoint set against
// the oplog window, where the server lets it be read: older than the
// first entry is lost history, later than the newest entry and the clock
// is a mistake (a time zone, a typo) that would skip changes yet to come.
func (r *reader) checkStartAt(ctx context.Context, at bson.Timestamp) error {
	s := r.s
	first, last, ok, err := readOplogWindow(ctx, s.client, s.cfg.ConnectTimeout)
	if err != nil || !ok {
		s.log.Info("cannot read the oplog window to check the cluster time set by tide checkpoint set; the server checks it", "err", err)
		return nil
	}
	show := func(t cdc.Timestamp) string {
		return fmt.Sprintf("Timestamp(%d, %d) (%s)", t.T, t.I, time.Unix(int64(t.T), 0).UTC().Format(time.RFC3339))
	}
	set := cdc.Timestamp{T: at.T, I: at.I}
	if at.I == 0 {
		set = cdc.Timestamp{T: at.T - 1, I: ^uint32(0)}
	} else {
		set.I--
	}
	if tsBefore(cdc.Timestamp{T: at.T, I: at.I}, first) {
		return fmt.Errorf("%w on %s (286 ChangeStreamHistoryLost): the checkpoint's cluster time %s, set by tide checkpoint set, "+
			"is older than the oldest oplog entry %s: the changes after it are no longer in the oplog; "+
			"set a time inside the oplog window (%s to %s) with tide checkpoint set -f FILE --cluster-time T, "+
			"or re-snapshot: tide snapshot -f FILE", ErrHistoryLost, s.ns, show(set), show(first), show(first), show(last))
	}
	if now := uint32(time.Now().Unix()); set.T > last.T && set.T > now+60 {
		return fmt.Errorf("%w on %s: the checkpoint's cluster time %s, set by tide checkpoint set, is in the future "+
			"(the newest oplog entry is %s): resuming there would skip the changes made until then; "+
			"set a time inside the oplog window (%s to %s) with tide checkpoint set -f FILE --cluster-time T",
			ErrIdentity, s.ns, show(set), show(last), show(first), show(last))
	}
	return nil
}

func tsBefore(a, b cdc.Timestamp) bool { return a.T < b.T || a.T == b.T && a.I < b.I }

// streamLoop streams, reopening after transient errors from the last
// position handed out, under the retry policy (and at most MaxReconnects
// times in a row, where set).
func (r *reader) streamLoop(ctx context.Context, opened bool) error {
	s := r.s
	b := s.backoff()
	failures := 0
	var lastErr error
	fail := func(err error) error {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		if errors.Is(err, cdc.ErrEnd) {
			return err
		}
		if !transient(err) {
			return explain(s.ns, s.split, err)
		}
		failures++
		lastErr = err
		s.metrics.errors.Add(1)
		if s.cfg.MaxReconnects > 0 && failures > s.cfg.MaxReconnects {
			return fmt.Errorf("change stream on %s: %d consecutive failures, giving up (max_reconnects %d): %w",
				s.ns, failures, s.cfg.MaxReconnects, err)
		}
		return nil
	}
	for {
		if r.cs == nil {
			if failures > 0 {
				if n := b.Attempts(); n == 0 || n%10 == 0 {
					s.log.Warn("change stream failed; reconnecting", "attempt", failures, "err", lastErr)
				}
				if err := b.Fail(ctx, s.heartbeat.explainIfUnreachable(lastErr)); err != nil {
					if ctx.Err() != nil {
						return ctx.Err()
					}
					return fmt.Errorf("change stream on %s: %w", s.ns, err)
				}
			}
			if err := r.reopen(ctx, opened); err != nil {
				if err := fail(err); err != nil {
					return err
				}
				continue
			}
			opened = true
		}
		progressed, err := r.stream(ctx)
		closeCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
		r.cs.Close(closeCtx)
		cancel()
		r.cs = nil
		if progressed {
			failures = 0
			b.Succeed()
		}
		if err := fail(err); err != nil {
			return err
		}
	}
}

// reopen checks that the deployment and the collection are still the
// ones admitted, then opens the stream after the last position.
func (r *reader) reopen(ctx context.Context, again bool) error {
	s := r.s
	l, err := s.admitOnce(ctx)
	if err != nil {
		if errors.Is(err, ErrNotAdmitted) {
			return &permanentError{err}
		}
		return err
	}
	if why := sameLive(s.live, l); why != "" {
		return &permanentError{fmt.Errorf("%w: reconnecting to %s: %s; %s", ErrIdentity, s.ns, why, resetHint)}
	}
	cs, err := r.open(ctx, r.lastTok, r.startAfter, s.cfg.BatchSize)
	if err != nil {
		return err
	}
	r.cs = cs
	if again {
		s.metrics.reconnects.Add(1)
		if r.lastTok != nil {
			s.log.Info("change stream reopened", "after", string(tokenJSON(r.lastTok)))
		} else {
			s.log.Info("change stream reopened", "at_operation_time", r.startAt)
		}
	}
	return nil
}

// stream hands out events until the stream ends (an error wrapping
// ErrInvalidated and cdc.ErrEnd after an invalidate) or fails. progressed
// reports whether any getMore succeeded.
func (r *reader) stream(ctx context.Context) (progressed bool, err error) {
	s := r.s
	cs := r.cs
	// A new stream resumes after the last whole event, so a split event
	// cut short by a failure is read again from its first fragment.
	r.frags.reset()
	for {
		if cs.RemainingBatchLength() == 0 {
			// Between two batches: the incremental snapshots' turn,
			// unless the batch was full: the stream is behind, and a
			// chunk's window would span all it has yet to read.
			behind := r.batchEvents >= int(s.cfg.BatchSize)
			r.batchEvents = 0
			if !behind {
				if err := r.isnapStep(ctx); err != nil {
					return progressed, err
				}
			}
		}
		if r.next(ctx) {
			progressed = true
			r.batchEvents++
			raw, err := r.copyCurrent(cs.Current)
			if err == nil && raw == nil {
				continue // more fragments to come
			}
			var ev cdc.Event
			if err == nil {
				ev, err = changeEvent(raw, &r.lastNS)
			}
			if err != nil {
				return progressed, &permanentError{fmt.Errorf("change stream on %s: %w", s.ns, err)}
			}
			if ev.Op == cdc.OpInvalidate {
				// The stream is over. A restart must use startAfter, as
				// resumeAfter an invalidate is refused.
				ev.Pos = r.startAfterPos(ev.ResumeToken)
				ev.Size += len(ev.Pos)
				if err := s.q.push(ctx, ev); err != nil {
					return progressed, &permanentError{err}
				}
				r.lastTok, r.startAfter = ev.ResumeToken, true
				s.log.Info("change stream invalidated", "after", string(ev.Pos), "cause", string(r.lastDDL))
				return progressed, invalidated(s.ns, r.lastDDL, r.renamedTo)
			}
			switch ev.Op {
			case cdc.OpDrop, cdc.OpRename, cdc.OpDropDatabase:
				r.lastDDL, r.renamedTo = ev.Op, renameTarget(ev)
				if s.isnap.work.Load() {
					r.isnapDDL(&ev)
				}
			}
			if s.multi != nil {
				var uuid []byte
				if _, data, ok := raw.Lookup("collectionUUID").BinaryOK(); ok {
					uuid = data
				}
				deliver, err := r.apply(&ev, uuid)
				if err != nil {
					return progressed, err
				}
				if deliver && ev.Namespace == r.signal && r.signal != "" {
					// A signal: the signal watch takes it; it is not
					// forwarded.
					deliver = false
				}
				if !deliver {
					// Not captured: a marker keeps the position moving,
					// holding neither the event nor its buffer.
					tok := slices.Clone(ev.ResumeToken)
					ev = marker(nil)
					ev.ResumeToken = tok
					raw = nil
				} else if err := r.lookupRenamed(ctx, &ev, uuid); err != nil {
					return progressed, err
				}
			}
			// The position goes in the room copyCurrent left after the
			// event: one allocation per event.
			ev.Pos = r.withEpoch(appendResumePos(raw[len(raw):], ev.ResumeToken))
			ev.Size += len(ev.Pos)
			if err := s.q.push(ctx, ev); err != nil {
				return progressed, &permanentError{err}
			}
			r.lastTok, r.startAfter = ev.ResumeToken, false
			continue
		}
		if err := cs.Err(); err != nil {
			return progressed, err
		}
		if cs.ID() == 0 {
			return progressed, errCursorClosed
		}
		progressed = true
		if err := r.watermark(ctx); err != nil {
			return progressed, err
		}
	}
}

// copyCurrent copies the driver's current document, which the driver
// reuses, into a buffer of the event's own, with room after it for the
// event's position. With the split stage it returns the whole event once
// its last fragment arrived, and nil before.
func (r *reader) copyCurrent(cur bson.Raw) (bson.Raw, error) {
	room := posRoom(cur)
	if r.s.multi != nil {
		room += len(`,"catalog":`) + 20
	}
	if len(r.isnapFrag) > 0 {
		room += len(r.isnapFrag) + 1
	}
	if r.s.split {
		return r.frags.add(cur, room)
	}
	raw := make([]byte, len(cur), len(cur)+room)
	copy(raw, cur)
	return raw, nil
}

// renameTarget returns a rename event's new namespace, "db.coll", or "".
func renameTarget(ev cdc.Event) string {
	if ev.Op != cdc.OpRename || ev.Extra == nil {
		return ""
	}
	to, ok := bson.Raw(ev.Extra).Lookup("to").DocumentOK()
	if !ok {
		return ""
	}
	db, _ := to.Lookup("db").StringValueOK()
	coll, _ := to.Lookup("coll").StringValueOK()
	return db + "." + coll
}

// next is cs.TryNext. A getMore is bounded by the await time plus a
// margin, so that a server that stops answering without closing the
// connection is noticed and the stream reopened.
func (r *reader) next(ctx context.Context) bool {
	if r.cs.RemainingBatchLength() > 0 {
		return r.cs.TryNext(ctx)
	}
	// A timer that cancels, not a deadline: with a deadline the driver
	// switches to client-side operation timeouts and retries failed
	// resumes until the deadline, hiding them from the reconnect logic.
	ctx, cancel := context.WithCancel(ctx)
	t := time.AfterFunc(r.s.cfg.MaxAwait+getMoreMargin, cancel)
	defer func() {
		t.Stop()
		cancel()
	}()
	return r.cs.TryNext(ctx)
}

// getMoreMargin is how much longer than the await time a getMore may take.
const getMoreMargin = 30 * time.Second

// watermark hands out the stream's post-batch resume token as a marker
// when it moved past the last position, so that an idle collection's
// checkpoint advances.
func (r *reader) watermark(ctx context.Context) error {
	if r.frags.pending() {
		// The post-batch token may be a middle fragment's: resuming from
		// it would skip the event's first part.
		return nil
	}
	if r.s.multi != nil {
		// Caught up: a drop the checkpoint's catalog waits for is not
		// in the stream.
		if err := r.checkVanished(); err != nil {
			return err
		}
	}
	tok := r.cs.ResumeToken()
	if len(tok) == 0 || bytes.Equal(tok, r.lastTok) {
		return nil
	}
	tok = slices.Clone(tok)
	if err := r.s.q.push(ctx, marker(r.resumePos(tok))); err != nil {
		return &permanentError{err}
	}
	r.lastTok, r.startAfter = tok, false
	return nil
}
