package mongo

import (
	"context"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
)

func TestMetrics(t *testing.T) {
	e := newEnv(t)
	src := openSource(t, e.config(t), nil)
	insert(t, e.coll, 1, 2)
	got, err := pollUntil(t, src, countOps(2))
	if err != nil {
		t.Fatal(err)
	}
	if err := src.Ack(context.Background(), got[len(got)-1].Pos); err != nil {
		t.Fatal(err)
	}
	reg := prometheus.NewPedanticRegistry()
	reg.MustRegister(src.Collector("orders"))
	families, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	seen := map[string]bool{}
	inserts := -1.0
	for _, f := range families {
		seen[f.GetName()] = true
		if f.GetName() != "tide_mongo_events_total" {
			continue
		}
		for _, m := range f.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "op" && l.GetValue() == "insert" {
					inserts = m.GetCounter().GetValue()
				}
			}
		}
	}
	if inserts != 2 {
		t.Errorf("tide_mongo_events_total{op=insert} = %v, want 2", inserts)
	}
	for _, name := range []string{"events_total", "bytes_read_total", "reconnects_total", "errors_total",
		"lag_seconds", "checkpoint_age_seconds", "buffered_bytes", "snapshot_documents"} {
		if !seen["tide_mongo_"+name] {
			t.Errorf("metric tide_mongo_%s missing", name)
		}
	}
	st := src.Stats()
	if st.Committed.T == 0 || st.LastCommit.IsZero() {
		t.Fatalf("after Ack: committed %v at %v, want both set", st.Committed, st.LastCommit)
	}
}
