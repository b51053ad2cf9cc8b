package nats

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/tide-cdc/tide/cdc"
)

// corePos is a core-mode position: a per-source message counter.
type corePos struct {
	Seq uint64 `json:"seq"`
}

func (s *Source) openCore(restored *cdc.Checkpoint) error {
	var seq uint64
	if restored != nil && restored.Source != nil {
		var p corePos
		if err := json.Unmarshal(restored.Source, &p); err != nil {
			return fmt.Errorf("%w: %q is not a core NATS position {\"seq\":N}", ErrPosition, restored.Source)
		}
		seq = p.Seq // core mode cannot seek; the counter continues
	}
	var sub *nats.Subscription
	var err error
	if s.cfg.QueueGroup != "" {
		sub, err = s.nc.QueueSubscribeSync(s.cfg.Subject, s.cfg.QueueGroup)
	} else {
		sub, err = s.nc.SubscribeSync(s.cfg.Subject)
	}
	if err != nil {
		return fmt.Errorf("subscribe to %s: %w", s.cfg.Subject, err)
	}
	// The client buffers up to these limits (and, for a connection the
	// source dials, syncQueueLen messages) before it drops messages as a
	// slow consumer; our queue adds QueueSize.
	if err := sub.SetPendingLimits(syncQueueLen, 1<<30); err != nil {
		sub.Unsubscribe()
		return fmt.Errorf("subscribe to %s: %w", s.cfg.Subject, err)
	}
	// A round trip makes sure the server has the subscription before Open
	// returns, so that messages published after Open are delivered.
	if err := s.nc.Flush(); err != nil {
		sub.Unsubscribe()
		return fmt.Errorf("subscribe to %s: %w", s.cfg.Subject, err)
	}
	s.queue = make(chan item, s.cfg.QueueSize)
	s.wg.Add(1)
	go s.readCore(sub, seq)
	return nil
}

// readCore moves messages from the subscription to the queue until Close
// or the end of the subscription. It owns sub.
func (s *Source) readCore(sub *nats.Subscription, seq uint64) {
	defer s.wg.Done()
	defer s.wake()
	defer close(s.queue)
	defer sub.Unsubscribe()

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() { // ends when readCore returns, at the latest
		select {
		case <-s.stop:
			cancel()
		case <-ctx.Done():
		}
	}()

	var pos []byte
	format := s.format()
	for {
		msg, err := sub.NextMsgWithContext(ctx)
		if errors.Is(err, nats.ErrSlowConsumer) {
			// At-most-once: the client dropped messages it could not
			// buffer. Count them and go on.
			n, _ := sub.Dropped()
			s.log.Warn("slow consumer: the client dropped messages", "subject", s.cfg.Subject, "dropped_total", n)
			continue
		}
		if err != nil {
			if ctx.Err() != nil {
				s.endErr = fmt.Errorf("nats source closed: %w", cdc.ErrEnd)
				return
			}
			s.endErr = fmt.Errorf("subscription to %s ended (%v): %w", s.cfg.Subject, err, cdc.ErrEnd)
			if !errors.Is(err, nats.ErrConnectionClosed) && !errors.Is(err, nats.ErrBadSubscription) {
				s.log.Warn("subscription ended", "subject", s.cfg.Subject, "err", err)
			}
			return
		}
		s.m.add(Fetched, 1)
		seq++
		pos = append(pos[:0:0], `{"seq":`...)
		pos = append(strconv.AppendUint(pos, seq, 10), '}')
		it := item{ev: event(msg.Subject, msg.Data, msg.Header, format, pos, time.Now().UnixMilli())}
		if !s.room.take(int64(it.ev.Size), s.stop) {
			s.endErr = fmt.Errorf("nats source closed: %w", cdc.ErrEnd)
			return
		}
		select {
		case s.queue <- it:
			s.wake()
		case <-s.stop:
			s.endErr = fmt.Errorf("nats source closed: %w", cdc.ErrEnd)
			return
		}
	}
}
