package metrics

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/tide-cdc/tide/pipeline"
)

// Watched is what the health metrics read of a running pipeline:
// *pipeline.Pipeline and *tide.Pipeline have these methods.
type Watched interface {
	State() pipeline.State
	Stats() pipeline.Stats
	Health() pipeline.Health
}

// states are the values of tide_pipeline_state's state label.
var states = []pipeline.State{pipeline.Starting, pipeline.Running, pipeline.Degraded,
	pipeline.Paused, pipeline.Draining, pipeline.Stopped, pipeline.Failed}

// Watch makes the pipeline's state, health and lag part of the metrics:
// tide_pipeline_state, tide_last_success_timestamp_seconds,
// tide_last_error_timestamp_seconds and tide_lag_seconds. Until it is
// called they report the pipeline as starting, with no lag.
func (m *Pipeline) Watch(p Watched) { m.watched.Store(&p) }

// Retrying counts a retry of the source or the sink.
func (m *Pipeline) Retrying(component string, _ int, _ error) {
	m.retries.WithLabelValues(component).Inc()
}

// healthCollector reports what Watch gave it, read at each scrape.
type healthCollector struct {
	m                                  *Pipeline
	state, lastSuccess, lastError, lag *prometheus.Desc
}

func newHealthCollector(m *Pipeline, labels prometheus.Labels) *healthCollector {
	d := func(name, help string, vars ...string) *prometheus.Desc {
		return prometheus.NewDesc("tide_"+name, help, vars, labels)
	}
	return &healthCollector{
		m:           m,
		state:       d("pipeline_state", "1 for the pipeline's state (starting, running, degraded, paused, draining, stopped, failed), 0 for the others.", "state"),
		lastSuccess: d("last_success_timestamp_seconds", "Unix time of the last committed batch, or of the pipeline's start before the first."),
		lastError:   d("last_error_timestamp_seconds", "Unix time of the last error the source or sink retried; 0 if none."),
		lag:         d("lag_seconds", "Age of the oldest change read and not yet committed: 0 when the source is caught up and nothing is pending. Absent while unknown."),
	}
}

func (c *healthCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- c.state
	ch <- c.lastSuccess
	ch <- c.lastError
	ch <- c.lag
}

func (c *healthCollector) Collect(ch chan<- prometheus.Metric) {
	now := time.Now()
	w := c.m.watched.Load()
	state := pipeline.Starting
	var h pipeline.Health
	if w != nil {
		state, h = (*w).State(), (*w).Health()
	}
	for _, s := range states {
		v := 0.0
		if s == state {
			v = 1
		}
		ch <- prometheus.MustNewConstMetric(c.state, prometheus.GaugeValue, v, s.String())
	}
	ch <- prometheus.MustNewConstMetric(c.lastSuccess, prometheus.GaugeValue, unixSeconds(h.LastSuccess))
	ch <- prometheus.MustNewConstMetric(c.lastError, prometheus.GaugeValue, unixSeconds(h.LastError))
	if w != nil {
		if lag, ok := (*w).Stats().Lag(now); ok {
			ch <- prometheus.MustNewConstMetric(c.lag, prometheus.GaugeValue, lag.Seconds())
		}
	}
}

func unixSeconds(t time.Time) float64 {
	if t.IsZero() {
		return 0
	}
	return float64(t.UnixNano()) / 1e9
}
