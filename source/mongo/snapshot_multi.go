package mongo

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"
	"sync/atomic"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"
	"go.mongodb.org/mongo-driver/v2/x/bsonx/bsoncore"
	"golang.org/x/sync/errgroup"

	"github.com/tide-cdc/tide/cdc"
	"github.com/tide-cdc/tide/internal/retry"
)

// multiSnapshot is the progress of the initial snapshot of many
// collections, all from one start token taken before the first copy.
// Up to SnapshotParallelism collections are copied at once, by one
// goroutine each, but their documents reach the queue through the reader
// alone, one at a time, so that each event's position describes every
// document handed out before it: the collections of plan before next
// have been started, those in active are being copied (and resume after
// the _id recorded there), the others are done.
type multiSnapshot struct {
	startTok  bson.Raw
	startJSON []byte
	plan      []string          // the catalog's namespaces, in name order
	next      int               // plan[:next] are started
	active    map[string][]byte // namespace -> canonical JSON of the last _id handed out; nil before the first
	turn      string            // the active namespace whose document comes next
	gap       bool              // a re-snapshot (tide snapshot): positions say so
}

func newMultiSnapshot(tok bson.Raw, cat catalog, next int, active map[string]json.RawMessage, turn string) *multiSnapshot {
	ms := &multiSnapshot{startTok: tok, startJSON: tokenJSON(tok), plan: slices.Sorted(maps.Keys(cat)), next: next, active: map[string][]byte{}, turn: turn}
	for ns, id := range active {
		if len(id) == 0 || string(id) == "null" {
			ms.active[ns] = nil
		} else {
			ms.active[ns] = id
		}
	}
	return ms
}

// pos is the position after everything handed out so far.
func (ms *multiSnapshot) pos(r *reader) cdc.Position {
	b := make([]byte, 0, len(ms.startJSON)+64+len(ms.active)*64)
	b = append(b, `{"snapshot":{"start_token":`...)
	b = append(b, ms.startJSON...)
	b = append(b, `,"next":`...)
	b = fmt.Append(b, ms.next)
	if len(ms.active) > 0 {
		b = append(b, `,"active":{`...)
		for i, ns := range slices.Sorted(maps.Keys(ms.active)) {
			if i > 0 {
				b = append(b, ',')
			}
			k, _ := json.Marshal(ns)
			b = append(b, k...)
			b = append(b, ':')
			if id := ms.active[ns]; id != nil {
				b = append(b, id...)
			} else {
				b = append(b, "null"...)
			}
		}
		b = append(b, '}')
		if ms.turn != "" {
			k, _ := json.Marshal(ms.turn)
			b = append(b, `,"turn":`...)
			b = append(b, k...)
		}
	}
	b = append(b, `}}`...)
	if ms.gap {
		b = gapPos(b)
	}
	return r.withEpoch(b)
}

// snapDoc is one copied document; snapBatch one cursor batch of a
// collection, or, with done, the end of its copy.
type snapDoc struct {
	raw, key []byte
	idJSON   []byte
}

type snapBatch struct {
	ns   string
	docs []snapDoc
	done bool
}

// nsProgress counts one collection's snapshot.
type nsProgress struct{ done, total atomic.Int64 }

func (s *Source) nsProgress(ns string) *nsProgress {
	v, _ := s.metrics.snapshotNS.LoadOrStore(ns, new(nsProgress))
	return v.(*nsProgress)
}

// snapshotMulti copies every collection of the plan not yet done. The
// copies run at once, each a batch ahead, but their documents are handed
// out in turn, one document of each active collection in name order, so
// that the sequence of events, and each event's position, depends only on
// the data and on where the snapshot started: a restart from any of them
// hands out the same events after it as the first run did (unless the
// data changed), as one collection's snapshot does. That keeps positions
// usable as identities downstream (a NATS sink's message ids).
func (r *reader) snapshotMulti(ctx context.Context) error {
	s, ms := r.s, r.msnap
	wctx, cancel := context.WithCancel(ctx)
	defer cancel()
	g, gctx := errgroup.WithContext(wctx)

	slots := map[string]chan snapBatch{} // active namespace -> its copy's batches
	pending := map[string][]snapDoc{}    // docs received and not handed out
	start := func(ns string) {
		ch := make(chan snapBatch, 1)
		slots[ns] = ch
		after := ms.active[ns]
		g.Go(func() error { return r.copyCollection(gctx, ns, after, ch) })
	}
	refill := func() {
		for len(ms.active) < s.cfg.SnapshotParallelism && ms.next < len(ms.plan) {
			ns := ms.plan[ms.next]
			ms.next++
			ms.active[ns] = nil
			start(ns)
		}
	}
	for _, ns := range slices.Sorted(maps.Keys(ms.active)) { // interrupted copies, all of them
		start(ns)
	}
	refill()
	if _, ok := ms.active[ms.turn]; !ok {
		ms.turn = ms.after("")
	}
	bars := newMultiBar(s.cfg.Progress, s)
	var err error
loop:
	for len(ms.active) > 0 {
		ns := ms.turn
		if len(pending[ns]) == 0 {
			select {
			case b := <-slots[ns]:
				if b.done {
					delete(ms.active, ns)
					delete(slots, ns)
					bars.finished(ns)
					refill()
					ms.turn = ms.after(ns)
					continue
				}
				pending[ns] = b.docs
				bars.started(ns)
			case <-gctx.Done():
				break loop
			}
		}
		d := pending[ns][0]
		pending[ns] = pending[ns][1:]
		ms.active[ns] = d.idJSON
		ms.turn = ms.after(ns)
		ev := cdc.Event{Op: cdc.OpSnapshot, Namespace: ns, DocumentKey: d.key, FullDocument: d.raw, Pos: ms.pos(r)}
		if ms.gap {
			ev.ClusterTime = startTime(ms.startTok)
		}
		ev.Size = len(d.raw) + len(d.key) + len(ev.Pos) + eventOverhead
		if err = s.q.push(ctx, ev); err != nil {
			err = &permanentError{err}
			break loop
		}
		s.nsProgress(ns).done.Add(1)
		s.metrics.snapshotDone.Add(1)
		bars.update(false)
	}
	cancel()
	werr := g.Wait()
	bars.update(true)
	if err == nil && werr != nil {
		err = werr
	}
	if err == nil && ctx.Err() != nil {
		err = ctx.Err()
	}
	if err == nil {
		err = r.checkSnapshotPlan(ctx)
	}
	if err == nil {
		s.log.Info("initial snapshot done", "collections", len(ms.plan), "documents", s.metrics.snapshotDone.Load())
	}
	return err
}

// after returns the active namespace after ns in name order, wrapping
// around; "" when none is active.
func (ms *multiSnapshot) after(ns string) string {
	first, next := "", ""
	for k := range ms.active {
		if first == "" || k < first {
			first = k
		}
		if k > ns && (next == "" || k < next) {
			next = k
		}
	}
	if next != "" {
		return next
	}
	return first
}

// checkSnapshotPlan fails when a collection of the snapshot was renamed
// to another captured name, or dropped and re-created, while it was
// copied: the copy may then have missed documents (they moved to the new
// name, which the snapshot does not copy) or taken some of the new
// collection's, which the stream delivers again. A drop alone is fine:
// the stream delivers it.
func (r *reader) checkSnapshotPlan(ctx context.Context) error {
	s := r.s
	var now catalog
	err := s.retry(ctx, "list collections after the snapshot", func() (err error) {
		now, err = s.listCaptured(ctx)
		return err
	})
	if err != nil {
		return err
	}
	byUUID := map[string]string{}
	for ns, id := range now {
		byUUID[id] = ns
	}
	for _, ns := range r.msnap.plan {
		id := r.catalog[ns]
		if other, ok := byUUID[id]; ok && id != "" && other != ns {
			return &permanentError{fmt.Errorf("%w: %s was renamed to %s during the initial snapshot, which may have missed documents; "+
				"start the snapshot again: %s", ErrIdentity, ns, other, resetHint)}
		}
		if cur, ok := now[ns]; ok && cur != id {
			return &permanentError{fmt.Errorf("%w: %s was dropped and re-created during the initial snapshot (UUID %s, now %s), "+
				"so the copy may hold documents of both; start the snapshot again: %s", ErrIdentity, ns, id, cur, resetHint)}
		}
	}
	return nil
}

// copyCollection copies ns after the _id afterJSON (nil: from the
// start), in _id order, sending one batch per cursor batch, then done;
// transient errors resume after the last document sent.
func (r *reader) copyCollection(ctx context.Context, ns string, afterJSON []byte, out chan<- snapBatch) error {
	s := r.s
	db, name, _ := strings.Cut(ns, ".")
	coll := s.client.Database(db).Collection(name)
	after, err := parseLastID(afterJSON)
	if err != nil {
		return &permanentError{fmt.Errorf("snapshot %s: %w", ns, err)}
	}
	prog := s.nsProgress(ns)
	if n, err := coll.EstimatedDocumentCount(ctx); err == nil {
		prog.total.Store(n)
		s.metrics.snapshotTotal.Add(n)
	}
	send := func(b snapBatch) error {
		select {
		case out <- b:
			return nil
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	failures := 0
	for {
		progressed, err := copyBatches(ctx, s, coll, ns, &after, send)
		if err == nil {
			return send(snapBatch{ns: ns, done: true})
		}
		if ctx.Err() != nil {
			return ctx.Err()
		}
		if !transient(err) {
			return fmt.Errorf("snapshot %s: %w", ns, explain(ns, s.split, err))
		}
		if progressed {
			failures = 0
		}
		failures++
		s.metrics.errors.Add(1)
		if s.cfg.MaxReconnects > 0 && failures > s.cfg.MaxReconnects {
			return fmt.Errorf("snapshot %s: %d consecutive failures, giving up: %w", ns, failures, err)
		}
		d := backoff(failures, s.cfg.BackoffBase, s.cfg.BackoffMax)
		s.log.Warn("snapshot read failed; resuming", "namespace", ns, "attempt", failures, "in", d, "err", err)
		if err := retry.Sleep(ctx, d); err != nil {
			return err
		}
		s.metrics.reconnects.Add(1)
	}
}

// copyBatches reads one cursor of a collection's snapshot to its end.
func copyBatches(ctx context.Context, s *Source, coll *mongo.Collection, ns string, after *bson.RawValue, send func(snapBatch) error) (progressed bool, err error) {
	opts := options.Find().SetSort(bson.D{{Key: "_id", Value: 1}}).SetBatchSize(s.cfg.SnapshotBatch)
	cur, err := coll.Find(ctx, afterFilter(*after), opts)
	if err != nil {
		return false, err
	}
	defer cur.Close(context.WithoutCancel(ctx))
	var batch []snapDoc
	var last bson.RawValue
	for cur.Next(ctx) {
		progressed = true
		raw := slices.Clone(cur.Current)
		id, err := raw.LookupErr("_id")
		if err != nil {
			return progressed, &permanentError{fmt.Errorf("a document of %s has no _id", ns)}
		}
		idj, err := idJSON(id)
		if err != nil {
			return progressed, &permanentError{err}
		}
		key := bsoncore.BuildDocumentFromElements(nil,
			bsoncore.AppendValueElement(nil, "_id", bsoncore.Value{Type: bsoncore.Type(id.Type), Data: id.Value}))
		batch = append(batch, snapDoc{raw: raw, key: key, idJSON: idj})
		last = id
		if cur.RemainingBatchLength() == 0 {
			if err := send(snapBatch{ns: ns, docs: batch}); err != nil {
				return progressed, err
			}
			*after, batch = last, nil
		}
	}
	if len(batch) > 0 { // not reached: a batch ends with RemainingBatchLength 0
		if err := send(snapBatch{ns: ns, docs: batch}); err != nil {
			return progressed, err
		}
		*after = last
	}
	if err := cur.Err(); err != nil {
		return progressed, err
	}
	if errors.Is(ctx.Err(), context.Canceled) {
		return progressed, ctx.Err()
	}
	return progressed, nil
}

// multiBar draws one progress bar per collection of a snapshot, "snapshot
// db.coll [####    ] 1200/5000 docs 24%", redrawing the block in place
// (ANSI cursor-up) at most every 200 ms.
type multiBar struct {
	w     io.Writer
	s     *Source
	order []string
	seen  map[string]bool
	done  map[string]bool
	lines int // lines drawn last time
	drawn time.Time
}

func newMultiBar(w io.Writer, s *Source) *multiBar {
	return &multiBar{w: w, s: s, seen: map[string]bool{}, done: map[string]bool{}}
}

func (b *multiBar) started(ns string) {
	if !b.seen[ns] {
		b.seen[ns] = true
		b.order = append(b.order, ns)
	}
}

func (b *multiBar) finished(ns string) {
	b.started(ns)
	b.done[ns] = true
	b.update(false)
}

func (b *multiBar) update(final bool) {
	if b.w == nil || len(b.order) == 0 || (!final && time.Since(b.drawn) < 200*time.Millisecond) {
		return
	}
	b.drawn = time.Now()
	var sb strings.Builder
	if b.lines > 0 {
		fmt.Fprintf(&sb, "\033[%dA", b.lines)
	}
	const width = 30
	for _, ns := range b.order {
		p := b.s.nsProgress(ns)
		done, total := p.done.Load(), p.total.Load()
		if b.done[ns] || total < done {
			total = max(total, done)
		}
		filled, pct := width, 100.0
		if total > 0 {
			filled = int(int64(width) * done / total)
			pct = 100 * float64(done) / float64(total)
		}
		fmt.Fprintf(&sb, "\r\033[Ksnapshot %s [%s%s] %d/%d docs %3.0f%%\n", ns,
			strings.Repeat("#", filled), strings.Repeat(" ", width-filled), done, total, pct)
	}
	b.lines = len(b.order)
	io.WriteString(b.w, sb.String())
}
