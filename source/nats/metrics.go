package nats

import "sync/atomic"

// Counter names a source counter reported to Metrics.
type Counter string

const (
	Fetched       Counter = "fetched"        // messages read from NATS
	Acked         Counter = "acked"          // messages acknowledged
	AckErrors     Counter = "ack_errors"     // acks that failed or timed out (the broker redelivers)
	AcksDropped   Counter = "acks_dropped"   // acks not queued because the backlog was full
	AcksAbandoned Counter = "acks_abandoned" // acks still queued at Close
	Redelivered   Counter = "redelivered"    // messages delivered more than once
	DecodeErrors  Counter = "decode_errors"  // payloads that did not decode
	DeadLettered  Counter = "dead_lettered"  // messages republished to the dead-letter subject
	Skipped       Counter = "skipped"        // deliveries of messages already handed out or checkpointed, acknowledged again
	Repositioned  Counter = "repositioned"   // consumer resets to the next expected message after a fault
)

// Metrics receives the source's counts, for example to export them to
// Prometheus. Its methods are called from several goroutines.
type Metrics interface {
	Add(c Counter, n uint64)
	SetLag(pending uint64) // the consumer's pending count (JetStream only)
}

// Stats is a snapshot of a source's counters.
type Stats struct {
	Fetched, Acked, AckErrors, AcksDropped, AcksAbandoned uint64
	Redelivered, DecodeErrors, DeadLettered, Skipped      uint64
	Repositioned                                          uint64
	Lag                                                   uint64
}

type counters struct {
	hook                                                  Metrics
	fetched, acked, ackErrors, acksDropped, acksAbandoned atomic.Uint64
	redelivered, decodeErrors, deadLettered, skipped, lag atomic.Uint64
	repositioned                                          atomic.Uint64
}

func (m *counters) add(c Counter, n uint64) {
	if n == 0 {
		return
	}
	switch c {
	case Fetched:
		m.fetched.Add(n)
	case Acked:
		m.acked.Add(n)
	case AckErrors:
		m.ackErrors.Add(n)
	case AcksDropped:
		m.acksDropped.Add(n)
	case AcksAbandoned:
		m.acksAbandoned.Add(n)
	case Redelivered:
		m.redelivered.Add(n)
	case DecodeErrors:
		m.decodeErrors.Add(n)
	case DeadLettered:
		m.deadLettered.Add(n)
	case Skipped:
		m.skipped.Add(n)
	case Repositioned:
		m.repositioned.Add(n)
	}
	if m.hook != nil {
		m.hook.Add(c, n)
	}
}

func (m *counters) setLag(n uint64) {
	m.lag.Store(n)
	if m.hook != nil {
		m.hook.SetLag(n)
	}
}

func (m *counters) snapshot() Stats {
	return Stats{
		Fetched: m.fetched.Load(), Acked: m.acked.Load(), AckErrors: m.ackErrors.Load(),
		AcksDropped: m.acksDropped.Load(), AcksAbandoned: m.acksAbandoned.Load(),
		Redelivered: m.redelivered.Load(), DecodeErrors: m.decodeErrors.Load(),
		DeadLettered: m.deadLettered.Load(), Skipped: m.skipped.Load(),
		Repositioned: m.repositioned.Load(), Lag: m.lag.Load(),
	}
}
