package nats

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/tide-cdc/tide/cdc"
)

func (s *Source) consumerConfig(startTime time.Time) jetstream.ConsumerConfig {
	c := jetstream.ConsumerConfig{
		Durable:       s.cfg.Consumer,
		AckPolicy:     jetstream.AckExplicitPolicy,
		AckWait:       s.cfg.AckWait,
		MaxDeliver:    s.cfg.MaxDeliver,
		MaxAckPending: s.cfg.MaxAckPending,
	}
	if s.cfg.Ack == "none" {
		c.AckPolicy = jetstream.AckNonePolicy
	}
	switch len(s.cfg.FilterSubjects) {
	case 0:
	case 1:
		c.FilterSubject = s.cfg.FilterSubjects[0]
	default:
		c.FilterSubjects = s.cfg.FilterSubjects
	}
	switch s.cfg.Deliver {
	case "new":
		c.DeliverPolicy = jetstream.DeliverNewPolicy
	case "by_start_sequence":
		c.DeliverPolicy = jetstream.DeliverByStartSequencePolicy
		c.OptStartSeq = s.cfg.StartSequence
	case "by_start_time":
		c.DeliverPolicy = jetstream.DeliverByStartTimePolicy
		c.OptStartTime = &startTime
	default:
		c.DeliverPolicy = jetstream.DeliverAllPolicy
	}
	return c
}

func (s *Source) openJetStream(ctx context.Context, restored *cdc.Checkpoint, startTime time.Time) error {
	js, err := jetstream.New(s.nc)
	if err != nil {
		return fmt.Errorf("jetstream: %w", err)
	}
	s.js = js
	want := s.consumerConfig(startTime)

	begun := time.Now()
	var restoredPos *jsPos
	if restored != nil && restored.Source != nil {
		p, err := parseJSPos(restored.Source)
		if err != nil {
			return err
		}
		restoredPos = &p
	}

	// Registered before the consumer is repositioned, so that no
	// reconnect after it is missed.
	reconnected := s.nc.StatusChanged(nats.CONNECTED)
	last, err := s.prepare(ctx, restoredPos, want)
	for attempt := 1; err != nil && transient(err) && ctx.Err() == nil; attempt++ {
		// A broken connection or a server still starting is no reason to
		// fail the pipeline: wait for NATS as the sink does, bounded.
		if attempt == 1 {
			s.log.Warn("waiting for jetstream to prepare the consumer", "consumer", s.cfg.Consumer, "stream", s.cfg.Stream, "err", err)
		}
		s.reportRetry(attempt, err)
		if time.Since(begun) > openRetryFor {
			err = fmt.Errorf("%w (retried for %v)", err, openRetryFor)
			break
		}
		t := time.NewTimer(backoff(attempt, jitter()))
		select {
		case <-t.C:
			last, err = s.prepare(ctx, restoredPos, want)
		case <-ctx.Done():
			t.Stop()
			err = fmt.Errorf("%w (then: %w)", err, ctx.Err())
		}
	}
	if err != nil {
		s.nc.RemoveStatusListener(reconnected)
		return err
	}
	s.reportRetry(0, nil) // a no-op for the pipeline unless it retried
	if s.cfg.Ack != "none" {
		s.acks = newAcker(s.log, &s.m, s.cfg.MaxAckPending, s.cfg.AckTimeout)
	}
	s.wg.Add(1)
	go s.readJetStream(last, reconnected)
	if s.acks != nil {
		s.wg.Add(1)
		go s.keepAlive()
	}
	if s.cfg.LagPollInterval > 0 {
		s.wg.Add(1)
		go s.pollLag()
	}
	return nil
}

// openRetryFor bounds how long Open waits for JetStream through transient
// errors (a connection cut, a server restarting), as the sink's default
// max_outage does.
const openRetryFor = 60 * time.Second

// transient reports whether err may pass by itself: a request that timed
// out or found no responder, or a connection between reconnects.
func transient(err error) bool {
	return !errors.Is(err, ErrPosition) && (errors.Is(err, context.DeadlineExceeded) ||
		errors.Is(err, nats.ErrTimeout) || errors.Is(err, nats.ErrNoResponders) ||
		errors.Is(err, nats.ErrDisconnected) ||
		errors.Is(err, nats.ErrConnectionReconnecting) || errors.Is(err, jetstream.ErrJetStreamNotEnabled))
}

// prepare checks and creates or updates the durable consumer, then
// repositions it after the restored position. It returns the stream
// sequence the first delivery must follow.
func (s *Source) prepare(ctx context.Context, restoredPos *jsPos, want jetstream.ConsumerConfig) (uint64, error) {
	js := s.js
	existing, err := js.Consumer(ctx, s.cfg.Stream, s.cfg.Consumer)
	switch {
	case errors.Is(err, jetstream.ErrConsumerNotFound):
		if restoredPos != nil && s.cfg.Deliver != "all" && s.cfg.Deliver != "by_start_sequence" {
			// A consumer created afresh with deliver: new or by_start_time
			// cannot be moved back to the checkpoint.
			return 0, fmt.Errorf("%w: the checkpoint names stream sequence %d of consumer %s on stream %s, but the consumer no longer exists, "+
				"and a new one with deliver: %s cannot start right after the checkpoint; "+
				"reset the Tide checkpoint (tide checkpoint reset) or configure deliver: all",
				ErrPosition, restoredPos.StreamSeq, s.cfg.Consumer, s.cfg.Stream, s.cfg.Deliver)
		}
	case errors.Is(err, jetstream.ErrStreamNotFound):
		return 0, fmt.Errorf("jetstream stream %s: %w", s.cfg.Stream, err)
	case err != nil:
		return 0, fmt.Errorf("look up consumer %s on stream %s: %w", s.cfg.Consumer, s.cfg.Stream, err)
	default:
		if err := sameStart(existing.CachedInfo().Config, want); err != nil {
			return 0, fmt.Errorf("consumer %s on stream %s: %w", s.cfg.Consumer, s.cfg.Stream, err)
		}
	}
	cons, err := js.CreateOrUpdateConsumer(ctx, s.cfg.Stream, want)
	if err != nil {
		return 0, fmt.Errorf("create or update consumer %s on stream %s: %w", s.cfg.Consumer, s.cfg.Stream, err)
	}
	s.cons = cons

	// Tide, not the consumer, owns the position: the consumer is moved to
	// the message after the checkpoint, dropping whatever an earlier
	// reader left unacknowledged, so that the first delivery is the next
	// message in stream order, at once.
	last := uint64(0)
	if restoredPos != nil {
		last = restoredPos.StreamSeq
	}
	return s.reposition(ctx, last, restoredPos != nil)
}

// sameStart refuses an existing consumer whose start differs from the
// configuration: the server cannot change it, and recreating the consumer
// would lose its ack floor.
func sameStart(have, want jetstream.ConsumerConfig) error {
	if have.DeliverPolicy != want.DeliverPolicy {
		return fmt.Errorf("%w: it delivers %v, the configuration says %v; "+
			"a consumer's start cannot change: configure a new consumer name or delete this one", ErrPosition, have.DeliverPolicy, want.DeliverPolicy)
	}
	if have.OptStartSeq != want.OptStartSeq {
		return fmt.Errorf("%w: it starts at sequence %d, the configuration says %d; configure a new consumer name or delete this one",
			ErrPosition, have.OptStartSeq, want.OptStartSeq)
	}
	if (have.OptStartTime == nil) != (want.OptStartTime == nil) ||
		have.OptStartTime != nil && !have.OptStartTime.Equal(*want.OptStartTime) {
		return fmt.Errorf("%w: its start time differs from the configured start_time; configure a new consumer name or delete this one", ErrPosition)
	}
	if have.AckPolicy != want.AckPolicy {
		return fmt.Errorf("%w: its ack policy is %v, the configuration says %v; configure a new consumer name or delete this one",
			ErrPosition, have.AckPolicy, want.AckPolicy)
	}
	return nil
}

// reposition makes the consumer deliver, from its next delivery on, the
// message after stream sequence last, in stream order, with delivery
// sequences starting again at 1. It drops what the server holds as
// delivered and unacknowledged (in flight to a dead connection, or held by
// a crashed reader), so nothing waits for an ack wait to run out.
//
// known says that last is a position the sink holds (a checkpoint, or the
// last message handed out and since committed); without it, the consumer's
// ack floor is the position. It returns the stream sequence the next
// delivery must follow: deliveries at or below it are duplicates.
func (s *Source) reposition(ctx context.Context, last uint64, known bool) (uint64, error) {
	stream, err := s.js.Stream(ctx, s.cfg.Stream)
	if err != nil {
		return 0, fmt.Errorf("jetstream stream %s: %w", s.cfg.Stream, err)
	}
	st := stream.CachedInfo().State
	if known && st.LastSeq < last {
		// The sink holds messages the stream no longer has: the stream
		// was recreated or purged, or the server lost acknowledged
		// writes (file storage without sync_interval: always, and a
		// power cut). Sequences would be reused for other messages.
		return 0, fmt.Errorf("%w: stream %s ends at sequence %d, but Tide already wrote up to %d; "+
			"the stream was recreated or lost messages, and its sequences no longer name what the sink holds: "+
			"reset the Tide checkpoint and the sink's output to read it again", ErrPosition, s.cfg.Stream, st.LastSeq, last)
	}
	if known && st.Msgs > 0 && st.FirstSeq > last+1 {
		s.log.Warn("messages were removed from the stream before Tide read them (max_age, max_msgs, max_bytes, purge or delete)",
			"stream", s.cfg.Stream, "first_seq", st.FirstSeq, "after", last)
	}

	var resp *jetstream.ConsumerResetResponse
	if known && s.cfg.Deliver != "new" {
		resp, err = s.js.ResetConsumerToSequence(ctx, s.cfg.Stream, s.cfg.Consumer, last+1)
		if errors.Is(err, jetstream.ErrConsumerInvalidReset) {
			// Before the configured start sequence or time: the
			// consumer's own floor is as far back as it goes.
			resp, err = nil, nil
		}
	}
	if resp == nil && err == nil {
		resp, err = s.js.ResetConsumer(ctx, s.cfg.Stream, s.cfg.Consumer)
	}
	if err != nil {
		return 0, fmt.Errorf("reset consumer %s on stream %s to the message after stream sequence %d "+
			"(Tide needs a nats-server with the consumer reset API, 2.14 or later): %w", s.cfg.Consumer, s.cfg.Stream, last, err)
	}
	s.m.add(Repositioned, 1)
	if !known {
		return resp.ResetSeq - 1, nil
	}
	if resp.ResetSeq > last+1 {
		return 0, fmt.Errorf("%w: consumer %s on stream %s delivers from stream sequence %d on, but Tide's checkpoint is at %d: "+
			"messages in between were acknowledged by another client, and with deliver: %s the consumer cannot go back; "+
			"reset the Tide checkpoint, or use a consumer that only this pipeline reads",
			ErrPosition, s.cfg.Consumer, s.cfg.Stream, resp.ResetSeq, last, s.cfg.Deliver)
	}
	return last, nil
}

// ensureConsumer creates the durable consumer again if it was deleted
// under the running source: the server answers a reset of a missing
// consumer with silence, not an error.
func (s *Source) ensureConsumer(ctx context.Context) error {
	_, err := s.js.Consumer(ctx, s.cfg.Stream, s.cfg.Consumer)
	if !errors.Is(err, jetstream.ErrConsumerNotFound) {
		return err
	}
	if s.cfg.Deliver == "new" || s.cfg.Deliver == "by_start_time" {
		return fmt.Errorf("%w: consumer %s on stream %s was deleted while the pipeline ran, and a new one with deliver: %s "+
			"cannot start right after what Tide wrote; restart with deliver: all or a reset checkpoint", ErrPosition, s.cfg.Consumer, s.cfg.Stream, s.cfg.Deliver)
	}
	s.log.Warn("consumer was deleted; creating it again", "consumer", s.cfg.Consumer, "stream", s.cfg.Stream)
	cons, err := s.js.CreateOrUpdateConsumer(ctx, s.cfg.Stream, s.cons.CachedInfo().Config)
	if err != nil {
		return fmt.Errorf("create consumer %s on stream %s again: %w", s.cfg.Consumer, s.cfg.Stream, err)
	}
	s.cons = cons
	return nil
}

// errReconnected ends a consumption after the connection came back: what
// was in flight when it broke is lost, so the reader repositions.
var errReconnected = errors.New("reconnected to nats")

// readJetStream pulls messages into the queue until Close or a fatal
// error, with the client's Consume: pull requests of FetchBatch messages,
// each held open by the server for FetchMaxWait (at least 1s), the next
// one sent when half of the current one arrived, all answered on one
// subscription, so that the round trips overlap. The client calls deliver
// for each message on its own goroutine; deliver blocks while the queue is
// full, and the client then sends no further pull requests.
//
// Tide owns the position. deliver hands out only the next expected
// delivery (delivery sequence one above the last); the server delivers
// first deliveries in stream order and skips what does not match the
// filter or was deleted, so a gapless run of delivery sequences is the
// stream in order with nothing missing. Anything else (a delivery lost
// with a broken connection, a redelivery of something missed, a reconnect,
// an error the client reports) ends the consumption. The reader then waits
// until every message it handed out is committed and acknowledged, resets
// the consumer to the message after the last one, and consumes again. No
// guess about ack waits, no message out of order.
func (s *Source) readJetStream(last uint64, reconnected chan nats.Status) {
	defer s.wg.Done()
	defer s.wake()
	defer s.queue.close()
	defer s.nc.RemoveStatusListener(reconnected)

	closed := fmt.Errorf("nats source closed: %w", cdc.ErrEnd)
	d := &deliverer{s: s, format: s.format(), last: last, next: 1, faultCh: make(chan struct{})}
	errs := 0
	for {
		before := d.count.Load()
		cause := s.consume(d, reconnected)
		if d.err != nil {
			s.endErr = d.err
			return
		}
		if cause == nil {
			s.endErr = closed
			return
		}
		if d.count.Load() > before {
			errs = 0 // progress
		}
		s.log.Info("consumption interrupted; repositioning after the last message handed out",
			"consumer", s.cfg.Consumer, "stream_seq", d.last, "cause", cause)
		for {
			if !s.awaitSettled() {
				s.endErr = closed
				return
			}
			if s.nc.IsClosed() {
				s.endErr = fmt.Errorf("read from consumer %s: %w", s.cfg.Consumer, nats.ErrConnectionClosed)
				return
			}
			drain(reconnected) // a reconnect before the reset needs no second one
			rctx, rcancel := context.WithTimeout(s.life, s.cfg.AckTimeout)
			err := s.ensureConsumer(rctx)
			if err == nil {
				_, err = s.reposition(rctx, d.last, true)
			}
			rcancel()
			if err == nil {
				if errs > 0 {
					s.reportRetry(0, nil)
				}
				break
			}
			if errors.Is(err, ErrPosition) || errors.Is(err, jetstream.ErrStreamNotFound) {
				s.endErr = err
				return
			}
			errs++
			s.reportRetry(errs, err)
			wait := backoff(errs, jitter())
			s.log.Warn("reposition consumer; backing off", "consumer", s.cfg.Consumer, "attempt", errs, "wait", wait, "err", err)
			t := time.NewTimer(wait)
			select {
			case <-t.C:
			case <-s.stop:
				t.Stop()
				s.endErr = closed
				return
			}
		}
		d.restart()
	}
}

// consume runs one consumption until Close (it returns nil), a fault
// (it returns the cause) or a fatal error (d.err).
func (s *Source) consume(d *deliverer, reconnected chan nats.Status) error {
	failed := make(chan error, 1)
	gen := d.generation()
	cc, err := s.cons.Consume(func(msg jetstream.Msg) { d.deliver(gen, msg) },
		jetstream.PullMaxMessagesWithBytesLimit(s.cfg.FetchBatch, s.pullBytes()),
		jetstream.PullExpiry(max(s.cfg.FetchMaxWait, time.Second)),
		jetstream.ConsumeErrHandler(func(_ jetstream.ConsumeContext, err error) {
			select {
			case failed <- err:
			default:
			}
		}),
	)
	if err != nil {
		return fmt.Errorf("consume: %w", err)
	}
	defer func() {
		cc.Stop()
		<-cc.Closed()
		d.stop() // deliver has returned and will not hand out more
	}()
	for {
		select {
		case <-s.stop:
			return nil
		case err := <-failed:
			if errors.Is(err, jetstream.ErrNoHeartbeat) {
				// The client pulls again on its own; a delivery lost
				// meanwhile shows as a gap in the delivery sequence.
				s.log.Debug("missed heartbeat", "consumer", s.cfg.Consumer)
				continue
			}
			return err
		case <-reconnected:
			return errReconnected
		case <-cc.Closed():
			return errors.New("consumption ended")
		case <-d.faulted():
			return d.fault
		}
	}
}

// pullBytes bounds each pull request in bytes, so that what the client
// holds for us is bounded by MaxBufferedBytes, whatever the message size:
// an eighth of it (the client keeps about two requests open), and at
// least twice the server's max_payload, since a message larger than a
// request's limit would never be delivered.
func (s *Source) pullBytes() int {
	return int(max(int64(s.cfg.MaxBufferedBytes)/8, 2*s.nc.MaxPayload()))
}

// awaitSettled waits until every message handed out was acknowledged
// through Ack (committed and checkpointed) or settled on its own (skipped,
// dead-lettered): only then may the consumer's ack floor move past them.
// It reports false if the source closed first.
func (s *Source) awaitSettled() bool {
	for {
		s.mu.Lock()
		n := len(s.pending)
		s.mu.Unlock()
		if n == 0 {
			return true
		}
		select {
		case <-s.settled:
		case <-s.stop:
			return false
		}
	}
}

func drain(ch chan nats.Status) {
	for {
		select {
		case <-ch:
		default:
			return
		}
	}
}

// deliverer hands messages from the client's consume goroutine to the
// queue, in order and without gaps. The reader stops it (stop) before it
// repositions or closes the queue.
type deliverer struct {
	s      *Source
	format cdc.PayloadFormat
	pos    []byte // the consume goroutine's only
	count  atomic.Uint64

	mu       sync.Mutex // guards the fields below, and is held while a message is delivered
	gen      int        // the consumption deliveries are taken from; a late one of an earlier one is dropped
	stopped  bool
	last     uint64 // stream sequence of the last message queued (or of the checkpoint)
	next     uint64 // the delivery sequence expected next; 1 after a reposition
	faultCh  chan struct{}
	fault    error // why faultCh was closed; read after stop
	err      error // a fatal error; read after stop
	faultSet bool
}

func (d *deliverer) deliver(gen int, msg jetstream.Msg) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.stopped || gen != d.gen {
		return // a late message of a stopped consumption: read again after the reposition
	}
	d.count.Add(1)
	s := d.s
	s.m.add(Fetched, 1)
	meta, err := msg.Metadata()
	if err != nil {
		d.err = fmt.Errorf("message on %s has no JetStream metadata: %w", msg.Subject(), err)
		d.queue(item{err: d.err})
		d.faultLocked(d.err)
		return
	}
	if got := meta.Sequence.Consumer; got != d.next {
		d.faultLocked(fmt.Errorf("delivery %d (stream sequence %d) arrived where delivery %d was expected: a delivery was lost or came out of order",
			got, meta.Sequence.Stream, d.next))
		return
	}
	d.next++
	if meta.NumDelivered > 1 {
		s.m.add(Redelivered, 1)
	}
	seq := meta.Sequence.Stream
	if seq <= d.last {
		s.duplicate(msg, seq)
		return
	}
	d.last = seq
	s.track(seq, msg)
	if cap(d.pos)-len(d.pos) < 64 {
		d.pos = make([]byte, 0, 64*256) // positions are small: cut them from one shared buffer
	}
	start, wall := len(d.pos), meta.Timestamp.UnixMilli()
	d.pos = appendJSPos(d.pos, seq, wall)
	p := d.pos[start:len(d.pos):len(d.pos)]
	d.queue(item{
		ev:  event(msg.Subject(), msg.Data(), msg.Headers(), d.format, p, wall),
		msg: msg, streamSeq: seq,
	})
}

// queue waits for room in the queue and its byte budget, or for Close.
func (d *deliverer) queue(it item) {
	if first, ok := d.s.queue.push(it, d.s.stop); ok && first {
		d.s.wake()
	}
}

func (d *deliverer) faultLocked(err error) {
	if d.faultSet {
		return
	}
	d.faultSet, d.fault, d.stopped = true, err, true
	close(d.faultCh)
}

// faulted returns a channel closed when the current consumption faulted.
func (d *deliverer) faulted() <-chan struct{} {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.faultCh
}

// stop waits for a delivery in progress to finish and stops further ones.
func (d *deliverer) stop() {
	d.mu.Lock()
	d.stopped = true
	d.mu.Unlock()
}

// restart expects delivery sequence 1 next, from a new consumption, after
// a reposition.
func (d *deliverer) restart() {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.gen++
	d.stopped, d.next, d.faultSet, d.fault = false, 1, false, nil
	d.faultCh = make(chan struct{})
}

func (d *deliverer) generation() int {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.gen
}

// track records a queued message as pending until it is acknowledged.
func (s *Source) track(seq uint64, msg jetstream.Msg) {
	s.mu.Lock()
	s.pending = append(s.pending, pendingMsg{streamSeq: seq, msg: msg, touched: time.Now()})
	s.mu.Unlock()
}

// duplicate settles a delivery of a message already handed out: a
// redelivery after its ack wait ran out during a slow commit, or after a
// reposition to the consumer's ack floor. If it is still pending, the new
// delivery replaces the old one, whose ack the server may no longer take;
// otherwise it was acknowledged (or the checkpoint covers it), and it is
// acknowledged again.
func (s *Source) duplicate(msg jetstream.Msg, seq uint64) {
	s.m.add(Skipped, 1)
	s.mu.Lock()
	for i := range s.pending {
		if p := &s.pending[i]; p.streamSeq == seq {
			p.msg, p.touched = msg, time.Now()
			s.mu.Unlock()
			return
		}
	}
	s.mu.Unlock()
	if s.acks != nil {
		s.acks.enqueue([]jetstream.Msg{msg})
	}
}

// keepAlive sends in-progress acks for messages handed out (or queued) and
// not yet acknowledged, so that a long batch does not run past AckWait and
// get redelivered while the sink is still committing it.
func (s *Source) keepAlive() {
	defer s.wg.Done()
	// A message is refreshed at most two ticks after its last touch, half
	// its ack wait: the other half is slack for a stalled machine.
	every := max(s.cfg.AckWait/4, 10*time.Millisecond)
	t := time.NewTicker(every)
	defer t.Stop()
	var stale []jetstream.Msg
	for {
		select {
		case <-s.stop:
			return
		case now := <-t.C:
			stale = stale[:0]
			s.mu.Lock()
			for i := range s.pending {
				if p := &s.pending[i]; now.Sub(p.touched) >= every {
					p.touched = now
					stale = append(stale, p.msg)
				}
			}
			s.mu.Unlock()
			for _, m := range stale {
				_ = m.InProgress() // fails only for an acked message or a closed connection
			}
		}
	}
}

// pollLag reads the consumer's pending count every LagPollInterval.
func (s *Source) pollLag() {
	defer s.wg.Done()
	t := time.NewTicker(s.cfg.LagPollInterval)
	defer t.Stop()
	for {
		select {
		case <-s.stop:
			return
		case <-t.C:
			// Bounded, so that Close waits for at most this long.
			ctx, cancel := context.WithTimeout(context.Background(), min(s.cfg.LagPollInterval, s.cfg.AckTimeout))
			info, err := s.cons.Info(ctx)
			cancel()
			if err != nil {
				s.log.Debug("read consumer info for lag", "err", err)
				continue
			}
			s.m.setLag(info.NumPending)
		}
	}
}
