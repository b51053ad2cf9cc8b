package metrics

import (
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/tide-cdc/tide/cdc"
	"github.com/tide-cdc/tide/pipeline"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// TestServeMetrics feeds the observer as the runtime would and scrapes
// the registry over HTTP, as the status server serves it.
func TestServeMetrics(t *testing.T) {
	reg := NewRegistry()
	m := New(reg, "orders")
	m.Polled(3, 300)
	m.Committed(3, 120, 5*time.Millisecond, cdc.Checkpoint{Source: cdc.Position(`{"seq":3}`)})
	m.CommittedNamespaces([]pipeline.NamespaceCount{{Namespace: "shop.orders", Records: 2}, {Namespace: "shop.customers", Records: 1}})
	m.Failed("save", errors.New("disk full"))

	srv := httptest.NewServer(promhttp.HandlerFor(reg, promhttp.HandlerOpts{Registry: reg}))
	defer srv.Close()

	resp, err := http.Get(srv.URL + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	body, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		`tide_events_in_total{pipeline="orders"} 3`,
		`tide_bytes_in_total{pipeline="orders"} 300`,
		`tide_events_out_total{namespace="shop.orders",pipeline="orders"} 2`,
		`tide_events_out_total{namespace="shop.customers",pipeline="orders"} 1`,
		`tide_bytes_out_total{pipeline="orders"} 120`,
		`tide_batches_total{pipeline="orders"} 1`,
		`tide_commit_latency_seconds_count{pipeline="orders"} 1`,
		`tide_errors_total{pipeline="orders",stage="save"} 1`,
		`tide_checkpoint_age_seconds{pipeline="orders"}`,
		`go_goroutines`,
	} {
		if !strings.Contains(string(body), want) {
			t.Errorf("/metrics lacks %q", want)
		}
	}
}

// TestNamespaceLabelBounded: past MaxNamespaces namespaces, the records
// of new ones count under OtherNamespace, and the known ones go on.
func TestNamespaceLabelBounded(t *testing.T) {
	reg := NewRegistry()
	m := New(reg, "many")
	for i := range MaxNamespaces + 5 {
		m.CommittedNamespaces([]pipeline.NamespaceCount{{Namespace: fmt.Sprintf("db.c%d", i), Records: 2}})
	}
	m.CommittedNamespaces([]pipeline.NamespaceCount{{Namespace: "db.c0", Records: 1}, {Namespace: "db.late", Records: 3}})
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]float64{}
	series := 0
	for _, mf := range mfs {
		if mf.GetName() != "tide_events_out_total" {
			continue
		}
		for _, mt := range mf.GetMetric() {
			series++
			for _, l := range mt.GetLabel() {
				if l.GetName() == "namespace" {
					got[l.GetValue()] = mt.GetCounter().GetValue()
				}
			}
		}
	}
	if series != MaxNamespaces+1 {
		t.Errorf("%d series of tide_events_out_total, want %d namespaces and %s", series, MaxNamespaces, OtherNamespace)
	}
	if got["db.c0"] != 3 || got[OtherNamespace] != 5*2+3 || got[fmt.Sprintf("db.c%d", MaxNamespaces-1)] != 2 {
		t.Errorf("db.c0 = %v (want 3), %s = %v (want 13), last = %v (want 2)", got["db.c0"], OtherNamespace, got[OtherNamespace], got[fmt.Sprintf("db.c%d", MaxNamespaces-1)])
	}
}
