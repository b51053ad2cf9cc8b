package metrics

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/tide-cdc/tide/cdc"
	"github.com/tide-cdc/tide/transform"
)

// transformDrops exposes tide_transform_dropped_total{transform}: the
// changes each transform dropped, read from the chain when scraped.
type transformDrops struct {
	desc  *prometheus.Desc
	chain *transform.Chain
}

// RegisterTransforms registers the counters of chain's transforms with
// reg, for the named pipeline.
func RegisterTransforms(reg prometheus.Registerer, pipeline string, chain *transform.Chain) {
	reg.MustRegister(&transformDrops{
		desc: prometheus.NewDesc("tide_transform_dropped_total",
			"Changes a transform dropped (a filter), by transform: they wrote nothing, and the checkpoint moved past them.",
			[]string{"transform"}, prometheus.Labels{"pipeline": pipeline}),
		chain: chain,
	})
}

func (t *transformDrops) Describe(ch chan<- *prometheus.Desc) { ch <- t.desc }

func (t *transformDrops) Collect(ch chan<- prometheus.Metric) {
	for _, d := range t.chain.Dropped() {
		ch <- prometheus.MustNewConstMetric(t.desc, prometheus.CounterValue, float64(d.Count), d.Transform)
	}
}

// DeadLetters counts the changes on_error set aside, as
// tide_dead_letters_total{stage} and tide_skipped_total{stage}. It is a
// pipeline.Observer that only counts those, through
// pipeline.DeadLetterObserver.
type DeadLetters struct {
	dead, skipped *prometheus.CounterVec
}

// NewDeadLetters registers the counters with reg.
func NewDeadLetters(reg prometheus.Registerer, pipeline string) *DeadLetters {
	labels := prometheus.Labels{"pipeline": pipeline}
	d := &DeadLetters{
		dead: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: "tide", Name: "dead_letters_total", ConstLabels: labels,
			Help: "Changes set aside as dead letters (on_error: dead_letter), by stage."}, []string{"stage"}),
		skipped: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: "tide", Name: "skipped_total", ConstLabels: labels,
			Help: "Changes skipped (on_error: skip), by stage."}, []string{"stage"}),
	}
	reg.MustRegister(d.dead, d.skipped)
	return d
}

func (*DeadLetters) Polled(int, int)                                   {}
func (*DeadLetters) Committed(int, int, time.Duration, cdc.Checkpoint) {}
func (*DeadLetters) Failed(string, error)                              {}

// SetAside counts one change.
func (d *DeadLetters) SetAside(stage string, deadLetter bool) {
	if deadLetter {
		d.dead.WithLabelValues(stage).Inc()
	} else {
		d.skipped.WithLabelValues(stage).Inc()
	}
}
