package natssource

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/tide-cdc/tide/internal/cdc"
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

	var restoredPos *jsPos
	if restored != nil && restored.Source != nil {
		p, err := parseJSPos(restored.Source)
		if err != nil {
			return err
		}
		restoredPos = &p
		s.skipThrough = p.StreamSeq
	}

	existing, err := js.Consumer(ctx, s.cfg.Stream, s.cfg.Consumer)
	switch {
	case errors.Is(err, jetstream.ErrConsumerNotFound):
		if restoredPos != nil {
			return fmt.Errorf("%w: the checkpoint names stream sequence %d of consumer %s on stream %s, but the consumer no longer exists, "+
				"and its ack floor was the durable position; starting it again from deliver: %s would replay or skip messages. "+
				"Reset the Tide checkpoint (tide checkpoint reset) or configure a new consumer name",
				ErrPosition, restoredPos.StreamSeq, s.cfg.Consumer, s.cfg.Stream, s.cfg.Deliver)
		}
	case errors.Is(err, jetstream.ErrStreamNotFound):
		return fmt.Errorf("jetstream stream %s: %w", s.cfg.Stream, err)
	case err != nil:
		return fmt.Errorf("look up consumer %s on stream %s: %w", s.cfg.Consumer, s.cfg.Stream, err)
	default:
		info := existing.CachedInfo()
		if err := sameStart(info.Config, want); err != nil {
			return fmt.Errorf("consumer %s on stream %s: %w", s.cfg.Consumer, s.cfg.Stream, err)
		}
		if restoredPos != nil && info.AckFloor.Stream > restoredPos.StreamSeq {
			// Tide acknowledges only after it saved a checkpoint, so the
			// ack floor is normally at or behind it. Ahead means someone
			// else acknowledged; the consumer still decides.
			s.log.Warn("consumer ack floor is ahead of the restored checkpoint; resuming from the consumer",
				"ack_floor", info.AckFloor.Stream, "checkpoint", restoredPos.StreamSeq)
		}
	}
	cons, err := js.CreateOrUpdateConsumer(ctx, s.cfg.Stream, want)
	if err != nil {
		return fmt.Errorf("create or update consumer %s on stream %s: %w", s.cfg.Consumer, s.cfg.Stream, err)
	}
	s.cons = cons
	if err := s.awaitRedelivery(ctx, cons); err != nil {
		return err
	}
	if s.cfg.Ack != "none" {
		s.acks = newAcker(s.log, &s.m, s.cfg.MaxAckPending, s.cfg.AckTimeout)
		s.acked = newSeqWindow(max(4*s.cfg.MaxAckPending, 1<<16))
	}
	s.queue = make(chan item, s.cfg.QueueSize)
	s.wg.Add(1)
	go s.readJetStream()
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

// awaitRedelivery waits out AckWait when messages delivered to an earlier
// reader (a crashed or closed process) are still unacknowledged. The
// server redelivers them only once their AckWait ran out, and serves
// redeliveries before new messages: reading before that would hand out
// newer messages first, and the sink would receive the stream out of
// order. The wait is one and a half AckWait.
func (s *Source) awaitRedelivery(ctx context.Context, cons jetstream.Consumer) error {
	info := cons.CachedInfo()
	if s.cfg.Ack == "none" || info.NumAckPending == 0 {
		return nil
	}
	s.log.Info("waiting ack_wait for messages an earlier reader did not acknowledge, so that they are redelivered first, in order",
		"pending", info.NumAckPending, "ack_wait", info.Config.AckWait)
	// Half as long again: the earlier reader's last in-progress acks may
	// still be in the server's queue when we ask, and each one restarts
	// its message's ack wait; new messages served before those
	// redeliveries would reach the sink out of order.
	t := time.NewTimer(info.Config.AckWait + info.Config.AckWait/2)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return fmt.Errorf("wait for redelivery of %d messages on consumer %s: %w", info.NumAckPending, s.cfg.Consumer, ctx.Err())
	}
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

// readJetStream pulls messages into the queue until Close or a fatal
// error, with the client's Consume: pull requests of FetchBatch messages,
// each held open by the server for FetchMaxWait (at least 1s), the next
// one sent when half of the current one arrived, all answered on one
// subscription, so that the round trips overlap and the messages arrive in
// the order the server sent them. The client calls deliver for each
// message on its own goroutine; deliver blocks while the queue is full,
// and the client then sends no further pull requests. An error reported by
// the client stops the consumption; the reader backs off and starts a new
// one. Idle pulls are not errors.
func (s *Source) readJetStream() {
	defer s.wg.Done()
	defer s.wake()
	defer close(s.queue)

	closed := fmt.Errorf("nats source closed: %w", cdc.ErrEnd)
	d := &deliverer{s: s, format: s.format(), fatal: make(chan struct{})}
	expiry := max(s.cfg.FetchMaxWait, time.Second)
	errs := 0
	for {
		failed := make(chan error, 1)
		before := d.count.Load()
		cc, err := s.cons.Consume(d.deliver,
			jetstream.PullMaxMessages(s.cfg.FetchBatch),
			jetstream.PullExpiry(expiry),
			jetstream.ConsumeErrHandler(func(_ jetstream.ConsumeContext, err error) {
				select {
				case failed <- err:
				default:
				}
			}),
		)
		for err == nil {
			select {
			case <-s.stop:
			case err = <-failed:
				if errors.Is(err, jetstream.ErrNoHeartbeat) {
					// The client resets its pull on its own.
					s.log.Debug("missed heartbeat", "consumer", s.cfg.Consumer)
					err = nil
					continue
				}
			case <-cc.Closed():
				err = errors.New("consumption ended")
			case <-d.fatal:
			}
			break
		}
		if cc != nil {
			cc.Stop()
			<-cc.Closed()
			d.wait() // deliver has returned and will not send again
		}
		if d.err != nil {
			s.endErr = d.err
			return
		}
		select {
		case <-s.stop:
			s.endErr = closed
			return
		default:
		}
		if s.nc.IsClosed() {
			s.endErr = fmt.Errorf("read from consumer %s: %w", s.cfg.Consumer, nats.ErrConnectionClosed)
			return
		}
		if d.count.Load() > before {
			errs = 0 // progress
		}
		errs++
		wait := backoff(errs, jitter())
		s.log.Warn("pull from consumer; backing off", "consumer", s.cfg.Consumer, "attempt", errs, "wait", wait, "err", err)
		t := time.NewTimer(wait)
		select {
		case <-t.C:
		case <-s.stop:
			t.Stop()
			s.endErr = closed
			return
		}
		if !s.awaitLostDeliveries() {
			s.endErr = closed
			return
		}
		d.resume()
	}
}

// awaitLostDeliveries waits, after a consumption ended, for the messages
// the server delivered but the stopped consumption dropped (the client
// discards its buffer on Stop). They are pending on the server until
// their ack wait runs out; a new consumption would be served newer
// messages first and hand them out of order. If the server counts more
// unacknowledged messages than this source holds, it waits one and a half
// ack waits, as after a crash. It reports false if the source closed.
func (s *Source) awaitLostDeliveries() bool {
	if s.acks == nil {
		return true
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	info, err := s.cons.Info(ctx)
	cancel()
	if err != nil {
		return true // the next consumption's errors say more
	}
	s.mu.Lock()
	held := len(s.pending)
	s.mu.Unlock()
	if info.NumAckPending <= held {
		return true
	}
	wait := info.Config.AckWait + info.Config.AckWait/2
	s.log.Info("waiting for messages the last consumption dropped, so that they come back first, in order",
		"unacknowledged", info.NumAckPending, "held", held, "wait", wait)
	t := time.NewTimer(wait)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-s.stop:
		return false
	}
}

// deliverer hands messages from the client's consume goroutine to the
// queue. The reader stops it (wait) before it closes the queue.
type deliverer struct {
	s      *Source
	format cdc.PayloadFormat
	pos    []byte // the consume goroutine's only
	count  atomic.Uint64

	fatal     chan struct{} // closed once err is set
	fatalOnce sync.Once
	err       error // a message without metadata; read after wait

	mu      sync.Mutex // guards stopped, and is held while a message is delivered
	stopped bool
}

func (d *deliverer) deliver(msg jetstream.Msg) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.stopped {
		return // a late message of a stopped consumption: redelivered later
	}
	d.count.Add(1)
	it, ok := d.s.handle(msg, d.format, &d.pos)
	if !ok {
		return
	}
	select {
	case d.s.queue <- it:
		d.s.wake()
	case <-d.s.stop:
		return
	}
	if it.err != nil {
		d.err = it.err
		d.stopped = true
		d.fatalOnce.Do(func() { close(d.fatal) })
	}
}

// wait waits for a delivery in progress to finish and stops further ones.
func (d *deliverer) wait() {
	d.mu.Lock()
	d.stopped = true
	d.mu.Unlock()
}

// resume allows deliveries again, for a new consumption.
func (d *deliverer) resume() {
	d.mu.Lock()
	d.stopped = false
	d.mu.Unlock()
}

// handle turns a fetched message into a queue item and tracks it until
// it is acknowledged. It reports false for a message it does not hand out.
func (s *Source) handle(msg jetstream.Msg, format cdc.PayloadFormat, pos *[]byte) (item, bool) {
	s.m.add(Fetched, 1)
	meta, err := msg.Metadata()
	if err != nil {
		return item{err: fmt.Errorf("message on %s has no JetStream metadata: %w", msg.Subject(), err)}, true
	}
	if meta.NumDelivered > 1 {
		s.m.add(Redelivered, 1)
	}
	if meta.Sequence.Stream <= s.skipThrough {
		// The restored checkpoint covers it: the sink has it, and the crash
		// came before its ack. Acknowledge it again instead of delivering
		// it twice.
		if s.acks != nil {
			s.acks.enqueue([]jetstream.Msg{msg})
		}
		s.m.add(Skipped, 1)
		return item{}, false
	}
	if s.acks != nil {
		s.mu.Lock()
		// A redelivery of a message this run already handed out: its ack
		// wait ran out while its batch was being committed (a slow fsync
		// on a loaded machine). Handing it out again would duplicate it in
		// the sink. If it is still pending, its first delivery's ack
		// settles it; if that ack already went out, ack again. A message
		// that was lost in flight (a server restart) was never handed out,
		// so it is in neither set and is delivered now.
		if seq := meta.Sequence.Stream; meta.NumDelivered > 1 && (s.pendingHasLocked(seq) || s.acked.has(seq)) {
			again := !s.pendingHasLocked(seq)
			s.mu.Unlock()
			if again {
				s.acks.enqueue([]jetstream.Msg{msg})
			}
			s.m.add(Skipped, 1)
			return item{}, false
		}
		s.pending = append(s.pending, pendingMsg{streamSeq: meta.Sequence.Stream, consumerSeq: meta.Sequence.Consumer, msg: msg, touched: time.Now()})
		s.mu.Unlock()
	}
	// Positions are small: cut them from one shared buffer.
	if cap(*pos)-len(*pos) < 64 {
		*pos = make([]byte, 0, 64*256)
	}
	start := len(*pos)
	*pos = appendJSPos(*pos, meta.Sequence.Stream, meta.Sequence.Consumer)
	p := (*pos)[start:len(*pos):len(*pos)]
	return item{
		ev:  event(msg.Subject(), msg.Data(), msg.Headers(), format, p, meta.Timestamp.UnixMilli()),
		msg: msg, streamSeq: meta.Sequence.Stream, consumerSeq: meta.Sequence.Consumer,
	}, true
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

// pendingHasLocked reports whether the message with stream sequence seq
// was handed out and is not yet acknowledged. Redeliveries after a server
// restart can come out of stream order, so it scans: pending is bounded
// by max_ack_pending, and it is only consulted for redeliveries.
func (s *Source) pendingHasLocked(seq uint64) bool {
	for i := range s.pending {
		if s.pending[i].streamSeq == seq {
			return true
		}
	}
	return false
}

// seqWindow remembers the most recent stream sequences added to it, up to
// a bound, oldest forgotten first.
type seqWindow struct {
	set  map[uint64]struct{}
	ring []uint64
	next int
}

func newSeqWindow(n int) *seqWindow {
	return &seqWindow{set: make(map[uint64]struct{}, n), ring: make([]uint64, 0, n)}
}

func (w *seqWindow) add(seq uint64) {
	if len(w.ring) < cap(w.ring) {
		w.ring = append(w.ring, seq)
	} else {
		delete(w.set, w.ring[w.next])
		w.ring[w.next] = seq
		w.next = (w.next + 1) % len(w.ring)
	}
	w.set[seq] = struct{}{}
}

func (w *seqWindow) has(seq uint64) bool {
	if w == nil {
		return false
	}
	_, ok := w.set[seq]
	return ok
}
