package mongo

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"runtime/debug"
	"sync"
	"sync/atomic"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"

	"github.com/tide-cdc/tide/cdc"
	"github.com/tide-cdc/tide/internal/redact"
)

// Source streams one collection's changes. Create it with New; Open,
// Poll, Ready, Ack and Close follow cdc.Source and cdc.Acker.
type Source struct {
	cfg        Config
	log        *slog.Logger
	ns         string // "db.coll"
	pipeline   bson.A
	streamHash string
	split      bool   // the stream ends with $changeStreamSplitLargeEvent; the reader reassembles fragments
	multi      *multi // nil for one collection

	client *mongo.Client
	coll   *mongo.Collection
	live   live
	ident  map[string]string
	q      *queue
	// statsQ is q for Stats, which may run at any time, Open included.
	statsQ atomic.Pointer[queue]

	stop       context.CancelFunc // stops the reader and the oplog watch
	readerDone chan struct{}      // closed when the reader returned
	oplog      *oplogWatch
	oplogDone  chan struct{} // closed when the oplog watch returned
	signalDone chan struct{} // closed when the signal watch returned (or at once without one)
	closeOnce  sync.Once
	closeErr   error

	metrics counters

	retryPolicy cdc.RetryPolicy // SetRetry's
	retryReport cdc.RetryFunc   // SetRetry's; nil outside a pipeline
	heartbeat   heartbeats      // the driver's last failed heartbeat
	isnap       isnapState      // incremental snapshots
}

// counters are updated by the reader, Poll and Ack, and read by Stats.
type counters struct {
	ops           sync.Map // cdc.Op -> *atomic.Int64, events handed out
	bytesRead     atomic.Int64
	reconnects    atomic.Int64
	errors        atomic.Int64
	snapshotDone  atomic.Int64
	snapshotTotal atomic.Int64
	snapshotNS    sync.Map      // namespace -> *nsProgress, multi-collection snapshots only
	committedT    atomic.Uint64 // cluster time (t<<32|i) of the last acknowledged position
	openedT       atomic.Uint64 // cluster time of the position Open started from, if known
	lastAck       atomic.Int64  // Unix nanoseconds of the last Ack
}

func (c *counters) op(op cdc.Op) *atomic.Int64 {
	if v, ok := c.ops.Load(op); ok {
		return v.(*atomic.Int64)
	}
	v, _ := c.ops.LoadOrStore(op, new(atomic.Int64))
	return v.(*atomic.Int64)
}

// released runs when the reader has filled its budget and the pipeline
// has taken nothing for a while (a stalled sink). The reads that filled
// the queue left garbage (the driver's replies) that no collection would
// free while nothing allocates, resident for as long as the stall lasts:
// collect it now and hand it back to the system, so that the process
// holds about its budget. It runs once per half a budget read, and costs
// one collection.
func (s *Source) released() {
	debug.FreeOSMemory()
	s.log.Debug("the pipeline takes no events: queue full, memory released", "queued_bytes", s.cfg.MaxBufferedBytes)
}

// New returns a source configured by cfg. It does no I/O.
func New(cfg Config) *Source {
	if cfg.FullDocument == "" {
		cfg.FullDocument = "delta"
	}
	if cfg.BeforeChange == "" {
		cfg.BeforeChange = "off"
	}
	if cfg.Snapshot == "" {
		cfg.Snapshot = "initial"
	}
	if cfg.MaxBufferedBytes <= 0 {
		cfg.MaxBufferedBytes = DefaultMaxBufferedBytes
	}
	if cfg.BatchSize <= 0 {
		cfg.BatchSize = DefaultBatchSize
	}
	if cfg.MaxAwait <= 0 {
		cfg.MaxAwait = DefaultMaxAwait
	}
	if cfg.BackoffBase <= 0 {
		cfg.BackoffBase = 100 * time.Millisecond
	}
	if cfg.BackoffMax <= 0 {
		cfg.BackoffMax = 10 * time.Second
	}
	if cfg.ConnectTimeout <= 0 {
		cfg.ConnectTimeout = 10 * time.Second
	}
	if cfg.SnapshotBatch <= 0 {
		cfg.SnapshotBatch = 1000
	}
	if cfg.OplogPoll <= 0 {
		cfg.OplogPoll = DefaultOplogPoll
	}
	log := cfg.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	if cfg.SnapshotParallelism <= 0 {
		cfg.SnapshotParallelism = 2
	}
	ns := cfg.Database + "." + cfg.Collection
	if len(cfg.Collections) > 0 {
		ns = "database " + cfg.Database
		if cfg.Database == "" {
			ns = "the cluster"
		}
	}
	s := &Source{cfg: cfg, log: log.With("source", "mongo", "namespace", ns), ns: ns}
	s.oplog = &oplogWatch{s: s}
	return s
}

// checkConfig validates the configuration New completed: its Validate,
// and what only a running source refuses.
func (s *Source) checkConfig() error {
	errs := []error{s.cfg.Validate()}
	if s.cfg.URI == "embedded" {
		errs = append(errs, errors.New(`uri: "embedded" names the embedded server, which the source does not start: start it (package mongowire) and pass its URI`))
	}
	if len(s.cfg.Collections) > 0 {
		if f, err := newFilter(s.cfg.Database, s.cfg.Collections, s.cfg.Exclude); err == nil {
			s.multi = newMulti(f)
		}
	}
	return errors.Join(errs...)
}

// splitStage is the stage that makes the server cut a change event over
// 16 MiB into fragments, which the reader reassembles.
const splitStage = "$changeStreamSplitLargeEvent"

// parsePipeline reads cfg.Pipeline and returns the stages and their
// canonical Extended JSON, which the stream hash covers. A final
// $changeStreamSplitLargeEvent is taken out of both and reported as
// split: the source adds it itself where the server supports it, so it is
// not part of the hash, and writing it or not makes the same stream.
func parsePipeline(text string) (stages bson.A, canon []byte, split bool, err error) {
	stages, canon, err = parseStages(text)
	if err != nil || len(stages) == 0 {
		return stages, canon, false, err
	}
	last := stages[len(stages)-1].(bson.Raw)
	if last.Index(0).Key() != splitStage {
		return stages, canon, false, nil
	}
	if arg, ok := last.Index(0).Value().DocumentOK(); !ok || len(arg) != 5 {
		return nil, nil, false, fmt.Errorf("pipeline[%d]: %s takes an empty document: {%q: {}}", len(stages)-1, splitStage, splitStage)
	}
	stages = stages[:len(stages)-1]
	if len(stages) == 0 {
		return nil, []byte("[]"), true, nil
	}
	// The canonical form of the remaining stages, exactly as if they had
	// been written alone.
	raw, err := bson.Marshal(bson.D{{Key: "p", Value: stages}})
	if err != nil {
		return nil, nil, false, fmt.Errorf("pipeline: %v", err)
	}
	if canon, err = bson.MarshalExtJSON(bson.Raw(raw), true, false); err != nil {
		return nil, nil, false, fmt.Errorf("pipeline: %v", err)
	}
	return stages, canon, true, nil
}

func parseStages(text string) (bson.A, []byte, error) {
	if text == "" {
		return nil, []byte("[]"), nil
	}
	var wrapper bson.Raw
	if err := bson.UnmarshalExtJSON([]byte(`{"p":`+text+`}`), false, &wrapper); err != nil {
		return nil, nil, fmt.Errorf("pipeline is not a JSON array of stages: %v", err)
	}
	arr, ok := wrapper.Lookup("p").ArrayOK()
	if !ok {
		return nil, nil, errors.New("pipeline is not a JSON array of stages")
	}
	vals, err := arr.Values()
	if err != nil {
		return nil, nil, fmt.Errorf("pipeline: %v", err)
	}
	stages := make(bson.A, 0, len(vals))
	for i, v := range vals {
		d, ok := v.DocumentOK()
		if !ok {
			return nil, nil, fmt.Errorf("pipeline[%d] is %s, not a stage document", i, v.Type)
		}
		elems, _ := d.Elements()
		if len(elems) != 1 {
			return nil, nil, fmt.Errorf("pipeline[%d] must have exactly one key, the stage name", i)
		}
		if elems[0].Key() == splitStage && i != len(vals)-1 {
			return nil, nil, fmt.Errorf("pipeline[%d]: %s must be the last stage", i, splitStage)
		}
		stages = append(stages, d)
	}
	canon, err := bson.MarshalExtJSON(wrapper, true, false)
	if err != nil {
		return nil, nil, fmt.Errorf("pipeline: %v", err)
	}
	return stages, canon, nil
}

// Open connects, admits the deployment and the collection, checks a
// restored checkpoint against them, opens the change stream (or prepares
// the snapshot) and starts the reader. ctx bounds only this setup.
func (s *Source) Open(ctx context.Context, restored *cdc.Checkpoint) (err error) {
	if s.q != nil {
		return errors.New("mongosource: Open called twice")
	}
	if err := s.checkConfig(); err != nil {
		return fmt.Errorf("mongo source %s: %w", s.ns, err)
	}
	stages, canon, splitWritten, err := parsePipeline(string(s.cfg.Pipeline))
	if err != nil {
		return fmt.Errorf("mongo source %s: %w", s.ns, err)
	}
	s.pipeline = stages
	base := streamHash(canon, s.cfg.FullDocument, s.cfg.BeforeChange)
	s.streamHash = base
	if s.multi != nil {
		s.streamHash = multiStreamHash(base, s.multi.filter)
	}
	s.q = newQueue(int64(s.cfg.MaxBufferedBytes))
	s.q.stalled = s.released
	s.statsQ.Store(s.q)
	defer func() {
		if err != nil {
			s.closeClient()
		}
	}()

	uri := s.cfg.URI
	opts := options.Client().ApplyURI(uri).
		SetServerSelectionTimeout(s.cfg.ConnectTimeout).
		SetConnectTimeout(s.cfg.ConnectTimeout).
		SetAppName("tide").
		SetServerMonitor(s.heartbeat.monitor())
	if s.client, err = mongo.Connect(opts); err != nil {
		return fmt.Errorf("connect to %s: %w", redact.String(uri), err)
	}
	if err := s.reach(ctx); err != nil {
		return fmt.Errorf("mongo source %s: %w", s.ns, err)
	}
	if s.multi == nil {
		s.coll = s.client.Database(s.cfg.Database).Collection(s.cfg.Collection)
	}

	if s.live, err = s.admit(ctx); err != nil {
		return err
	}
	s.split = s.live.splitSupported || splitWritten
	if !s.split {
		s.log.Warn("the server cannot split change events over 16 MiB ($changeStreamSplitLargeEvent needs MongoDB 7.0, or 6.0.9 and later); such an event will stop the pipeline",
			"server_version", s.live.serverVersion)
	}
	s.ident = s.identity(s.live)

	var pos *position
	if restored != nil && (len(restored.Source) > 0 || len(restored.Meta) > 0) {
		if len(restored.Source) > 0 {
			p, err := parsePosition(restored.Source)
			if err != nil {
				return fmt.Errorf("%w; %s", err, resetHint)
			}
			pos = &p
			if ts, ok := p.time(); ok {
				s.metrics.openedT.Store(uint64(ts.T)<<32 | uint64(ts.I))
			}
		}
		saved := restored.Meta
		if pos != nil && pos.Resnapshot != nil {
			// A re-snapshot copies the collections as they are now: one
			// dropped and re-created during the gap is fine.
			saved = maps.Clone(saved)
			if saved != nil {
				saved["collection_uuid"] = s.ident["collection_uuid"]
			}
		}
		if s.multi != nil {
			saved = s.narrowed(saved, base, pos)
		}
		if err := checkIdentity(saved, s.ident); err != nil {
			return err
		}
	}

	if restored != nil {
		if err := s.isnap.restore(restored.Meta, pos); err != nil {
			return fmt.Errorf("%w; %s", err, resetHint)
		}
	}
	r := &reader{s: s, signal: s.signalNS()}
	s.isnap.mu.Lock()
	r.isnapFrag, _ = appendISnap(nil, s.isnap.runs, nil)
	s.isnap.mu.Unlock()
	if s.multi != nil {
		catPos := pos
		if pos != nil && pos.Resnapshot != nil {
			catPos = nil // the catalog as of now, as for a fresh start
		}
		if err := r.prepareCatalog(ctx, catPos, restored); err != nil {
			return err
		}
	}
	if err := r.prepare(ctx, pos); err != nil {
		return err
	}
	s.isnap.mu.Lock()
	s.isnap.client = s.client
	s.isnap.mu.Unlock()
	readCtx, stop := context.WithCancel(context.Background())
	s.stop = stop
	s.readerDone = make(chan struct{})
	go func() { // owned by s: Close stops it and waits
		defer close(s.readerDone)
		r.run(readCtx)
	}()
	s.oplogDone = make(chan struct{})
	go func() { // owned by s: Close stops it and waits
		defer close(s.oplogDone)
		s.oplog.run(readCtx)
	}()
	s.signalDone = make(chan struct{})
	if s.signalNS() == "" {
		close(s.signalDone)
	} else {
		// Opened here, so that a signal written once Open returned is
		// seen; from the restored position's time, so that one written
		// while the pipeline was stopped is too.
		var from *bson.Timestamp
		if t := s.metrics.openedT.Load(); t != 0 {
			from = &bson.Timestamp{T: uint32(t >> 32), I: uint32(t)}
		}
		cs, err := s.openSignals(ctx, nil, from)
		if err != nil {
			s.log.Warn("signal collection: cannot open its change stream; retrying", "collection", s.signalNS(), "err", err)
			cs = nil
		}
		go func() { // owned by s: Close stops it and waits
			defer close(s.signalDone)
			s.watchSignals(readCtx, cs, from)
		}()
	}
	return nil
}

// Ready receives a value when Poll may have events or an error.
func (s *Source) Ready() <-chan struct{} { return s.q.ready }

// Poll appends up to max queued events to buf without waiting. After the
// stream ends (an invalidate) or fails, it returns what was queued, then
// cdc.ErrEnd or the error.
func (s *Source) Poll(ctx context.Context, buf []cdc.Event, max int) ([]cdc.Event, error) {
	if err := ctx.Err(); err != nil {
		return buf, err
	}
	n := len(buf)
	buf, err := s.q.poll(buf, max)
	var last cdc.Op
	var counter *atomic.Int64
	for i := n; i < len(buf); i++ {
		ev := &buf[i]
		if ev.Op != last || counter == nil {
			last, counter = ev.Op, s.metrics.op(ev.Op)
		}
		counter.Add(1)
		s.metrics.bytesRead.Add(int64(ev.Size))
	}
	return buf, err
}

// Ack records that the checkpoint naming upTo was saved: it is how the
// source measures lag and checkpoint age. It never fails.
func (s *Source) Ack(_ context.Context, upTo cdc.Position) error {
	if s.multi != nil {
		if e, ok := positionEpoch(upTo); ok {
			s.multi.epochs.ack(e)
		}
	}
	if ts, ok := positionTime(upTo); ok {
		s.metrics.committedT.Store(uint64(ts.T)<<32 | uint64(ts.I))
	}
	s.metrics.lastAck.Store(time.Now().UnixNano())
	s.isnap.ack(upTo)
	return nil
}

// Identity returns the identity the runtime stores in every checkpoint:
// connector, format_version, deployment_id, database, collection,
// collection_uuid and stream_hash; for many collections also collections,
// exclude, and catalog.<n>: the captured collections and their UUIDs as
// of each position not yet known to be saved (a position names its n).
func (s *Source) Identity() map[string]string {
	m := make(map[string]string, len(s.ident)+1)
	for k, v := range s.ident {
		m[k] = v
	}
	if s.multi != nil {
		s.multi.epochs.meta(m)
	}
	s.isnap.identity(m)
	return m
}

// Close stops the reader and closes the cursor and the client. It may be
// called more than once.
func (s *Source) Close() error {
	s.closeOnce.Do(func() {
		s.isnap.mu.Lock()
		s.isnap.client = nil
		s.isnap.mu.Unlock()
		if s.stop != nil {
			s.stop()
			<-s.readerDone
			s.isnap.counting.Wait() // started by the reader, stopped with it
			<-s.oplogDone
			<-s.signalDone
		}
		s.closeErr = s.closeClient()
	})
	return s.closeErr
}

func (s *Source) closeClient() error {
	var errs []error
	if s.client != nil {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		if err := s.client.Disconnect(ctx); err != nil && !errors.Is(err, mongo.ErrClientDisconnected) {
			errs = append(errs, fmt.Errorf("disconnect: %w", err))
		}
		s.client = nil
	}
	return errors.Join(errs...)
}

// Stats is a snapshot of the source's counters.
type Stats struct {
	Events        map[cdc.Op]int64 // events handed to the runtime, by operation (markers included)
	BytesRead     int64            // bytes of those events, as charged to the buffer
	Reconnects    int64            // streams reopened after an error
	Errors        int64            // errors seen (retried or not)
	Buffered      int64            // bytes in the queue now
	PeakBuffered  int64            // most bytes ever in the queue
	SnapshotDone  int64            // documents copied by the snapshot
	SnapshotTotal int64            // estimated documents to copy
	// SnapshotByNamespace is the snapshot progress of each collection,
	// for a source of many collections (nil otherwise).
	SnapshotByNamespace map[string]SnapshotProgress
	Committed           cdc.Timestamp // cluster time of the last committed position; zero before
	LastCommit          time.Time     // when the last checkpoint was saved; zero before
}

// SnapshotProgress is one collection's snapshot progress.
type SnapshotProgress struct {
	Done  int64 // documents copied
	Total int64 // estimated documents to copy
}

// Lag is now minus the cluster time of the last committed position.
func (st Stats) Lag(now time.Time) time.Duration {
	if st.Committed.T == 0 {
		return 0
	}
	return max(0, now.Sub(time.Unix(int64(st.Committed.T), 0)))
}

// CheckpointAge is the time since the last checkpoint was saved.
func (st Stats) CheckpointAge(now time.Time) time.Duration {
	if st.LastCommit.IsZero() {
		return 0
	}
	return now.Sub(st.LastCommit)
}

// Stats returns the source's counters. It is safe to call at any time.
func (s *Source) Stats() Stats {
	st := Stats{
		Events:        map[cdc.Op]int64{},
		BytesRead:     s.metrics.bytesRead.Load(),
		Reconnects:    s.metrics.reconnects.Load(),
		Errors:        s.metrics.errors.Load(),
		SnapshotDone:  s.metrics.snapshotDone.Load(),
		SnapshotTotal: s.metrics.snapshotTotal.Load(),
	}
	s.metrics.snapshotNS.Range(func(k, v any) bool {
		if st.SnapshotByNamespace == nil {
			st.SnapshotByNamespace = map[string]SnapshotProgress{}
		}
		p := v.(*nsProgress)
		st.SnapshotByNamespace[k.(string)] = SnapshotProgress{Done: p.done.Load(), Total: p.total.Load()}
		return true
	})
	s.metrics.ops.Range(func(k, v any) bool {
		st.Events[k.(cdc.Op)] = v.(*atomic.Int64).Load()
		return true
	})
	if q := s.statsQ.Load(); q != nil {
		st.Buffered, st.PeakBuffered = q.usage()
	}
	if t := s.metrics.committedT.Load(); t != 0 {
		st.Committed = cdc.Timestamp{T: uint32(t >> 32), I: uint32(t)}
	}
	if n := s.metrics.lastAck.Load(); n != 0 {
		st.LastCommit = time.Unix(0, n)
	}
	return st
}

var (
	_ cdc.Source     = (*Source)(nil)
	_ cdc.Acker      = (*Source)(nil)
	_ cdc.Identifier = (*Source)(nil)
)
