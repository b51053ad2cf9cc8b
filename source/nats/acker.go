package nats

import (
	"context"
	"log/slog"
	"sync"
	"time"

	"github.com/nats-io/nats.go/jetstream"
)

// ackChunk is how many messages one ack job holds: the job sends plain acks
// for all but its last message and a double ack for the last, whose
// confirmation (the server handles one connection's acks in order) tells
// the job the chunk arrived.
const ackChunk = 512

// acker acknowledges messages on up to 16 goroutines, from a bounded
// backlog. It never blocks its caller: a full backlog drops the acks, and
// the broker redelivers those messages after AckWait.
type acker struct {
	log     *slog.Logger
	m       *counters
	timeout time.Duration
	backlog int // messages that may wait for a worker

	jobs    chan []jetstream.Msg
	abandon chan struct{}   // closed at the shutdown deadline: queued jobs are dropped
	ctx     context.Context // bounds double acks; canceled at the shutdown deadline
	cancel  context.CancelFunc
	wg      sync.WaitGroup

	mu     sync.Mutex // guards the fields below
	queued int        // messages queued or in flight
	closed bool       // no more enqueues
}

func newAcker(log *slog.Logger, m *counters, maxAckPending int, timeout time.Duration) *acker {
	backlog := maxAckPending
	if backlog <= 0 { // unlimited on the server
		backlog = 1 << 16
	}
	backlog = min(max(backlog, ackChunk), 1<<20)
	return startAcker(log, m, backlog, timeout, min(max(backlog/ackChunk, 1), 16))
}

// startAcker starts an acker with the given backlog and workers (tests
// start one without workers to see what shutdown abandons).
func startAcker(log *slog.Logger, m *counters, backlog int, timeout time.Duration, workers int) *acker {
	a := &acker{
		log: log, m: m, timeout: timeout, backlog: backlog,
		jobs:    make(chan []jetstream.Msg, backlog), // room for a chunk per message: the count below is the limit
		abandon: make(chan struct{}),
	}
	a.ctx, a.cancel = context.WithCancel(context.Background())
	a.wg.Add(workers)
	for range workers {
		go a.work()
	}
	return a
}

// enqueue queues msgs for acknowledgement, in chunks. It reports how many
// it dropped because the backlog was full or the acker was shut down.
func (a *acker) enqueue(msgs []jetstream.Msg) (dropped int) {
	for len(msgs) > 0 {
		n := min(len(msgs), ackChunk)
		chunk := msgs[:n:n]
		msgs = msgs[n:]

		a.mu.Lock()
		ok := !a.closed && a.queued+n <= a.backlog
		if ok {
			select {
			case a.jobs <- chunk: // always has room: a chunk holds at least one message
				a.queued += n
			default:
				ok = false
			}
		}
		a.mu.Unlock()
		if !ok {
			dropped += n
		}
	}
	if dropped > 0 {
		a.m.add(AcksDropped, uint64(dropped))
		a.log.Warn("ack backlog full; the broker will redeliver", "dropped", dropped, "backlog", a.backlog)
	}
	return dropped
}

func (a *acker) work() {
	defer a.wg.Done()
	for chunk := range a.jobs {
		a.mu.Lock()
		a.queued -= len(chunk)
		a.mu.Unlock()
		select {
		case <-a.abandon:
			a.m.add(AcksAbandoned, uint64(len(chunk)))
		default:
			a.ack(chunk)
		}
	}
}

func (a *acker) ack(chunk []jetstream.Msg) {
	failed := 0
	last := len(chunk) - 1
	for _, m := range chunk[:last] {
		if err := m.Ack(); err != nil {
			failed++
		}
	}
	ctx, cancel := context.WithTimeout(a.ctx, a.timeout)
	err := chunk[last].DoubleAck(ctx)
	cancel()
	if err != nil {
		failed++
		a.log.Warn("double ack; the broker will redeliver what it did not record", "messages", len(chunk), "err", err)
	}
	a.m.add(Acked, uint64(len(chunk)-failed))
	a.m.add(AckErrors, uint64(failed))
}

// shutdown stops taking acks and gives the queued and in-flight ones until
// deadline; then it abandons what is still queued (counted: the broker
// redelivers those messages), cancels the double acks in flight and waits
// for the workers. It reports whether every ack was sent in time.
func (a *acker) shutdown(deadline time.Duration) bool {
	a.mu.Lock()
	if !a.closed {
		a.closed = true
		close(a.jobs)
	}
	a.mu.Unlock()
	done := make(chan struct{})
	go func() { a.wg.Wait(); close(done) }()
	t := time.NewTimer(deadline)
	defer t.Stop()
	defer a.cancel()
	select {
	case <-done:
		return a.abandonRest() == 0 // none are left, unless there are no workers
	case <-t.C:
		close(a.abandon)
		a.cancel()
		<-done // every worker returns once its double ack is canceled
		a.abandonRest()
		return false
	}
}

// abandonRest counts the messages of the jobs no worker took.
func (a *acker) abandonRest() int {
	n := 0
	for chunk := range a.jobs {
		n += len(chunk)
	}
	a.m.add(AcksAbandoned, uint64(n))
	return n
}
