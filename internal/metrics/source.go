package metrics

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// SourceStats is what a source reports about itself, read at scrape time.
type SourceStats struct {
	EventsByOp map[string]int64 // events handed out, by operation type
	BytesRead  int64
	Reconnects int64
	Errors     int64
	Lag        time.Duration // now minus the source time of the last committed event
}

// sourceCollector turns a source's own counters into metrics when scraped,
// so the source needs no Prometheus dependency and pays nothing per event.
type sourceCollector struct {
	read                                     func() SourceStats
	events, bytes, reconnects, errors, lagGa *prometheus.Desc
}

// RegisterSource exports a source's counters under the pipeline's label.
func RegisterSource(reg prometheus.Registerer, pipeline string, read func() SourceStats) {
	labels := prometheus.Labels{"pipeline": pipeline}
	d := func(name, help string, variable ...string) *prometheus.Desc {
		return prometheus.NewDesc(prometheus.BuildFQName("tide", "source", name), help, variable, labels)
	}
	reg.MustRegister(&sourceCollector{
		read:       read,
		events:     d("events_total", "Events read from the source, by operation type.", "op"),
		bytes:      d("bytes_read_total", "Bytes of the events read from the source."),
		reconnects: d("reconnects_total", "Times the source reopened its stream after an error."),
		errors:     d("errors_total", "Errors the source saw, retried or not."),
		lagGa:      d("lag_seconds", "Now minus the source time of the last committed event."),
	})
}

func (c *sourceCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- c.events
	ch <- c.bytes
	ch <- c.reconnects
	ch <- c.errors
	ch <- c.lagGa
}

func (c *sourceCollector) Collect(ch chan<- prometheus.Metric) {
	st := c.read()
	for op, n := range st.EventsByOp {
		ch <- prometheus.MustNewConstMetric(c.events, prometheus.CounterValue, float64(n), op)
	}
	ch <- prometheus.MustNewConstMetric(c.bytes, prometheus.CounterValue, float64(st.BytesRead))
	ch <- prometheus.MustNewConstMetric(c.reconnects, prometheus.CounterValue, float64(st.Reconnects))
	ch <- prometheus.MustNewConstMetric(c.errors, prometheus.CounterValue, float64(st.Errors))
	ch <- prometheus.MustNewConstMetric(c.lagGa, prometheus.GaugeValue, st.Lag.Seconds())
}
