package postgres

import (
	"sync"

	"github.com/prometheus/client_golang/prometheus"
)

// driftCounter counts, per table and column, the values of typed tables
// that went to _tide_overflow because they did not fit their column (or
// came past the column cap). Commit adds to it; a scrape reads it from
// another goroutine.
type driftCounter struct {
	mu     sync.Mutex // guards the fields below
	counts map[[2]string]int64
}

func (d *driftCounter) add(table, column string, n int64) (first bool) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.counts == nil {
		d.counts = map[[2]string]int64{}
	}
	k := [2]string{table, column}
	_, seen := d.counts[k]
	d.counts[k] += n
	return !seen
}

func (d *driftCounter) snapshot() map[[2]string]int64 {
	d.mu.Lock()
	defer d.mu.Unlock()
	out := make(map[[2]string]int64, len(d.counts))
	for k, v := range d.counts {
		out[k] = v
	}
	return out
}

// TypeDrift returns how many values of each column of the typed tables
// went to _tide_overflow instead of their column, keyed by table and
// column name, since the sink was made.
func (s *Sink) TypeDrift() map[[2]string]int64 { return s.drift.snapshot() }

// Collector exports the sink's type drift as the Prometheus counter
// tide_postgres_type_drift_total{table,column}, labelled with the
// pipeline's name.
func (s *Sink) Collector(pipeline string) prometheus.Collector {
	return &driftCollector{s: s, desc: prometheus.NewDesc("tide_postgres_type_drift_total",
		"Values of typed PostgreSQL tables that did not fit their column and went to _tide_overflow.",
		[]string{"table", "column"}, prometheus.Labels{"pipeline": pipeline})}
}

type driftCollector struct {
	s    *Sink
	desc *prometheus.Desc
}

func (c *driftCollector) Describe(ch chan<- *prometheus.Desc) { ch <- c.desc }

func (c *driftCollector) Collect(ch chan<- prometheus.Metric) {
	for k, v := range c.s.drift.snapshot() {
		ch <- prometheus.MustNewConstMetric(c.desc, prometheus.CounterValue, float64(v), k[0], k[1])
	}
}
