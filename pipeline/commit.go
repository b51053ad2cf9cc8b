package pipeline

import (
	"context"
	"errors"
	"fmt"
	"time"

	"golang.org/x/sync/errgroup"

	"github.com/tide-cdc/tide/cdc"
)

// commitLoop receives encoded chunks in source order and delivers each
// batch once its last chunk arrived. Two goroutines share the work, so that
// the checkpoint of one batch is saved while the next one is written:
//
//   - the committer (this goroutine) is the only one that calls Put, State
//     and Commit, so at most one batch is written at a time, in order;
//   - the saver, which commitLoop starts and waits for, is the only one
//     that calls Save and Ack, in the same order.
//
// A batch's checkpoint reaches the saver only after its Commit returned,
// and at most saveQueue committed batches wait in the queue, so the saves
// trail the commits by at most saveQueue+1 batches, or by maxSaveSpacing
// for a slow store (saveLoop), and never run ahead of them. A saver that finds several batches waiting saves only
// the newest checkpoint, which covers them all: a slow store (a
// replicated NATS KV bucket) then costs one save per few batches instead
// of holding the committer back.
func (p *Pipeline) commitLoop(ctx context.Context, in <-chan *chunk) error {
	g, ctx := errgroup.WithContext(ctx)
	jobs := make(chan saveJob, saveQueue)
	g.Go(func() error { return p.saveLoop(ctx, jobs) })
	g.Go(func() error {
		defer close(jobs) // the saver finishes what it was given, then returns
		return p.commitChunks(ctx, in, jobs)
	})
	return g.Wait()
}

// saveJob is a committed batch whose checkpoint is still to be saved, or a
// pause barrier that every earlier save has to reach first.
type saveJob struct {
	next    cdc.Checkpoint
	n       int
	nbytes  int
	byNS    []NamespaceCount // for a NamespaceObserver
	started time.Time
	wallMS  int64 // cdc.Event.WallTimeMS of the batch's last change that has one; 0 if none
	barrier *pause
	trace   *batchTrace // with a tracer: the batch's times so far
}

func (p *Pipeline) commitChunks(ctx context.Context, in <-chan *chunk, jobs chan<- saveJob) error {
	var chunks []*chunk
	send := func(j saveJob) error {
		select {
		case jobs <- j:
			return nil
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	for {
		var c *chunk
		select {
		case got, ok := <-in:
			if !ok {
				return nil // the reader stopped; it closed its last batch first
			}
			c = got
		case <-ctx.Done():
			return ctx.Err()
		}
		if c.barrier != nil {
			if err := send(saveJob{barrier: c.barrier}); err != nil {
				return err
			}
			continue
		}
		chunks = append(chunks, c)
		if !c.last {
			continue
		}
		job, err := p.commitBatch(ctx, chunks)
		if err != nil {
			return err
		}
		p.closed.Add(-1)
		b := c.batch
		p.committedHealth(b)
		b.pending = time.Time{}
		for _, c := range chunks {
			p.putChunk(c)
		}
		clear(chunks)
		chunks = chunks[:0]
		clear(b.records[:min(len(b.events), len(b.records))]) // drop references to the events' memory
		clear(b.events)
		b.events = b.events[:0]
		p.free <- b // never blocks: only batchesInFlight buffers exist
		if err := send(job); err != nil {
			return err
		}
	}
}

// commitBatch writes one batch: put its records, unless it has none (a
// batch of markers only), take the sink's state, and commit. It returns the
// checkpoint that now names the batch, for the saver. Every batch is
// committed, markers-only ones too, so that a sink keeping the checkpoint
// in its own transaction sees every checkpoint the store will save.
func (p *Pipeline) commitBatch(ctx context.Context, chunks []*chunk) (saveJob, error) {
	if err := ctx.Err(); err != nil {
		return saveJob{}, err // hard stop: nothing further is committed
	}
	// Gather the records: each chunk wrote its own into the batch's
	// records at its events' offset, so they are already in place unless
	// an earlier chunk had markers or the array grew. Moving them left
	// never overwrites a chunk not yet moved: n <= c.off throughout.
	b := chunks[len(chunks)-1].batch
	var (
		n      int
		nbytes int
		pos    cdc.Position
		wallMS int64 // of the batch's last change that has one
	)
	for i := len(chunks) - 1; i >= 0 && wallMS == 0; i-- {
		evs := chunks[i].Events
		for k := len(evs) - 1; k >= 0 && wallMS == 0; k-- {
			wallMS = evs[k].WallTimeMS
		}
	}
	for _, c := range chunks {
		if len(c.Records) > 0 && (c.off != n || &c.Records[0] != &b.records[n]) {
			copy(b.records[n:], c.Records)
		}
		n += len(c.Records)
		nbytes += len(c.Buf)
		if cp := c.lastPos(); cp != nil {
			pos = cp
		}
	}
	var tr *batchTrace
	if b.trace != nil {
		tr = new(batchTrace)
		*tr = *b.trace
		tr.encodeStart, tr.encodeEnd = encodeTimes(chunks)
	}
	start := time.Now()
	var dead []cdc.DeadLetter
	for _, c := range chunks {
		dead = append(dead, c.dead...)
	}
	if len(dead) > 0 {
		if err := p.setAside(ctx, dead); err != nil {
			return saveJob{}, err
		}
	}
	if n > 0 {
		if err := p.sink.Put(ctx, b.records[:n]); err != nil {
			p.failed(ctx, "put", err)
			p.traceFailed(tr, "put", err)
			return saveJob{}, fmt.Errorf("put %d records: %w", n, err)
		}
	}
	putEnd := time.Now()
	next := cdc.Checkpoint{Source: pos}
	if id, ok := p.src.(cdc.Identifier); ok {
		next.Meta = id.Identity()
	}
	if st, ok := p.sink.(cdc.Stater); ok {
		next.Sink = st.State() // after the last Put, before Commit
	}
	if dl, ok := p.sink.(cdc.DeadLetterSink); ok && len(dead) > 0 && p.cfg.OnError == OnErrorDeadLetter {
		if err := dl.PutDeadLetters(ctx, dead); err != nil {
			p.failed(ctx, "put", err)
			return saveJob{}, fmt.Errorf("put %d dead letters: %w", len(dead), err)
		}
	}
	if err := p.sink.Commit(ctx, next); err != nil {
		if p.cfg.OnError != OnErrorFail && errors.Is(err, cdc.ErrRefused) && ctx.Err() == nil {
			// A record the sink refuses for good: find it (them) by
			// splitting the batch (split.go).
			p.log.Warn("sink refused a record; splitting the batch to find it", "records", n, "err", err)
			if next, err = p.commitSplit(ctx, b.records[:n], dead, next); err != nil {
				p.traceFailed(tr, "commit", err)
				return saveJob{}, err
			}
		} else {
			p.failed(ctx, "commit", err)
			p.traceFailed(tr, "commit", err)
			return saveJob{}, fmt.Errorf("commit %d records: %w", n, err)
		}
	}
	p.commitTook.Store(int64(time.Since(start)))
	j := saveJob{next: next, n: n, nbytes: nbytes, started: start, wallMS: wallMS}
	if tr != nil {
		tr.putStart, tr.putEnd, tr.commitEnd = start, putEnd, time.Now()
		tr.records, tr.bytes, tr.position = n, nbytes, string(pos)
		tr.namespaces = len(countNamespaces(b.records[:n]))
		j.trace = tr
	}
	if _, ok := p.obs.(NamespaceObserver); ok && n > 0 {
		j.byNS = countNamespaces(b.records[:n])
	}
	return j, nil
}

// countNamespaces counts recs by namespace, in order of first appearance.
// Runs of one namespace, the common case, cost a comparison per record.
func countNamespaces(recs []cdc.Record) []NamespaceCount {
	var counts []NamespaceCount
	var index map[string]int // once there are many namespaces
	last := -1
	for i := range recs {
		ns := recs[i].Namespace
		if last >= 0 && counts[last].Namespace == ns {
			counts[last].Records++
			continue
		}
		last = -1
		if index != nil {
			if k, ok := index[ns]; ok {
				last = k
			}
		} else {
			for k := range counts {
				if counts[k].Namespace == ns {
					last = k
					break
				}
			}
		}
		if last < 0 {
			last = len(counts)
			counts = append(counts, NamespaceCount{Namespace: ns})
			if index != nil {
				index[ns] = last
			} else if len(counts) > 16 {
				index = make(map[string]int, 2*len(counts))
				for k, c := range counts {
					index[c.Namespace] = k
				}
			}
		}
		counts[last].Records++
	}
	return counts
}

// saveQueue is how many committed batches may wait for the saver.
const saveQueue = 4

// saveLoop saves the checkpoint of committed batches and then
// acknowledges the source, in commit order, until jobs is closed. The
// batches already waiting when a save starts share it: the newest
// checkpoint names them all. A pause barrier is never passed over.
//
// A store whose saves take a while (a disk flush: the local store; a
// replicated write) is spaced while another batch is closed and on its
// way to the sink: the next save starts no sooner than saveSpacing after
// the last one began, or once no batch is on its way, and the batches
// committed meanwhile share it. So a source that waits for its
// acknowledgements before it delivers more (JetStream at
// max_ack_pending) never waits for a spaced save. Each batch is still committed (fsynced) by the sink
// before its checkpoint is saved; what the spacing saves is the store's
// own flush on every batch, which on one disk queues behind the sink's.
// A barrier or the end of jobs ends the wait at once.
func (p *Pipeline) saveLoop(ctx context.Context, jobs <-chan saveJob) error {
	var group []saveJob
	var barrier *pause    // one taken from jobs while grouping, handled next
	var next time.Time    // the earliest start of the next save
	var timer *time.Timer // for the spacing
	for {
		group = group[:0]
		if barrier == nil {
			j, ok := <-jobs
			if !ok {
				return nil
			}
			if j.barrier != nil {
				p.pauseReached(j.barrier) // every batch before it is committed and saved
				continue
			}
			group = append(group, j)
			var spaced <-chan time.Time // nil: only what is waiting now joins
			if wait := time.Until(next); wait > 0 && p.closed.Load() > 0 {
				if timer == nil {
					timer = time.NewTimer(wait)
				} else {
					timer.Reset(wait)
				}
				spaced = timer.C
			}
		more:
			for {
				var j saveJob
				var ok bool
				if spaced == nil {
					select {
					case j, ok = <-jobs:
					default:
						break more
					}
				} else {
					select {
					case j, ok = <-jobs:
					case <-spaced:
						spaced = nil
						break more
					case <-ctx.Done():
						timer.Stop()
						return ctx.Err()
					}
				}
				if !ok {
					break more
				}
				if j.barrier != nil {
					barrier = j.barrier
					break more
				}
				group = append(group, j)
				if spaced != nil && p.closed.Load() == 0 {
					break more // no batch is on its way to the committer
				}
			}
			if spaced != nil {
				timer.Stop()
			}
			start := time.Now()
			if err := p.saveAndAck(ctx, group); err != nil {
				return err
			}
			next = start.Add(saveSpacing(time.Since(start)))
		}
		if barrier != nil {
			p.pauseReached(barrier)
			barrier = nil
		}
	}
}

// saveSpacing is how long after a save began the next one may begin, for
// a save that took took: none for a store that answers in microseconds
// (memory), nineteen times its duration for one that flushes or
// replicates, so that its saves use at most a twentieth of the time, and
// at most maxSaveSpacing, which bounds how far the checkpoint (and the
// source's acknowledgements) trail the commits. A local store's flush
// takes about as long as the sink's own (half a millisecond here): at
// four times, the old factor, a file sink lost 15% of its throughput to
// the checkpoint; at nineteen, about 5%.
func saveSpacing(took time.Duration) time.Duration {
	if took < 100*time.Microsecond {
		return 0
	}
	return min(19*took, maxSaveSpacing)
}

const maxSaveSpacing = 10 * time.Millisecond

// saveAndAck records that committed batches are durable, with one save of
// the last one's checkpoint.
func (p *Pipeline) saveAndAck(ctx context.Context, group []saveJob) error {
	if err := ctx.Err(); err != nil {
		return err // hard stop: the batches are read again after a restart
	}
	j := group[len(group)-1]
	pos := j.next.Source
	// The invariant: the sink has made every event up to pos durable, so
	// only now is the checkpoint naming pos saved, and only once it is
	// saved is the source told it may forget those events. A failed save
	// fails the pipeline with no acknowledgement.
	tracing := p.cfg.Tracer != nil
	var saveStart, saveEnd, ackStart, ackEnd time.Time
	if tracing {
		saveStart = time.Now()
	}
	if p.store != nil {
		if err := p.store.Save(ctx, p.cfg.Name, j.next); err != nil {
			p.failed(ctx, "save", err)
			p.traceFailed(j.trace, "checkpoint save", err)
			return fmt.Errorf("save checkpoint at %s: %w", pos, err)
		}
	}
	if o, ok := p.sink.(cdc.CheckpointObserver); ok {
		o.CheckpointSaved(j.next)
	}
	if tracing {
		saveEnd = time.Now()
	}
	if a, ok := p.src.(cdc.Acker); ok {
		if tracing {
			ackStart = saveEnd
		}
		if err := a.Ack(ctx, pos); err != nil {
			p.failed(ctx, "ack", err)
			p.traceFailed(j.trace, "ack", err)
			return fmt.Errorf("acknowledge source up to %s: %w", pos, err)
		}
		if tracing {
			ackEnd = time.Now()
		}
	}
	if tracing {
		p.traceBatches(group, saveStart, saveEnd, ackStart, ackEnd)
	}

	now := time.Now()
	p.statsMu.Lock()
	for _, j := range group {
		p.stats.EventsOut += int64(j.n)
		p.stats.BytesOut += int64(j.nbytes)
		p.stats.Batches++
		if j.wallMS != 0 {
			p.stats.LastWallTime = time.UnixMilli(j.wallMS)
		}
	}
	p.stats.LastCheckpoint = j.next
	p.stats.LastCommit = now
	p.statsMu.Unlock()
	no, _ := p.obs.(NamespaceObserver)
	for _, b := range group {
		p.obs.Committed(b.n, b.nbytes, now.Sub(b.started), b.next)
		if no != nil && len(b.byNS) > 0 {
			no.CommittedNamespaces(b.byNS)
		}
	}
	return nil
}

// failed reports a stage's failure to the observer, unless it is the
// cancellation of a hard stop.
func (p *Pipeline) failed(ctx context.Context, stage string, err error) {
	if ctx.Err() == nil {
		p.obs.Failed(stage, err)
	}
}

func (p *Pipeline) getChunk() *chunk {
	c, ok := p.chunks.Get().(*chunk)
	if !ok {
		c = &chunk{}
	}
	c.onError, c.cloneOrig = p.cfg.OnError, p.cfg.Transform != nil
	return c
}

// putChunk recycles c, keeping its buffers and dropping its references to
// events.
func (p *Pipeline) putChunk(c *chunk) {
	c.Records = nil // the batch's, not the chunk's
	c.Events = nil
	c.batch = nil
	c.last = false
	c.barrier = nil
	clear(c.dead)
	c.dead = c.dead[:0]
	c.timed = false
	c.encStart, c.encEnd = time.Time{}, time.Time{}
	p.chunks.Put(c)
}

// setAside logs and counts the changes of a batch that failed in the
// encode stage and, for OnErrorDeadLetter with a sink that does not keep
// them itself, writes them to the dead-letter store: durably, before the
// batch commits, so before its checkpoint is saved.
func (p *Pipeline) setAside(ctx context.Context, dead []cdc.DeadLetter) error {
	for _, d := range dead {
		p.log.Warn("change set aside", "on_error", p.cfg.OnError.String(), "stage", d.Stage,
			"namespace", d.Event.Namespace, "position", string(d.Event.Pos), "err", d.Err)
	}
	if p.cfg.OnError == OnErrorDeadLetter {
		if _, ok := p.sink.(cdc.DeadLetterSink); !ok {
			if p.cfg.DeadLetters == nil {
				return fmt.Errorf("on_error: dead_letter: no dead-letter store for %d changes (first: %s)", len(dead), dead[0].Err)
			}
			if err := p.cfg.DeadLetters.Write(ctx, dead); err != nil {
				p.failed(ctx, "dead_letter", err)
				return fmt.Errorf("write %d dead letters: %w", len(dead), err)
			}
		}
	}
	p.statsMu.Lock()
	if p.cfg.OnError == OnErrorDeadLetter {
		p.stats.DeadLetters += int64(len(dead))
	} else {
		p.stats.Skipped += int64(len(dead))
	}
	p.stats.LastError = dead[len(dead)-1].Stage + ": " + dead[len(dead)-1].Err
	p.statsMu.Unlock()
	if o, ok := p.obs.(DeadLetterObserver); ok {
		for _, d := range dead {
			o.SetAside(d.Stage, p.cfg.OnError == OnErrorDeadLetter)
		}
	}
	return nil
}

// DeadLetterObserver is an Observer that wants to count the changes
// on_error set aside: deadLetter is false for skip.
type DeadLetterObserver interface {
	SetAside(stage string, deadLetter bool)
}
