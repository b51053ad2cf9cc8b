package mongo

import (
	"math"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// Collector returns the source's Prometheus metrics, labelled with the
// pipeline name: events by operation, bytes read, reconnects, errors, lag
// (now minus the cluster time of the last committed position), checkpoint
// age, buffered bytes and snapshot progress. Register it next to the
// runtime's metrics: reg.MustRegister(src.Collector(name)).
func (s *Source) Collector(pipeline string) prometheus.Collector {
	labels := prometheus.Labels{"pipeline": pipeline}
	d := func(name, help string, variable ...string) *prometheus.Desc {
		return prometheus.NewDesc("tide_mongo_"+name, help, variable, labels)
	}
	return &collector{
		s:          s,
		events:     d("events_total", "Change events handed to the runtime, by operation type (marker: high-watermarks).", "op"),
		bytes:      d("bytes_read_total", "Bytes of the change events handed to the runtime."),
		reconnects: d("reconnects_total", "Change streams reopened after an error."),
		errors:     d("errors_total", "Errors seen by the source, retried or not."),
		lag:        d("lag_seconds", "Now minus the cluster time of the last committed position."),
		age:        d("checkpoint_age_seconds", "Time since the last checkpoint was saved."),
		buffered:   d("buffered_bytes", "Bytes in the reader's queue."),
		snapshot:   d("snapshot_documents", "Initial snapshot progress: documents done, and the estimated total.", "state"),
		window:     d("oplog_window_seconds", "Cluster time between the first and the last entry of the oplog (local.oplog.rs)."),
		headroom:   d("checkpoint_headroom_seconds", "How long until the checkpoint falls out of the oplog window at the current rate at which the window's start moves (+Inf while the oplog drops nothing)."),
		snapshotNS: d("snapshot_namespace_documents", "Initial snapshot progress of each collection of a multi-collection source: documents done, and the estimated total.", "namespace", "state"),
		isnap:      newISnapDescs(d),
	}
}

type collector struct {
	s                                                               *Source
	events, bytes, reconnects, errors, lag, age, buffered, snapshot *prometheus.Desc
	snapshotNS, window, headroom                                    *prometheus.Desc
	isnap                                                           isnapDescs
}

func (c *collector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{c.events, c.bytes, c.reconnects, c.errors, c.lag, c.age, c.buffered, c.snapshot, c.snapshotNS, c.window, c.headroom} {
		ch <- d
	}
	c.isnap.describe(ch)
}

func (c *collector) Collect(ch chan<- prometheus.Metric) {
	st := c.s.Stats()
	now := time.Now()
	for op, n := range st.Events {
		ch <- prometheus.MustNewConstMetric(c.events, prometheus.CounterValue, float64(n), string(op))
	}
	ch <- prometheus.MustNewConstMetric(c.bytes, prometheus.CounterValue, float64(st.BytesRead))
	ch <- prometheus.MustNewConstMetric(c.reconnects, prometheus.CounterValue, float64(st.Reconnects))
	ch <- prometheus.MustNewConstMetric(c.errors, prometheus.CounterValue, float64(st.Errors))
	ch <- prometheus.MustNewConstMetric(c.lag, prometheus.GaugeValue, st.Lag(now).Seconds())
	ch <- prometheus.MustNewConstMetric(c.age, prometheus.GaugeValue, st.CheckpointAge(now).Seconds())
	ch <- prometheus.MustNewConstMetric(c.buffered, prometheus.GaugeValue, float64(st.Buffered))
	ch <- prometheus.MustNewConstMetric(c.snapshot, prometheus.GaugeValue, float64(st.SnapshotDone), "done")
	ch <- prometheus.MustNewConstMetric(c.snapshot, prometheus.GaugeValue, float64(st.SnapshotTotal), "total")
	if win, headroom, _, ok := c.s.oplog.window(); ok {
		if headroom < 0 {
			headroom = math.Inf(1)
		}
		ch <- prometheus.MustNewConstMetric(c.window, prometheus.GaugeValue, win)
		ch <- prometheus.MustNewConstMetric(c.headroom, prometheus.GaugeValue, headroom)
	}
	for ns, p := range st.SnapshotByNamespace {
		ch <- prometheus.MustNewConstMetric(c.snapshotNS, prometheus.GaugeValue, float64(p.Done), ns, "done")
		ch <- prometheus.MustNewConstMetric(c.snapshotNS, prometheus.GaugeValue, float64(p.Total), ns, "total")
	}
	c.isnap.collect(ch, c.s)
}
