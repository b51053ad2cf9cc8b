package nats

import "github.com/prometheus/client_golang/prometheus"

// Collector returns the source's Prometheus metrics, labelled with the
// pipeline name: messages fetched, acknowledged, redelivered, skipped and
// dead-lettered, ack failures, consumer repositions, and the consumer's
// lag (its pending count; JetStream only). Register it next to the
// runtime's metrics, as for the MongoDB source:
// reg.MustRegister(src.Collector(name)).
func (s *Source) Collector(pipeline string) prometheus.Collector {
	labels := prometheus.Labels{"pipeline": pipeline}
	d := func(name, help string) *prometheus.Desc {
		return prometheus.NewDesc("tide_nats_"+name, help, nil, labels)
	}
	return &collector{
		s:             s,
		fetched:       d("fetched_total", "Messages read from NATS."),
		acked:         d("acked_total", "Messages acknowledged, after their checkpoint was saved."),
		ackErrors:     d("ack_errors_total", "Acks that failed or timed out; the broker redelivers those messages."),
		acksDropped:   d("acks_dropped_total", "Acks not queued because the ack backlog was full."),
		acksAbandoned: d("acks_abandoned_total", "Acks still queued when the source closed."),
		redelivered:   d("redelivered_total", "Messages delivered more than once."),
		decodeErrors:  d("decode_errors_total", "Payloads that did not decode."),
		deadLettered:  d("dead_lettered_total", "Messages republished to the dead-letter subject."),
		skipped:       d("skipped_total", "Deliveries of messages already handed out or checkpointed, acknowledged again."),
		repositioned:  d("repositioned_total", "Consumer resets to the next expected message after a fault."),
		lag:           d("lag_messages", "The consumer's pending count (JetStream only)."),
	}
}

type collector struct {
	s                                                     *Source
	fetched, acked, ackErrors, acksDropped, acksAbandoned *prometheus.Desc
	redelivered, decodeErrors, deadLettered, skipped      *prometheus.Desc
	repositioned, lag                                     *prometheus.Desc
}

func (c *collector) descs() []*prometheus.Desc {
	return []*prometheus.Desc{c.fetched, c.acked, c.ackErrors, c.acksDropped, c.acksAbandoned,
		c.redelivered, c.decodeErrors, c.deadLettered, c.skipped, c.repositioned, c.lag}
}

func (c *collector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range c.descs() {
		ch <- d
	}
}

func (c *collector) Collect(ch chan<- prometheus.Metric) {
	st := c.s.Stats()
	counter := func(d *prometheus.Desc, n uint64) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.CounterValue, float64(n))
	}
	counter(c.fetched, st.Fetched)
	counter(c.acked, st.Acked)
	counter(c.ackErrors, st.AckErrors)
	counter(c.acksDropped, st.AcksDropped)
	counter(c.acksAbandoned, st.AcksAbandoned)
	counter(c.redelivered, st.Redelivered)
	counter(c.decodeErrors, st.DecodeErrors)
	counter(c.deadLettered, st.DeadLettered)
	counter(c.skipped, st.Skipped)
	counter(c.repositioned, st.Repositioned)
	ch <- prometheus.MustNewConstMetric(c.lag, prometheus.GaugeValue, float64(st.Lag))
}
