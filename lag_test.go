package tide

import (
	"context"
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/tide-cdc/tide/internal/testenv"
	"github.com/tide-cdc/tide/pipeline"
)

// An idle change stream is caught up, so its lag is 0, whatever the
// spacing of its idle markers: sampled every second for 60 s after a
// write, it stays under a second. A change waiting makes it grow at once,
// to the millisecond, from the change's wall time.
func TestIdleLag(t *testing.T) {
	if testing.Short() {
		t.Skip("60 s idle")
	}
	t.Parallel()
	srv := testenv.MongoWire(t)
	client := testenv.MongoClient(t, srv.URI())
	coll := client.Database("shop").Collection("orders")
	if err := client.Database("shop").CreateCollection(t.Context(), "orders"); err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	spec, err := Parse(fmt.Appendf(nil, `
name: idle
data_dir: %q
source:
  mongo: {uri: %q, database: shop, collection: orders, snapshot: never}
sink:
  file: {path: %q}
`, filepath.Join(dir, "data"), srv.URI(), filepath.Join(dir, "out.jsonl")), Options{})
	if err != nil {
		t.Fatal(err)
	}
	p, err := spec.Build(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	errc := make(chan error, 1)
	go func() { errc <- p.Run(ctx) }()
	defer func() {
		cancel()
		<-errc
	}()
	<-p.Opened()
	if _, err := coll.InsertOne(t.Context(), bson.D{{Key: "_id", Value: 1}}); err != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(10 * time.Second); p.Stats().EventsOut < 1; time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the insert was not committed within 10 s")
		}
	}
	var worst time.Duration
	for range 60 {
		time.Sleep(time.Second)
		lag, known := p.Stats().Lag(time.Now())
		if !known {
			t.Fatalf("lag unknown on an idle stream (state %s)", p.State())
		}
		worst = max(worst, lag)
	}
	if worst >= time.Second {
		t.Errorf("lag on an idle stream reached %s, want under 1 s", worst)
	}
	if st := p.State(); st != pipeline.Running {
		t.Errorf("state %s after 60 s idle, want running", st)
	}
	t.Logf("worst lag over 60 s idle: %s", worst)
}
