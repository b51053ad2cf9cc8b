package nats

import (
	"encoding/json"
	"fmt"
	"strconv"
	"sync"
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
	c := &coreReader{s: s, seq: seq, format: s.format()}
	var sub *nats.Subscription
	var err error
	s.wg.Add(1) // done by c.ended, when the client's delivery goroutine for sub exits
	if s.cfg.QueueGroup != "" {
		sub, err = s.nc.QueueSubscribe(s.cfg.Subject, s.cfg.QueueGroup, c.deliver)
	} else {
		sub, err = s.nc.Subscribe(s.cfg.Subject, c.deliver)
	}
	if err != nil {
		s.wg.Done()
		return fmt.Errorf("subscribe to %s: %w", s.cfg.Subject, err)
	}
	c.sub = sub
	sub.SetClosedHandler(c.ended)
	if !sub.IsValid() {
		// Closed before the handler was set: the client may never call it.
		c.ended(s.cfg.Subject)
	}
	s.unsubscribe = func() { sub.Unsubscribe() }
	// The client buffers up to these limits before it drops messages as a
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
	return nil
}

// coreReader moves core messages into the queue. Its methods run on the
// client's delivery goroutine for the subscription, one message at a
// time: a callback subscription rather than NextMsg in a goroutine of our
// own, because NextMsg costs a select per message and the callback does
// not. The client starts that goroutine; Close ends it by unsubscribing,
// and its last act is ended.
type coreReader struct {
	s       *Source
	sub     *nats.Subscription
	format  cdc.PayloadFormat
	seq     uint64
	pos     []byte // positions of queued events, carved from one buffer
	dropped uint64 // slow-consumer drops last logged
	since   int    // messages since the drops were last looked at
	endOnce sync.Once
}

// dropCheckEvery is how many messages pass between looks at the client's
// slow-consumer drop count: the look takes the lock the client's reader
// needs for every message.
const dropCheckEvery = 4096

func (c *coreReader) deliver(msg *nats.Msg) {
	s := c.s
	s.m.add(Fetched, 1)
	c.seq++
	if cap(c.pos)-len(c.pos) < 32 {
		c.pos = make([]byte, 0, 4096)
	}
	start := len(c.pos)
	c.pos = append(c.pos, `{"seq":`...)
	c.pos = append(strconv.AppendUint(c.pos, c.seq, 10), '}')
	pos := c.pos[start:len(c.pos):len(c.pos)]
	it := item{ev: event(msg.Subject, msg.Data, msg.Header, c.format, pos, time.Now().UnixMilli())}
	first, ok := s.queue.push(it, s.stop)
	if first {
		s.wake()
	}
	if c.since++; !ok || c.since >= dropCheckEvery {
		c.checkDrops()
	}
}

// checkDrops logs messages the client dropped since the last look: core
// NATS is at-most-once, and a consumer that falls behind the client's
// pending limits loses messages. They are counted and the stream goes on.
func (c *coreReader) checkDrops() {
	c.since = 0
	n, err := c.sub.Dropped()
	if err != nil || n <= 0 || uint64(n) == c.dropped {
		return
	}
	c.dropped = uint64(n)
	c.s.log.Warn("slow consumer: the client dropped messages", "subject", c.s.cfg.Subject, "dropped_total", n)
}

// ended runs once the client stopped delivering: after Close unsubscribed,
// or when the connection closed under us.
func (c *coreReader) ended(string) {
	c.endOnce.Do(c.end)
}

func (c *coreReader) end() {
	s := c.s
	defer s.wg.Done()
	c.checkDrops()
	select {
	case <-s.stop:
		s.endErr = fmt.Errorf("nats source closed: %w", cdc.ErrEnd)
	default:
		reason := "unsubscribed"
		if s.nc.IsClosed() {
			reason = "connection closed"
		}
		s.endErr = fmt.Errorf("subscription to %s ended (%s): %w", s.cfg.Subject, reason, cdc.ErrEnd)
	}
	s.queue.close()
	s.wake()
}
