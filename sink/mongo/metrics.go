package mongo

import "github.com/prometheus/client_golang/prometheus"

// Collector exports the sink's Stats as Prometheus counters
// (tide_mongo_sink_*) labelled with the pipeline's name.
func (s *Sink) Collector(pipeline string) prometheus.Collector {
	labels := prometheus.Labels{"pipeline": pipeline}
	d := func(name, help string) *prometheus.Desc {
		return prometheus.NewDesc("tide_mongo_sink_"+name, help, nil, labels)
	}
	return &collector{s: s, descs: []*prometheus.Desc{
		d("ddl_skipped_total", "Collection events not applied: drops and renames without apply_ddl, index and option changes."),
		d("ddl_applied_total", "Drops and renames applied to the target (apply_ddl)."),
		d("dead_letters_total", "Changes the target refused, written to the dead-letter collection."),
		d("transactions_total", "Transactions committed (checkpoint: sink)."),
		d("retries_total", "Writes or transactions tried again after a transient error."),
		d("commits_resolved_total", "Commits of unknown outcome found, by the checkpoint document, to have succeeded."),
	}}
}

type collector struct {
	s     *Sink
	descs []*prometheus.Desc
}

func (c *collector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range c.descs {
		ch <- d
	}
}

func (c *collector) Collect(ch chan<- prometheus.Metric) {
	st := c.s.Stats()
	for i, v := range []int64{st.DDLSkipped, st.DDLApplied, st.DeadLettered, st.Transactions, st.Retries, st.Resolved} {
		ch <- prometheus.MustNewConstMetric(c.descs[i], prometheus.CounterValue, float64(v))
	}
}
