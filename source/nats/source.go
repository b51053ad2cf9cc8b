package nats

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/tide-cdc/tide/cdc"
)

// Source reads NATS messages as events. It implements cdc.Source,
// cdc.Acker and cdc.Identifier.
type Source struct {
	cfg    Config
	log    *slog.Logger
	m      counters
	report cdc.RetryFunc // SetRetry's; nil outside a pipeline

	nc      *nats.Conn
	ownConn bool
	js      jetstream.JetStream
	cons    jetstream.Consumer
	acks    *acker // nil unless JetStream with explicit acks

	queue *handoff      // reader → Poll, bounded by QueueSize and MaxBufferedBytes; the reader closes it
	ready chan struct{} // one pending wake-up for the runtime
	stop  chan struct{} // closed by Close
	// life bounds the reader's calls to the server; canceled by Close.
	life    context.Context
	endLife context.CancelFunc
	wg      sync.WaitGroup
	// unsubscribe ends a core subscription, whose delivery goroutine the
	// client owns; set by Open, called by Close.
	unsubscribe func()
	// endErr says why the reader stopped; written before queue is closed.
	endErr error

	failed error // a decode failure held back until the next Poll (Poll's goroutine only)

	// settled has a wake-up whenever pending became empty.
	settled chan struct{}

	mu      sync.Mutex   // guards the fields below
	pending []pendingMsg // queued or handed out, not yet acknowledged, in stream order
	closed  bool

	closeOnce sync.Once
	closeErr  error
}

// item is what the reader queues for Poll: an event, or an error that
// stops the pipeline at this point of the stream.
type item struct {
	ev  cdc.Event
	err error

	// JetStream only: the message, acknowledged by Poll if its payload
	// does not decode and the policy skips or dead-letters it.
	msg       jetstream.Msg
	streamSeq uint64
}

// pendingMsg is a message queued and not yet acknowledged.
type pendingMsg struct {
	streamSeq uint64
	msg       jetstream.Msg // its latest delivery
	touched   time.Time     // fetched, or last kept alive with an in-progress ack
}

// New returns a Source for cfg. It does no I/O; Open connects.
func New(cfg Config) *Source {
	cfg.setDefaults()
	s := &Source{
		cfg:     cfg,
		log:     cfg.Logger.With("source", "nats", "mode", cfg.Mode),
		ready:   make(chan struct{}, 1),
		stop:    make(chan struct{}),
		settled: make(chan struct{}, 1),
		queue:   newHandoff(cfg.QueueSize, int64(cfg.MaxBufferedBytes)/4*3),
	}
	s.life, s.endLife = context.WithCancel(context.Background())
	s.m.hook = cfg.Metrics
	return s
}

// Identity names the upstream the positions belong to; the runtime stores
// it with every checkpoint and Open checks it.
func (s *Source) Identity() map[string]string {
	if s.cfg.Mode == modeCore {
		return map[string]string{"source": "nats-core", "subject": s.cfg.Subject}
	}
	return map[string]string{"source": "nats-jetstream", "stream": s.cfg.Stream, "consumer": s.cfg.Consumer}
}

// Stats returns a snapshot of the source's counters.
func (s *Source) Stats() Stats { return s.m.snapshot() }

// Ready implements cdc.Source.
func (s *Source) Ready() <-chan struct{} { return s.ready }

func (s *Source) wake() {
	select {
	case s.ready <- struct{}{}:
	default:
	}
}

// Open connects, checks restored against the configuration, prepares the
// consumer or subscription and starts the reader. ctx bounds the setup.
func (s *Source) Open(ctx context.Context, restored *cdc.Checkpoint) error {
	if err := s.cfg.check(); err != nil {
		return fmt.Errorf("nats source: %w", err)
	}
	if err := s.checkIdentity(restored); err != nil {
		return err
	}
	var startTime time.Time
	if s.cfg.Deliver == "by_start_time" {
		t, err := time.Parse(time.RFC3339, s.cfg.StartTime)
		if err != nil {
			return fmt.Errorf("nats source: start_time %q is not RFC 3339: %w", s.cfg.StartTime, err)
		}
		startTime = t
	}

	s.nc = s.cfg.Conn
	if s.nc == nil {
		nc, err := connect(&s.cfg, s.log)
		if err != nil {
			return err
		}
		s.nc, s.ownConn = nc, true
	}
	var err error
	if s.cfg.Mode == modeCore {
		err = s.openCore(restored)
	} else {
		err = s.openJetStream(ctx, restored, startTime)
	}
	if err != nil && s.ownConn {
		s.nc.Close()
	}
	return err
}

func (s *Source) checkIdentity(restored *cdc.Checkpoint) error {
	if restored == nil || restored.Source == nil {
		return nil
	}
	id := s.Identity()
	keys := []string{"source"} // first, so that a checkpoint of another kind of source says so
	for k := range id {
		if k != "source" {
			keys = append(keys, k)
		}
	}
	slices.Sort(keys[1:])
	for _, k := range keys {
		want := id[k]
		got, ok := restored.Meta[k]
		if !ok {
			return fmt.Errorf("%w: checkpoint has no %q; it was not written by this NATS source", ErrPosition, k)
		}
		if got != want {
			return fmt.Errorf("%w: checkpoint %s is %q, configuration says %q; reset the checkpoint or restore the configuration", ErrPosition, k, got, want)
		}
	}
	return nil
}

// Poll implements cdc.Source. It never waits, except to republish a
// message that does not decode to the dead-letter subject.
//
// Payloads are validated here rather than in the reader, so that the
// reader (network) and Poll (validation) run on two cores.
func (s *Source) Poll(ctx context.Context, buf []cdc.Event, max int) ([]cdc.Event, error) {
	if s.failed != nil {
		return buf, s.failed
	}
	if err := ctx.Err(); err != nil {
		return buf, err
	}
	start := len(buf)
	var taken int   // items taken from the queue, handed out or dropped
	var freed int64 // their bytes, given back to the queue once, on return
	defer func() { s.queue.handed(taken, freed) }()
	for len(buf)-start < max {
		it, ok, end := s.queue.pop()
		if end {
			return buf, s.endErr
		}
		if !ok {
			return buf, nil
		}
		taken++
		freed += int64(it.ev.Size)
		if it.err == nil && s.cfg.Format == "json" && !validJSON(it.ev.Payload) {
			if s.cfg.OnDecodeError == "pipeline" {
				// The pipeline's on_error decides; the message is
				// acknowledged with its batch.
				s.m.add(DecodeErrors, 1)
				it.ev.DecodeErr = fmt.Errorf("%w: not JSON", ErrDecode)
				buf = append(buf, it.ev)
				continue
			}
			it.err = s.decodeFailed(ctx, &it)
			if it.err == nil {
				continue // skipped or dead-lettered
			}
		}
		if it.err != nil {
			s.failed = it.err
			if len(buf) == start {
				return buf, it.err
			}
			// Hand out the events before the failure first, so that
			// they can be committed; fail on the next Poll.
			s.wake()
			return buf, nil
		}
		buf = append(buf, it.ev)
	}
	return buf, nil
}

// decodeFailed applies OnDecodeError to a payload that is not JSON. It
// returns nil when the message was skipped or dead-lettered (and then
// acknowledged), or the error that stops the pipeline.
func (s *Source) decodeFailed(ctx context.Context, it *item) error {
	s.m.add(DecodeErrors, 1)
	derr := fmt.Errorf("%w: not JSON", ErrDecode)
	switch s.cfg.OnDecodeError {
	case "skip":
	case "dead_letter":
		if err := s.deadLetter(ctx, it.ev.Namespace, it.ev.Payload, nats.Header(it.ev.Headers), derr, it.streamSeq); err != nil {
			return err
		}
		s.m.add(DeadLettered, 1)
	default:
		if it.msg == nil {
			return fmt.Errorf("message %s on %s (on_decode_error: fail): %w", it.ev.Pos, it.ev.Namespace, derr)
		}
		return fmt.Errorf("message %d of stream %s on %s (on_decode_error: fail): %w", it.streamSeq, s.cfg.Stream, it.ev.Namespace, derr)
	}
	if it.msg != nil {
		s.forget(it.streamSeq)
		if s.acks != nil {
			s.acks.enqueue([]jetstream.Msg{it.msg})
		}
	}
	return nil
}

// forget drops a message from the pending list: it is acknowledged on its
// own.
func (s *Source) forget(streamSeq uint64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for i := range s.pending {
		if s.pending[i].streamSeq == streamSeq {
			s.pending = slices.Delete(s.pending, i, i+1)
			s.settleLocked()
			return
		}
	}
}

// settleLocked wakes a reader waiting for every handed-out message to be
// acknowledged.
func (s *Source) settleLocked() {
	if len(s.pending) == 0 {
		select {
		case s.settled <- struct{}{}:
		default:
		}
	}
}

// Ack implements cdc.Acker. The runtime calls it only after the sink
// committed every event up to upTo and the checkpoint naming upTo was
// saved: only then may the broker forget the messages. It hands every
// message up to upTo to the asynchronous ack worker and returns.
func (s *Source) Ack(_ context.Context, upTo cdc.Position) error {
	if s.js == nil {
		return nil // core mode
	}
	p, err := parseJSPos(upTo)
	if err != nil {
		return err
	}
	s.mu.Lock()
	n := 0
	for n < len(s.pending) && s.pending[n].streamSeq <= p.StreamSeq {
		n++
	}
	var msgs []jetstream.Msg
	if s.acks != nil {
		msgs = make([]jetstream.Msg, n)
		for i := range n {
			msgs[i] = s.pending[i].msg
		}
	}
	s.pending = append(s.pending[:0:0], s.pending[n:]...)
	s.settleLocked()
	s.mu.Unlock()
	if s.acks != nil {
		s.acks.enqueue(msgs)
	}
	return nil
}

// Close stops the reader, waits for it up to CloseTimeout, gives queued
// and in-flight acks up to CloseTimeout and abandons the rest, then closes
// the connection it opened. No goroutine of the source outlives Close.
func (s *Source) Close() error {
	s.closeOnce.Do(func() {
		close(s.stop)
		s.endLife()
		if s.unsubscribe != nil {
			s.unsubscribe()
		}
		s.mu.Lock()
		s.closed = true
		s.mu.Unlock()

		done := make(chan struct{})
		go func() { s.wg.Wait(); close(done) }()
		t := time.NewTimer(s.cfg.CloseTimeout)
		select {
		case <-done:
		case <-t.C:
			s.log.Warn("reader still running at the close deadline; closing the connection under it", "timeout", s.cfg.CloseTimeout)
		}
		t.Stop()
		if s.acks != nil {
			abandoned := s.m.acksAbandoned.Load()
			if !s.acks.shutdown(s.cfg.CloseTimeout) {
				s.log.Warn("acks still in flight at the close deadline; the broker will redeliver", "timeout", s.cfg.CloseTimeout)
			}
			if n := s.m.acksAbandoned.Load() - abandoned; n > 0 {
				s.log.Info("abandoned queued acks; the broker will redeliver", "messages", n)
			}
		}
		if s.ownConn && s.nc != nil {
			s.nc.Close() // ends a reader stuck in a call
		}
		<-done
	})
	return s.closeErr
}

// jsPos is a JetStream position: the stream sequence of the last message
// handed out, and the time the stream stored it (milliseconds since the
// epoch), by which a restarted pipeline knows its lag before it reads
// anything (PositionTime). Checkpoints written before Tide owned the
// position also carry a consumer_seq, which is ignored; older ones have
// no time.
type jsPos struct {
	StreamSeq uint64 `json:"stream_seq"`
	TimeMS    int64  `json:"ts,omitempty"`
}

func parseJSPos(p cdc.Position) (jsPos, error) {
	var j jsPos
	if err := json.Unmarshal(p, &j); err != nil || j.StreamSeq == 0 {
		return jsPos{}, fmt.Errorf("%w: %q is not a JetStream position {\"stream_seq\":N}", ErrPosition, p)
	}
	return j, nil
}

func appendJSPos(b []byte, streamSeq uint64, timeMS int64) []byte {
	b = append(b, `{"stream_seq":`...)
	b = strconv.AppendUint(b, streamSeq, 10)
	if timeMS > 0 {
		b = append(b, `,"ts":`...)
		b = strconv.AppendInt(b, timeMS, 10)
	}
	return append(b, '}')
}

var _ cdc.PositionTimer = (*Source)(nil)

// PositionTime is the time JetStream stored the message of a position,
// to the millisecond: at a restart the pipeline knows its lag from the
// checkpoint at once. It needs no connection; a core NATS position, or a
// JetStream one written before positions carried the time, has none.
func (s *Source) PositionTime(p cdc.Position) (time.Time, bool) {
	j, err := parseJSPos(p)
	if err != nil || j.TimeMS <= 0 {
		return time.Time{}, false
	}
	return time.UnixMilli(j.TimeMS), true
}

// format is the payload format of every event.
func (s *Source) format() cdc.PayloadFormat {
	switch s.cfg.Format {
	case "string":
		return cdc.PayloadString
	case "raw":
		return cdc.PayloadBase64
	}
	return cdc.PayloadJSON
}

// event builds the event for a message.
func event(subject string, data []byte, h nats.Header, format cdc.PayloadFormat, pos []byte, wall int64) cdc.Event {
	ev := cdc.Event{
		Pos:           pos,
		Op:            cdc.OpInsert,
		Namespace:     subject,
		WallTimeMS:    wall,
		Payload:       data,
		PayloadFormat: format,
	}
	size := len(pos) + len(subject) + len(data) + 64
	if len(h) > 0 {
		ev.Headers = map[string][]string(h)
		for k, vs := range h {
			size += len(k)
			for _, v := range vs {
				size += len(v)
			}
		}
	}
	ev.Size = size
	return ev
}

// deadLetter republishes a message that did not decode, with its headers
// and the error, to the dead-letter subject.
func (s *Source) deadLetter(ctx context.Context, subject string, data []byte, h nats.Header, decodeErr error, streamSeq uint64) error {
	out := nats.NewMsg(s.cfg.DeadLetterSubject)
	out.Data = data
	for k, vs := range h {
		out.Header[k] = vs
	}
	out.Header.Set("Tide-Error", decodeErr.Error())
	out.Header.Set("Tide-Subject", subject)
	if s.js == nil {
		// Core: at-most-once, like the source itself.
		if err := s.nc.PublishMsg(out); err != nil {
			return fmt.Errorf("publish to dead-letter subject %s: %w", s.cfg.DeadLetterSubject, err)
		}
		return nil
	}
	out.Header.Set("Tide-Stream", s.cfg.Stream)
	out.Header.Set("Tide-Stream-Seq", strconv.FormatUint(streamSeq, 10))
	ctx, cancel := context.WithTimeout(ctx, s.cfg.AckTimeout)
	defer cancel()
	// The id makes a republish after a crash a duplicate the stream drops.
	_, err := s.js.PublishMsg(ctx, out, jetstream.WithMsgID(s.cfg.Stream+":"+strconv.FormatUint(streamSeq, 10)))
	if err != nil {
		return fmt.Errorf("publish to dead-letter subject %s (it must be captured by a stream): %w", s.cfg.DeadLetterSubject, err)
	}
	return nil
}
