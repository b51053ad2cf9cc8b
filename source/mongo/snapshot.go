package mongo

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/x/bsonx/bsoncore"

	"github.com/tide-cdc/tide/cdc"
	"github.com/tide-cdc/tide/internal/retry"
)

// snapshot copies the collection's documents after r.snap.lastID, in _id
// order, as snapshot events; transient errors resume the copy after the
// last document handed out.
func (r *reader) snapshot(ctx context.Context) error {
	s := r.s
	if n, err := s.coll.EstimatedDocumentCount(ctx); err == nil {
		s.metrics.snapshotTotal.Store(n)
	}
	bar := progressBar{w: s.cfg.Progress, ns: s.ns}
	defer func() { bar.finish(s.metrics.snapshotDone.Load(), s.metrics.snapshotTotal.Load()) }()
	failures := 0
	for {
		progressed, err := r.copy(ctx, &bar)
		if err == nil {
			s.log.Info("initial snapshot done", "documents", s.metrics.snapshotDone.Load())
			return nil
		}
		if ctx.Err() != nil {
			return ctx.Err()
		}
		if !transient(err) {
			return fmt.Errorf("snapshot %s: %w", s.ns, explain(s.ns, s.split, err))
		}
		if progressed {
			failures = 0
		}
		failures++
		s.metrics.errors.Add(1)
		if s.cfg.MaxReconnects > 0 && failures > s.cfg.MaxReconnects {
			return fmt.Errorf("snapshot %s: %d consecutive failures, giving up: %w", s.ns, failures, err)
		}
		d := backoff(failures, s.cfg.BackoffBase, s.cfg.BackoffMax)
		s.log.Warn("snapshot read failed; resuming", "attempt", failures, "in", d, "err", err)
		if err := retry.Sleep(ctx, d); err != nil {
			return err
		}
		l, err := s.admitOnce(ctx)
		if err == nil {
			if why := sameLive(s.live, l); why != "" {
				return fmt.Errorf("%w: snapshot of %s: %s; %s", ErrIdentity, s.ns, why, resetHint)
			}
		}
		s.metrics.reconnects.Add(1)
	}
}

// copy reads the rest of the collection, after the last document handed
// out, to its end: by _id ranges, read ahead at once, handed out in order.
func (r *reader) copy(ctx context.Context, bar *progressBar) (progressed bool, err error) {
	s := r.s
	left := s.metrics.snapshotTotal.Load() - s.metrics.snapshotDone.Load()
	ranges := r.splitRanges(ctx, r.snap.lastID, left)
	if len(ranges) > 1 {
		s.log.Debug("snapshot: copying by _id ranges", "ranges", len(ranges), "parallelism", s.cfg.SnapshotParallelism)
	}
	rctx, cancel := context.WithCancel(ctx)
	var wg sync.WaitGroup
	defer func() { cancel(); wg.Wait() }()
	chans := make([]chan rangeBatch, len(ranges))
	for i := range chans {
		chans[i] = make(chan rangeBatch, rangeBuffer)
	}
	// The launcher starts the ranges in order, SnapshotParallelism at a
	// time: a range's reader ends once this goroutine has taken all of
	// it, which frees the slot of the next.
	wg.Add(1)
	go func() { // owned by copy: cancelled and waited for on return
		defer wg.Done()
		slots := make(chan struct{}, s.cfg.SnapshotParallelism)
		for i, rg := range ranges {
			select {
			case slots <- struct{}{}:
			case <-rctx.Done():
				for _, c := range chans[i:] {
					close(c)
				}
				return
			}
			wg.Add(1)
			go func() { // owned by copy, as the launcher
				defer wg.Done()
				defer func() { <-slots }()
				r.readRange(rctx, rg, chans[i])
			}()
		}
	}()
	for _, c := range chans {
		for b := range c {
			if b.err != nil {
				return progressed, b.err
			}
			for _, raw := range b.docs {
				progressed = true
				if err := r.handOut(ctx, raw, bar); err != nil {
					return progressed, err
				}
			}
		}
		if err := ctx.Err(); err != nil {
			return progressed, err
		}
	}
	return progressed, nil
}

// handOut queues one copied document as a snapshot event.
func (r *reader) handOut(ctx context.Context, raw bson.Raw, bar *progressBar) error {
	s := r.s
	id, err := raw.LookupErr("_id")
	if err != nil {
		return &permanentError{fmt.Errorf("document without _id at position %d", s.metrics.snapshotDone.Load())}
	}
	idj, err := idJSON(id)
	if err != nil {
		return &permanentError{err}
	}
	key := bsoncore.BuildDocumentFromElements(nil,
		bsoncore.AppendValueElement(nil, "_id", bsoncore.Value{Type: bsoncore.Type(id.Type), Data: id.Value}))
	ev := cdc.Event{
		Op:           cdc.OpSnapshot,
		Namespace:    s.ns,
		DocumentKey:  key,
		FullDocument: raw,
		Pos:          r.snap.pos(idj),
	}
	if r.snap.gap {
		ev.ClusterTime = startTime(r.snap.startTok)
	}
	ev.Size = len(raw) + len(key) + len(ev.Pos) + eventOverhead
	if err := s.q.push(ctx, ev); err != nil {
		return &permanentError{err}
	}
	r.snap.lastID = id
	done := s.metrics.snapshotDone.Add(1)
	bar.update(done, s.metrics.snapshotTotal.Load())
	return nil
}

// progressBar draws "snapshot db.coll [####    ] 1200/5000 docs 24%" on a
// terminal, at most every 200 ms.
type progressBar struct {
	w     interface{ Write([]byte) (int, error) }
	ns    string
	drawn time.Time
	used  bool
}

func (b *progressBar) update(done, total int64) {
	if b.w == nil || time.Since(b.drawn) < 200*time.Millisecond {
		return
	}
	b.draw(done, total)
}

func (b *progressBar) draw(done, total int64) {
	b.drawn, b.used = time.Now(), true
	const width = 30
	total = max(total, done)
	filled := width
	pct := 100.0
	if total > 0 {
		filled = int(int64(width) * done / total)
		pct = 100 * float64(done) / float64(total)
	}
	fmt.Fprintf(b.w, "\rsnapshot %s [%s%s] %d/%d docs %3.0f%%", b.ns,
		strings.Repeat("#", filled), strings.Repeat(" ", width-filled), done, total, pct)
}

func (b *progressBar) finish(done, total int64) {
	if b.w == nil {
		return
	}
	b.draw(done, total)
	fmt.Fprintln(b.w)
}
