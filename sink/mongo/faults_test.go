package mongo_test

import (
	"context"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/tide-cdc/tide/encode"
	"github.com/tide-cdc/tide/internal/testenv"
	"github.com/tide-cdc/tide/mongowire"
	"github.com/tide-cdc/tide/pipeline"
	mongosink "github.com/tide-cdc/tide/sink/mongo"
	"github.com/tide-cdc/tide/source/generate"
)

// Network faults and a restart of the target under a running exactly-once
// pipeline: the connections between the sink and the target are cut again
// and again, and the target server is closed and started again on its
// data directory, while generate → append runs. The sink retries what
// failed transiently (a commit of unknown outcome resolved by reading the
// checkpoint), and the target ends with every event exactly once.
func TestFaultsExactlyOnce(t *testing.T) {
	const n = 6000
	dir := filepath.Join(t.TempDir(), "target")
	srv := mongowire.New(mongowire.Config{Addr: "127.0.0.1:0", DataDir: dir, Logger: testLogger(t)})
	if err := srv.Start(); err != nil {
		t.Fatal(err)
	}
	addr := srv.Addr()
	proxy := testenv.StartProxy(t, addr)
	uri := "mongodb://" + proxy.Addr() + "/?replicaSet=rs0&directConnection=true"

	sink := mongosink.New(mongosink.Config{
		URI: uri, Database: "lake", Collection: "events", Mode: mongosink.ModeAppend,
		Pipeline: "faults", Logger: testLogger(t), RetryTimeout: 30 * time.Second,
	})
	p := pipeline.New(pipeline.Config{Name: "faults", MaxRecords: 200, Logger: testLogger(t)},
		generate.New(generate.Config{Count: n, Rate: 3000}), encode.Envelope, sink, sink.Checkpoints())

	ctx, cancel := context.WithTimeout(t.Context(), 60*time.Second)
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- p.Run(ctx) }()

	var wg sync.WaitGroup
	stop := make(chan struct{})
	wg.Add(1)
	go func() { // the faults: cuts, and once the target's restart
		defer wg.Done()
		for i := range 10 {
			select {
			case <-stop:
				return
			case <-time.After(200 * time.Millisecond):
			}
			if i == 5 {
				srv.Close()
				srv = mongowire.New(mongowire.Config{Addr: addr, DataDir: dir, Logger: testLogger(t)})
				if err := srv.Start(); err != nil {
					t.Errorf("restart the target: %v", err)
					return
				}
				continue
			}
			proxy.Cut()
		}
	}()
	err := <-done
	close(stop)
	wg.Wait()
	defer srv.Close()
	if err != nil {
		t.Fatalf("pipeline under faults: %v", err)
	}
	if proxy.Cuts() < 5 { // 9 cuts were made; some may have found no connection
		t.Fatalf("only %d cuts during the run", proxy.Cuts())
	}

	c := testenv.MongoClient(t, srv.URI())
	cur, err := c.Database("lake").Collection("events").Find(t.Context(), bson.D{})
	if err != nil {
		t.Fatal(err)
	}
	var docs []bson.Raw
	if err := cur.All(t.Context(), &docs); err != nil {
		t.Fatal(err)
	}
	seen := map[string]bool{}
	for _, d := range docs {
		id := d.Lookup("_id").StringValue()
		if seen[id] {
			t.Fatalf("event %s written twice", id)
		}
		seen[id] = true
	}
	if len(docs) != n {
		t.Fatalf("%d documents after the faults, want exactly %d", len(docs), n)
	}
	var ck bson.Raw
	if err := c.Database(mongosink.DefaultCheckpointDatabase).Collection("tide_checkpoints").FindOne(t.Context(), bson.D{{Key: "_id", Value: "faults"}}).Decode(&ck); err != nil {
		t.Fatalf("checkpoint document: %v", err)
	}
	if _, err := ck.LookupErr("_id"); err != nil || !strings.Contains(ck.String(), "faults") {
		t.Fatalf("checkpoint document %v", ck)
	}
}
