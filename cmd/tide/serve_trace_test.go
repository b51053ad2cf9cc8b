package main

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"sync"
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"
	coltrace "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	"google.golang.org/protobuf/proto"
)

// tide serve --otlp-endpoint traces each command of the embedded server:
// an OTLP/HTTP receiver decoding the protobuf gets an insert span with
// its database, flushed when tide serve stops.
func TestServeTracesCommands(t *testing.T) {
	t.Parallel()
	var mu sync.Mutex
	spans := map[string]string{} // span name -> db.namespace
	recv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		var req coltrace.ExportTraceServiceRequest
		if err := proto.Unmarshal(body, &req); err != nil {
			t.Errorf("decode OTLP: %v", err)
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		mu.Lock()
		for _, rs := range req.ResourceSpans {
			for _, ss := range rs.ScopeSpans {
				for _, s := range ss.Spans {
					db := ""
					for _, a := range s.Attributes {
						if a.Key == "db.namespace" {
							db = a.GetValue().GetStringValue()
						}
					}
					spans[s.Name] = db
				}
			}
		}
		mu.Unlock()
		out, _ := proto.Marshal(&coltrace.ExportTraceServiceResponse{})
		w.Header().Set("Content-Type", "application/x-protobuf")
		w.Write(out)
	}))
	defer recv.Close()

	dir := t.TempDir()
	cmd, logs := startTide(t, dir, "msg=serving ", "serve", "--addr", "127.0.0.1:0", "--otlp-endpoint", recv.URL)
	addr := logField(t, logs.String(), "msg=serving ", "addr")
	c, err := mongo.Connect(options.Client().ApplyURI("mongodb://" + addr + "/?directConnection=true"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.Database("shop").Collection("orders").InsertOne(t.Context(), bson.D{{Key: "_id", Value: 1}}); err != nil {
		t.Fatal(err)
	}
	c.Disconnect(context.Background())
	cmd.Process.Signal(os.Interrupt)
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("tide serve: %v\n%s", err, logs.String())
		}
	case <-time.After(30 * time.Second):
		cmd.Process.Kill()
		t.Fatal("tide serve did not stop")
	}
	mu.Lock()
	defer mu.Unlock()
	if db, ok := spans["insert"]; !ok || db != "shop" {
		t.Errorf("spans received %v, want an insert on shop", spans)
	}
}
