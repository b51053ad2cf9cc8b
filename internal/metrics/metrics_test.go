package metrics

import (
	"context"
	"errors"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/tide-cdc/tide/cdc"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// TestServeMetrics feeds the observer as the runtime would and scrapes
// /metrics over HTTP.
func TestServeMetrics(t *testing.T) {
	reg := NewRegistry()
	m := New(reg, "orders")
	m.Polled(3, 300)
	m.Committed(3, 120, 5*time.Millisecond, cdc.Checkpoint{Source: cdc.Position(`{"seq":3}`)})
	m.Failed("save", errors.New("disk full"))

	srv, err := Listen("127.0.0.1:0", reg)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- srv.Run(ctx) }()
	defer func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Run after cancel = %v", err)
		}
	}()

	resp, err := http.Get("http://" + srv.Addr() + "/metrics")
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
		`tide_events_out_total{pipeline="orders"} 3`,
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

func TestListenRefusesBadAddress(t *testing.T) {
	if _, err := Listen("127.0.0.1:-1", NewRegistry()); err == nil || !strings.Contains(err.Error(), "metrics listen") {
		t.Fatalf("Listen on a bad address = %v, want an error naming the metrics listener", err)
	}
}
