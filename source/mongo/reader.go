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

	// Many collections only.
	catalog  catalog         // the captured collections as of the last position handed out
	epoch    uint64          // catalog's epoch, named by every position
	vanished map[string]bool // captured in the checkpoint, gone now, and no drop seen yet
	msnap    *multiSnapshot
}

// resumePos is resumePos, naming the catalog epoch for many collections.
func (r *reader) resumePos(tok bson.Raw) cdc.Position {
	return r.withEpoch(resumePos(tok))
}

func (r *reader) startAfterPos(tok bson.Raw) cdc.Position {
	return r.withEpoch(startAfterPos(tok))
}

// withEpoch turns {...} into {...,"catalog":n} for many collections.
func (r *reader) withEpoch(p cdc.Position) cdc.Position {
	if r.s.multi == nil {
		return p
	}
	p = append(p[:len(p)-1], `,"catalog":`...)
	p = strconv.AppendUint(p, r.epoch, 10)
	return append(p, '}')
}

type snapshotState struct {
	startTok  bson.Raw
	startJSON []byte        // startTok as canonical Extended JSON
	lastID    bson.RawValue // zero before the first document
}

// prepare decides where to start, and opens the stream for a fresh start
// (to take its postBatchResumeToken) or a resume (so that lost history
// fails Open rather than the first Poll).
func (r *reader) prepare(ctx context.Context, pos *position) error {
	s := r.s
	switch {
	case pos == nil:
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
		if s.cfg.Snapshot == "initial" && s.multi != nil {
			cs.Close(context.WithoutCancel(ctx))
			r.msnap = newMultiSnapshot(tok, r.catalog, 0, nil, "")
			r.first = append(r.first, marker(r.msnap.pos(r)))
			s.log.Info("starting with an initial snapshot", "start_token", string(r.msnap.startJSON), "collections", len(r.msnap.plan))
			return nil
		}
		if s.cfg.Snapshot == "initial" {
			// The copy may outlast the cursor's idle timeout; the stream
			// is reopened from tok once the copy is done.
			cs.Close(context.WithoutCancel(ctx))
			r.snap = &snapshotState{startTok: tok, startJSON: tokenJSON(tok)}
			r.first = append(r.first, marker(snapshotPosJSON(r.snap.startJSON, nil)))
			s.log.Info("starting with an initial snapshot", "start_token", string(r.snap.startJSON))
			return nil
		}
		cs.SetBatchSize(s.cfg.BatchSize)
		r.cs, r.lastTok = cs, tok
		r.first = append(r.first, marker(r.resumePos(tok))) // the first checkpoint position
		s.log.Info("starting from now", "start_token", string(tokenJSON(tok)))
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
		s.log.Info("resuming the initial snapshot", "started", ms.next, "collections", len(ms.plan), "active", len(ms.active))
	case pos.Snapshot != nil:
		tok, _ := parseToken("snapshot.start_token", pos.Snapshot.StartToken)
		last, _ := parseLastID(pos.Snapshot.LastID)
		r.snap = &snapshotState{startTok: tok, startJSON: tokenJSON(tok), lastID: last}
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
		if err := s.q.push(ctx, marker(r.resumePos(r.msnap.startTok))); err != nil {
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
		if err := s.q.push(ctx, marker(resumePos(r.snap.startTok))); err != nil {
			return err
		}
		r.lastTok, r.startAfter = r.snap.startTok, false
		r.snap = nil
	}
	return r.streamLoop(ctx, r.cs != nil)
}

// streamLoop streams, reopening after transient errors from the last
// position handed out, at most MaxReconnects times in a row.
func (r *reader) streamLoop(ctx context.Context, opened bool) error {
	s := r.s
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
			return explain(s.ns, err)
		}
		failures++
		lastErr = err
		s.metrics.errors.Add(1)
		if failures > s.cfg.MaxReconnects {
			return fmt.Errorf("change stream on %s: %d consecutive failures, giving up (max_reconnects %d): %w",
				s.ns, failures, s.cfg.MaxReconnects, err)
		}
		return nil
	}
	for {
		if r.cs == nil {
			if failures > 0 {
				d := backoff(failures, s.cfg.BackoffBase, s.cfg.BackoffMax)
				s.log.Warn("change stream failed; reconnecting", "attempt", failures, "in", d, "err", lastErr)
				if err := sleep(ctx, d); err != nil {
					return err
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
		s.log.Info("change stream reopened", "after", string(tokenJSON(r.lastTok)))
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
		if r.next(ctx) {
			progressed = true
			var ev cdc.Event
			var err error
			raw := bson.Raw(cs.Current)
			if s.split {
				var whole []byte
				whole, err = r.frags.add(cs.Current)
				if err == nil && whole == nil {
					continue // more fragments to come
				}
				if whole != nil {
					raw = whole
					ev, err = changeEvent(whole)
				}
			} else {
				ev, err = cloneEvent(cs.Current)
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
				if !deliver {
					// Not captured: a marker keeps the position moving.
					tok := slices.Clone(ev.ResumeToken)
					ev = marker(nil)
					ev.ResumeToken = tok
				} else if err := r.lookupRenamed(ctx, &ev, uuid); err != nil {
					return progressed, err
				}
			}
			ev.Pos = r.resumePos(ev.ResumeToken)
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
	tok := r.cs.ResumeToken()
	if len(tok) == 0 || bytes.Equal(tok, r.lastTok) {
		return nil
	}
	if r.s.multi != nil {
		if err := r.checkVanished(); err != nil {
			return err
		}
	}
	tok = slices.Clone(tok)
	if err := r.s.q.push(ctx, marker(r.resumePos(tok))); err != nil {
		return &permanentError{err}
	}
	r.lastTok, r.startAfter = tok, false
	return nil
}
