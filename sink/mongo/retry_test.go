package mongo_test

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/tide-cdc/tide/cdc"
	"github.com/tide-cdc/tide/encode"
	"github.com/tide-cdc/tide/internal/testenv"
	"github.com/tide-cdc/tide/pipeline"
	mongosink "github.com/tide-cdc/tide/sink/mongo"
	"github.com/tide-cdc/tide/source/generate"
)

// In a pipeline, the sink retries under the pipeline's policy, reporting
// each retry (the pipeline is degraded meanwhile), and gives up after its
// max_elapsed, as no RetryTimeout was set.
func TestRetryPolicy(t *testing.T) {
	srv := testenv.MongoWire(t)
	proxy := testenv.StartProxy(t, srv.Addr())
	uri := "mongodb://" + proxy.Addr() + "/?replicaSet=rs0&directConnection=true&serverSelectionTimeoutMS=500"
	sink := mongosink.New(mongosink.Config{URI: uri, Database: "lake", Collection: "events", Mode: mongosink.ModeAppend,
		Pipeline: "retry", Logger: testLogger(t)})
	var mu sync.Mutex
	var reports []int
	obs := retryObserver{report: func(component string, attempt int) {
		mu.Lock()
		defer mu.Unlock()
		if component == "sink" {
			reports = append(reports, attempt)
		}
	}}
	p := pipeline.New(pipeline.Config{Name: "retry", Logger: testLogger(t), Observer: obs,
		Retry: cdc.RetryPolicy{Initial: 50 * time.Millisecond, Max: 200 * time.Millisecond, MaxElapsed: 2 * time.Second}},
		generate.New(generate.Config{Rate: 100}), encode.Envelope, sink, nil)
	ctx, cancel := context.WithTimeout(t.Context(), 60*time.Second)
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- p.Run(ctx) }()
	for p.Stats().EventsOut == 0 {
		select {
		case err := <-done:
			t.Fatalf("pipeline ended before its first commit: %v", err)
		case <-time.After(20 * time.Millisecond):
		}
	}
	proxy.Down()
	start := time.Now()
	var err error
	select {
	case err = <-done:
	case <-time.After(30 * time.Second):
		t.Fatal("the sink did not give up within 30 s of its target going away (max_elapsed 2s)")
	}
	if err == nil || ctx.Err() != nil || !strings.Contains(err.Error(), "not written after") {
		t.Errorf("pipeline ended with %v, want the sink giving up", err)
	}
	if took := time.Since(start); took < 2*time.Second {
		t.Errorf("gave up after %s, before max_elapsed 2s", took)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(reports) < 2 || reports[0] != 1 {
		t.Errorf("retries reported %v, want 1, 2, …", reports)
	}
}

type retryObserver struct {
	report func(component string, attempt int)
}

func (retryObserver) Polled(int, int)                                   {}
func (retryObserver) Committed(int, int, time.Duration, cdc.Checkpoint) {}
func (retryObserver) Failed(string, error)                              {}
func (o retryObserver) Retrying(component string, attempt int, _ error) { o.report(component, attempt) }
