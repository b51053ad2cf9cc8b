package pipeline

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	goruntime "runtime"
	"sync"
	"sync/atomic"
	"time"

	"go.opentelemetry.io/otel/trace"
	"golang.org/x/sync/errgroup"

	"github.com/tide-cdc/tide/cdc"
)

// Checkpointer stores checkpoints. Package checkpoint provides Dir and Mem;
// a sink that writes the checkpoint in its own transaction provides one
// too. Load is called once, before the sink and the source are opened;
// Save after each batch's Commit returned, from another goroutine than the
// one calling Put and Commit.
//
// It is cdc.CheckpointStore, under the name the runtime has always used.
type Checkpointer = cdc.CheckpointStore

// Observer receives what metrics need; internal/metrics implements it.
// Its methods are called from several of the pipeline's goroutines at once
// and must not block.
type Observer interface {
	// Polled reports events handed out by the source, markers included.
	Polled(n int, bytes int)
	// Committed reports one committed batch: n records (markers excluded),
	// bytes encoded bytes, took the put+commit+save latency, cp the
	// checkpoint that now names the batch.
	Committed(n int, bytes int, took time.Duration, cp cdc.Checkpoint)
	// Failed reports an error at stage "poll", "encode", "put", "commit",
	// "save", "ack" or "close".
	Failed(stage string, err error)
}

// NamespaceObserver is an Observer that also wants each committed batch's
// records counted by namespace (cdc.Event.Namespace). The runtime calls
// CommittedNamespaces after Committed, with the counts in order of first
// appearance in the batch; it must not retain the slice.
type NamespaceObserver interface {
	CommittedNamespaces(counts []NamespaceCount)
}

// NamespaceCount is the number of records of one namespace in a batch.
type NamespaceCount struct {
	Namespace string
	Records   int
}

// Config configures a Pipeline. The zero value of each field means its
// default.
type Config struct {
	Name           string        // pipeline name, the checkpoint key
	MaxRecords     int           // events in a batch, markers included; default 1000
	MaxBytes       int           // default 4 MiB: bounds a batch (by cdc.Event.MemSize), and two batches bound everything in flight
	CommitInterval time.Duration // default 1 s: a batch still filling is closed this long after its first event
	Workers        int           // encode workers; <= 0 means GOMAXPROCS
	Logger         *slog.Logger  // nil = discard
	Observer       Observer      // nil = none

	// Transform, if set, runs on each change in the encode stage, before
	// it is encoded, on the encode workers: a *transform.Chain, or a
	// program's own. A change it drops writes nothing and still advances
	// the checkpoint.
	Transform Transformer
	// OnError says what becomes of a change that fails to transform or to
	// encode: OnErrorFail (the default) stops the pipeline, OnErrorSkip
	// counts and logs it, OnErrorDeadLetter sets it aside, into the sink
	// if it is a cdc.DeadLetterSink, else into DeadLetters.
	OnError OnError
	// DeadLetters keeps the dead letters of a sink that is not a
	// cdc.DeadLetterSink; required by OnErrorDeadLetter with such a sink.
	// The pipeline does not close it.
	DeadLetters cdc.DeadLetterStore
	// Tracer, if set, traces every batch (tide.batch, with its stages as
	// children); nil traces nothing, at no cost.
	Tracer trace.Tracer
	// Retry is the policy given to a source or sink that retries
	// transient errors itself (cdc.Retrier); its zero value retries
	// forever, from 100 ms up to 30 s apart.
	Retry cdc.RetryPolicy
}

// Transformer changes, or drops, a change in place; package transform's
// Chain is one. Apply must be safe for concurrent use and deterministic.
type Transformer interface {
	Apply(ev *cdc.Event) (keep bool, err error)
}

// OnError is what the pipeline does with a change that fails.
type OnError uint8

const (
	OnErrorFail       OnError = iota // stop the pipeline with the error
	OnErrorSkip                      // count and log the change, and go on
	OnErrorDeadLetter                // set the change aside, and go on
)

func (o OnError) String() string {
	switch o {
	case OnErrorSkip:
		return "skip"
	case OnErrorDeadLetter:
		return "dead_letter"
	}
	return "fail"
}

// ParseOnError reads fail, skip or dead_letter.
func ParseOnError(s string) (OnError, error) {
	switch s {
	case "", "fail":
		return OnErrorFail, nil
	case "skip":
		return OnErrorSkip, nil
	case "dead_letter":
		return OnErrorDeadLetter, nil
	}
	return 0, fmt.Errorf("%q is not one of fail, skip, dead_letter", s)
}

// Defaults applied by New.
const (
	DefaultMaxRecords     = 1000
	DefaultMaxBytes       = 4 << 20
	DefaultCommitInterval = time.Second
)

// batchesInFlight is how many batches may exist at once: one being
// committed while the next is read and encoded.
const batchesInFlight = 2

// State is where a Pipeline is in its life.
type State int32

const (
	Starting State = iota // created, or loading the checkpoint and opening both ends
	Running
	Paused
	Draining
	Stopped // Run returned nil
	Failed  // Run returned an error
	// Degraded is Starting or Running with the source or the sink
	// retrying (cdc.Retrier): it returns to Running by itself once the
	// end reports a success or a batch commits.
	Degraded
)

func (s State) String() string {
	switch s {
	case Starting:
		return "starting"
	case Running:
		return "running"
	case Paused:
		return "paused"
	case Draining:
		return "draining"
	case Stopped:
		return "stopped"
	case Failed:
		return "failed"
	case Degraded:
		return "degraded"
	}
	return fmt.Sprintf("state(%d)", int32(s))
}

// Stats is a snapshot of a pipeline's progress.
type Stats struct {
	EventsIn       int64          // events polled from the source, markers included
	EventsOut      int64          // records committed by the sink
	BytesOut       int64          // encoded bytes committed by the sink
	Batches        int64          // committed batches
	LastCheckpoint cdc.Checkpoint // the checkpoint of the last committed batch
	LastCommit     time.Time      // when the last batch committed; zero before the first
	// LastWallTime is the wall-clock time of the last committed change
	// that had one (cdc.Event.WallTimeMS): with millisecond precision,
	// where a cluster time has whole seconds. Zero before the first.
	LastWallTime time.Time
	// DeadLetters and Skipped count the changes set aside or skipped by
	// on_error; LastError is the error of the last one.
	DeadLetters int64
	Skipped     int64
	LastError   string
	// Pending is the time of the oldest change read from the source and
	// not yet committed: its wall time (cdc.Event.WallTimeMS), or when it
	// was read. Zero when none is: the lag is then 0 if CaughtUp, and
	// unknown otherwise (the source is not open yet, or is retrying).
	Pending  time.Time
	CaughtUp bool
}

// Lag is the age of the oldest change not yet committed at now: 0 when
// the source is caught up and nothing is pending; known is false when
// the pipeline cannot tell (before the source is open, or while it
// retries).
func (st Stats) Lag(now time.Time) (lag time.Duration, known bool) {
	switch {
	case !st.Pending.IsZero():
		return max(0, now.Sub(st.Pending)), true
	case st.CaughtUp:
		return 0, true
	}
	return 0, false
}

// Pipeline moves events from one source to one sink. Create it with New;
// it runs once.
type Pipeline struct {
	cfg   Config
	log   *slog.Logger
	obs   Observer
	src   cdc.Source
	enc   EncodeFunc
	sink  cdc.Sink
	store Checkpointer

	ran    atomic.Bool
	opened chan struct{} // closed once Run opened both ends
	done   chan struct{} // closed when Run returns
	err    error         // Run's result, written before done is closed

	free chan *batchBuf // batch buffers not in flight; its capacity bounds batches in flight
	// commitTook is how long the last batch's Put and Commit took: how
	// long the reader lets a caught-up batch linger (reader.caughtUp).
	commitTook atomic.Int64
	closed     atomic.Int32 // batches the reader closed that are not committed yet: the saver may wait for them
	chunks     sync.Pool    // of *chunk

	mu       sync.Mutex // guards the fields below
	state    State
	pause    *pause // the current pause; nil when not paused
	draining bool
	changed  chan struct{} // closed and replaced on every change of paused or draining
	// stopOpening, while Run opens the ends, cancels the opening: a drain
	// before the source is open has nothing to wait for.
	stopOpening context.CancelFunc

	statsMu sync.Mutex // guards stats
	stats   Stats

	health health // the ends' retries and the changes pending
}

// pause is one Pause request. Its reached channel is closed once the
// committer reached the reader's barrier for it, or once Resume lifted it
// first, so that no Pause waits forever.
type pause struct {
	reached chan struct{}
	closed  bool // guarded by Pipeline.mu
}

// releaseLocked closes pr.reached once.
func (pr *pause) releaseLocked() {
	if !pr.closed {
		pr.closed = true
		close(pr.reached)
	}
}

// batchBuf holds the events of one batch and their records; it is
// recycled after the batch commits. Chunk i of a batch reads events[a:b]
// and writes its records into records[a:b], so that a batch without
// markers is put without a copy.
type batchBuf struct {
	events  []cdc.Event
	records []cdc.Record
	pending time.Time   // the time of its oldest change; zero if it has none (yet)
	trace   *batchTrace // with a tracer: the stages' times
}

// recordsFor returns the room for the records of events[a:b]. When records
// must grow, the chunks already given room keep the old array; the
// committer gathers every chunk's records into the new one.
func (b *batchBuf) recordsFor(a, end int) []cdc.Record {
	if end > cap(b.records) {
		b.records = make([]cdc.Record, max(end, 2*cap(b.records), 64))
	}
	return b.records[a:a:end]
}

// New returns a Pipeline reading from src, encoding with enc and writing to
// sink. store keeps the checkpoints: a checkpoint.Dir or checkpoint.Mem,
// or the sink's own when it keeps the checkpoint in its transaction (the
// PostgreSQL sink's Checkpoints). It may be nil to run without checkpoints
// (each start is then fresh). New does no I/O and starts no goroutine.
func New(cfg Config, src cdc.Source, enc EncodeFunc, sink cdc.Sink, store Checkpointer) *Pipeline {
	if src == nil || enc == nil || sink == nil {
		panic("pipeline: New needs a source, an encode function and a sink")
	}
	if cfg.MaxRecords <= 0 {
		cfg.MaxRecords = DefaultMaxRecords
	}
	if cfg.MaxBytes <= 0 {
		cfg.MaxBytes = DefaultMaxBytes
	}
	if cfg.CommitInterval <= 0 {
		cfg.CommitInterval = DefaultCommitInterval
	}
	if cfg.Workers <= 0 {
		cfg.Workers = goruntime.GOMAXPROCS(0)
	}
	log := cfg.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	obs := cfg.Observer
	if obs == nil {
		obs = nopObserver{}
	}
	if cfg.Transform != nil {
		enc = transformThen(cfg.Transform, enc)
	}
	p := &Pipeline{
		cfg: cfg, log: log, obs: obs,
		src: src, enc: enc, sink: sink, store: store,
		opened:  make(chan struct{}),
		done:    make(chan struct{}),
		free:    make(chan *batchBuf, batchesInFlight),
		changed: make(chan struct{}),
	}
	for range batchesInFlight {
		p.free <- &batchBuf{}
	}
	if r, ok := src.(cdc.Retrier); ok {
		r.SetRetry(cfg.Retry, p.reportRetry("source"))
	}
	if r, ok := sink.(cdc.Retrier); ok {
		r.SetRetry(cfg.Retry, p.reportRetry("sink"))
	}
	return p
}

// Run loads the checkpoint, opens the sink and then the source from it, and
// delivers batches until the source ends (cdc.ErrEnd), a Drain completes, a
// stage fails, or ctx is done. It closes the source and the sink before it
// returns, whether or not they opened, and a close error is part of its
// result.
//
// It returns nil after a finite source ended and everything was committed,
// or after a completed Drain. A source that ended with an error wrapping
// cdc.ErrEnd has everything committed too, and Run returns that error. Cancelling ctx is a hard stop: nothing further
// is committed, and because a checkpoint names only committed events, what
// was in flight is read again after a restart.
func (p *Pipeline) Run(ctx context.Context) (err error) {
	if !p.ran.CompareAndSwap(false, true) {
		return errRunTwice
	}
	// The ends open under openCtx, which a drain cancels until the source
	// is open (an end waiting for its server could wait for ever); it
	// lives as long as Run, for ends that keep it.
	openCtx, cancelOpen := context.WithCancel(ctx)
	defer cancelOpen()
	defer func() { p.finish(err) }()
	defer func() { err = errors.Join(err, p.closeEnds()) }()

	p.mu.Lock()
	p.stopOpening = cancelOpen // a drain asked before Run still opens (Opened), then stops
	p.mu.Unlock()
	restored, err := p.open(openCtx)
	if err != nil {
		p.mu.Lock()
		drained := p.draining
		p.mu.Unlock()
		if drained && openCtx.Err() != nil && ctx.Err() == nil {
			p.log.Info("drained before the source was open: nothing was read")
			return nil
		}
		return err
	}
	p.mu.Lock()
	p.stopOpening = nil
	p.mu.Unlock()
	p.sourceOpened()
	p.setRunning(restored)

	g, gctx := errgroup.WithContext(ctx)
	window := 2 * max(p.cfg.Workers, 1)
	chunks := make(chan *chunk, window)
	encoded := make(chan *chunk, window)
	r := &reader{p: p, out: chunks}
	g.Go(func() error { return r.run(gctx) })
	g.Go(func() error {
		err := encodeOrdered(gctx, p.cfg.Workers, p.enc, chunks, encoded)
		if err != nil && gctx.Err() == nil { // an encode error, not another stage's
			p.obs.Failed("encode", err)
		}
		return err
	})
	g.Go(func() error { return p.commitLoop(gctx, encoded) })
	if err := g.Wait(); err != nil {
		return err
	}
	// Everything the source handed out is committed; a source that ended
	// for a reason (an invalidated change stream) says so now.
	return r.endErr
}

// open loads the checkpoint to resume from, then opens the sink and the
// source from it.
func (p *Pipeline) open(ctx context.Context) (*cdc.Checkpoint, error) {
	p.startedHealth()
	restored, err := p.load(ctx)
	if err != nil {
		return nil, err
	}
	p.restoredHealth(restored)
	if err := p.sink.Open(ctx, restored); err != nil {
		return nil, fmt.Errorf("open sink: %w", err)
	}
	if err := p.src.Open(ctx, restored); err != nil {
		return nil, fmt.Errorf("open source: %w", err)
	}
	return restored, nil
}

// load returns the checkpoint to resume from; nil on a fresh start.
func (p *Pipeline) load(ctx context.Context) (*cdc.Checkpoint, error) {
	if p.store == nil {
		return nil, nil
	}
	cp, err := p.store.Load(ctx, p.cfg.Name)
	if err != nil {
		return nil, fmt.Errorf("load checkpoint %q: %w", p.cfg.Name, err)
	}
	return cp, nil
}

// closeEnds closes the source, then the sink.
func (p *Pipeline) closeEnds() error {
	var errs []error
	if err := p.src.Close(); err != nil {
		p.obs.Failed("close", err)
		errs = append(errs, fmt.Errorf("close source: %w", err))
	}
	if err := p.sink.Close(); err != nil {
		p.obs.Failed("close", err)
		errs = append(errs, fmt.Errorf("close sink: %w", err))
	}
	return errors.Join(errs...)
}

func (p *Pipeline) setRunning(restored *cdc.Checkpoint) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.state == Starting {
		p.state = Running
	}
	var pos cdc.Position
	if restored != nil {
		pos = restored.Source
	}
	p.log.Info("pipeline started", "resume_after", string(pos), "workers", p.cfg.Workers)
	close(p.opened)
}

// finish records Run's result and wakes everything waiting for it.
func (p *Pipeline) finish(err error) {
	p.mu.Lock()
	if err != nil {
		p.state = Failed
	} else {
		p.state = Stopped
	}
	p.mu.Unlock()
	p.err = err
	close(p.done)
}

// Opened returns a channel that is closed once Run has loaded the
// checkpoint and opened the sink and the source, as its stages start. If
// Run fails before that, Opened is never closed, so a caller waiting for
// the pipeline to open waits for Done too:
//
//	go p.Run(ctx) // its result: p.Err, once p.Done is closed
//	select {
//	case <-p.Opened():
//		// running
//	case <-p.Done():
//		return p.Err() // it failed to open
//	}
func (p *Pipeline) Opened() <-chan struct{} { return p.opened }

// Done returns a channel that is closed when Run returns, however it
// returns: after a failure to open, a failure while running, the end of
// the source, a completed Drain or the end of Run's context. Err then
// returns Run's result. Until Run is called, Done is not closed.
func (p *Pipeline) Done() <-chan struct{} { return p.done }

type nopObserver struct{}

func (nopObserver) Polled(int, int)                                   {}
func (nopObserver) Committed(int, int, time.Duration, cdc.Checkpoint) {}
func (nopObserver) Failed(string, error)                              {}
