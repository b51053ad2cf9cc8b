package mongo

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/tide-cdc/tide/cdc"
)

// isnapDescs are the metrics of incremental snapshots.
type isnapDescs struct {
	documents, rate, rows, dropped, count *prometheus.Desc
}

func newISnapDescs(d func(name, help string, variable ...string) *prometheus.Desc) isnapDescs {
	return isnapDescs{
		documents: d("incremental_snapshot_documents", "Progress of each running incremental snapshot: documents done, and the estimated total.", "snapshot", "state"),
		rate:      d("incremental_snapshot_documents_per_second", "Copy rate of each running incremental snapshot since this process started it.", "snapshot"),
		rows:      d("incremental_snapshot_rows_total", "Snapshot rows handed out by incremental snapshots."),
		dropped:   d("incremental_snapshot_dropped_total", "Chunk documents dropped because the stream carries a change of them inside the chunk's window."),
		count:     d("incremental_snapshots", "Incremental snapshots listed, by state (the finished ones the checkpoint keeps included).", "state"),
	}
}

func (d isnapDescs) describe(ch chan<- *prometheus.Desc) {
	for _, x := range []*prometheus.Desc{d.documents, d.rate, d.rows, d.dropped, d.count} {
		ch <- x
	}
}

func (d isnapDescs) collect(ch chan<- prometheus.Metric, s *Source) {
	ch <- prometheus.MustNewConstMetric(d.rows, prometheus.CounterValue, float64(s.isnap.rows.Load()))
	ch <- prometheus.MustNewConstMetric(d.dropped, prometheus.CounterValue, float64(s.isnap.dropped.Load()))
	states := map[string]int{cdc.SnapshotRunning: 0, cdc.SnapshotDone: 0, cdc.SnapshotCancelled: 0, cdc.SnapshotFailed: 0}
	for _, in := range s.Snapshots() {
		states[in.State]++
		if in.State != cdc.SnapshotRunning {
			continue
		}
		ch <- prometheus.MustNewConstMetric(d.documents, prometheus.GaugeValue, float64(in.DoneDocuments), in.ID, "done")
		ch <- prometheus.MustNewConstMetric(d.documents, prometheus.GaugeValue, float64(in.TotalDocuments), in.ID, "total")
		ch <- prometheus.MustNewConstMetric(d.rate, prometheus.GaugeValue, in.Rate, in.ID)
	}
	for st, n := range states {
		ch <- prometheus.MustNewConstMetric(d.count, prometheus.GaugeValue, float64(n), st)
	}
}

// isnapDetails adds the incremental snapshots not finished to the status
// details, as "incremental_snapshots": [{id, collections, state,
// done_documents, total_documents, documents_per_second, eta_seconds}].
func (s *Source) isnapDetails(m map[string]any) map[string]any {
	var list []map[string]any
	for _, in := range s.Snapshots() {
		if in.State != cdc.SnapshotRunning {
			continue
		}
		list = append(list, map[string]any{
			"id": in.ID, "collections": in.Collections, "state": in.State,
			"done_documents": in.DoneDocuments, "total_documents": in.TotalDocuments,
			"documents_per_second": int64(in.Rate), "eta_seconds": int64(in.ETASeconds),
		})
	}
	if list == nil {
		return m
	}
	if m == nil {
		m = map[string]any{}
	}
	m["incremental_snapshots"] = list
	return m
}
