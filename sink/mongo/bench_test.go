package mongo_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"

	"github.com/tide-cdc/tide/checkpoint"
	"github.com/tide-cdc/tide/encode"
	"github.com/tide-cdc/tide/internal/testenv"
	"github.com/tide-cdc/tide/mongowire"
	"github.com/tide-cdc/tide/pipeline"
	mongosink "github.com/tide-cdc/tide/sink/mongo"
	"github.com/tide-cdc/tide/source/generate"
	mongosource "github.com/tide-cdc/tide/source/mongo"
)

func envInt(name string, def int) int {
	if v, err := strconv.Atoi(os.Getenv(name)); err == nil && v > 0 {
		return v
	}
	return def
}

// BenchmarkMirror measures generate → MongoDB mirror through the whole
// pipeline, with checkpoint: sink (each batch of 1000 and its checkpoint
// in one transaction) and without, against a plain driver loop doing
// unordered BulkWrite of ReplaceOne(upsert) in batches of 1000 of the
// same documents, into the same embedded server (with a data directory:
// journaled), with the same write concern (majority, journaled). The
// three are interleaved; each b.N iteration is one round, and the medians
// are reported. TIDE_MONGO_BENCH_EVENTS sets the events per measurement
// (default 50000). Run with -benchtime=3x.
func BenchmarkMirror(b *testing.B) {
	events := envInt("TIDE_MONGO_BENCH_EVENTS", 50_000)
	const payload = 100
	srv := testenv.MongoWire(b, func(c *mongowire.Config) { c.DataDir = filepath.Join(b.TempDir(), "data") })
	c, err := mongo.Connect(options.Client().ApplyURI(srv.URI()).SetWriteConcern(majorityJournaled()))
	if err != nil {
		b.Fatal(err)
	}
	defer c.Disconnect(context.Background())
	ctx := context.Background()

	// The documents the generate source makes: {_id: seq, seq, payload}.
	docs := make([]bson.Raw, events)
	for i := range events {
		seq := int64(i + 1)
		docs[i] = marshal(bson.D{{Key: "_id", Value: seq}, {Key: "seq", Value: seq}, {Key: "payload", Value: strings.Repeat("x", payload)}})
	}
	driver := func(coll *mongo.Collection) error {
		models := make([]mongo.WriteModel, 0, 1000)
		for lo := 0; lo < events; lo += 1000 {
			models = models[:0]
			for _, d := range docs[lo:min(lo+1000, events)] {
				models = append(models, mongo.NewReplaceOneModel().SetFilter(bson.D{{Key: "_id", Value: d.Lookup("_id")}}).SetReplacement(d).SetUpsert(true))
			}
			if _, err := coll.BulkWrite(ctx, models, options.BulkWrite().SetOrdered(false)); err != nil {
				return err
			}
		}
		return nil
	}
	sink := func(keep bool, db string) error {
		s := mongosink.New(mongosink.Config{URI: srv.URI(), Database: db, Pipeline: "bench-" + db})
		defer s.Close()
		var store pipeline.Checkpointer = &checkpoint.Mem{}
		if keep {
			store = s.Checkpoints()
		}
		src := generate.New(generate.Config{Count: int64(events), PayloadBytes: payload})
		p := pipeline.New(pipeline.Config{Name: "bench-" + db, MaxRecords: 1000, MaxBytes: 64 << 20}, src, encode.Envelope, s, store)
		return p.Run(ctx)
	}
	rates := map[string][]float64{}
	for round := range b.N {
		for _, r := range []struct {
			name string
			f    func(db string) error
		}{
			{"driver", func(db string) error { return driver(c.Database(db).Collection("events")) }},
			{"sink", func(db string) error { return sink(true, db) }},
			{"sink-no-checkpoint", func(db string) error { return sink(false, db) }},
		} {
			db := fmt.Sprintf("%s_%d", strings.ReplaceAll(r.name, "-", "_"), round)
			start := time.Now()
			if err := r.f(db); err != nil {
				b.Fatalf("%s: %v", r.name, err)
			}
			rates[r.name] = append(rates[r.name], float64(events)/time.Since(start).Seconds())
			if n, err := c.Database(db).Collection("events").CountDocuments(ctx, bson.D{}); err != nil || n != int64(events) {
				b.Fatalf("%s wrote %d documents (%v), want %d", r.name, n, err, events)
			}
			if err := c.Database(db).Drop(ctx); err != nil {
				b.Fatal(err)
			}
		}
	}
	d := testenv.Median(rates["driver"])
	b.ReportMetric(d, "driver-events/s")
	b.ReportMetric(testenv.Median(rates["sink"]), "sink-events/s")
	b.ReportMetric(testenv.Median(rates["sink"])/d, "sink/driver")
	b.ReportMetric(testenv.Median(rates["sink-no-checkpoint"]), "sink-nockpt-events/s")
	b.ReportMetric(testenv.Median(rates["sink-no-checkpoint"])/d, "sink-nockpt/driver")
	b.ReportMetric(0, "ns/op")
}

// BenchmarkLag measures replication lag, MongoDB A → MongoDB B (mirror,
// checkpoint: sink), at TIDE_MONGO_LAG_RATE changes per second (default
// 1000) for TIDE_MONGO_LAG_SECONDS (default 5): each change is an insert
// into A stamped with its time, and the lag is from that write to the
// insert's event on a change stream of B, so it covers the source's
// change stream, the pipeline, the transaction and B's commit. p50, p99
// and max are reported.
func BenchmarkLag(b *testing.B) {
	rate := envInt("TIDE_MONGO_LAG_RATE", 1000)
	seconds := envInt("TIDE_MONGO_LAG_SECONDS", 5)
	a := testenv.MongoWire(b, func(c *mongowire.Config) { c.DataDir = filepath.Join(b.TempDir(), "a") })
	bs := testenv.MongoWire(b, func(c *mongowire.Config) { c.DataDir = filepath.Join(b.TempDir(), "b") })
	ca, cb := testenv.MongoClient(b, a.URI()), testenv.MongoClient(b, bs.URI())
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	if err := ca.Database("shop").CreateCollection(ctx, "orders"); err != nil {
		b.Fatal(err)
	}
	for range b.N {
		if _, err := cb.Database("shop").Collection("orders").DeleteMany(ctx, bson.D{}); err != nil {
			b.Fatal(err)
		}
		src := mongosource.New(mongosource.Config{URI: a.URI(), Database: "shop", Collection: "orders", FullDocument: "update_lookup",
			Snapshot: "never", MaxAwait: 100 * time.Millisecond})
		s := mongosink.New(mongosink.Config{URI: bs.URI(), Pipeline: "lag"})
		p := pipeline.New(pipeline.Config{Name: "lag", CommitInterval: 10 * time.Millisecond}, src, encode.Envelope, s, s.Checkpoints())
		go p.Run(ctx) // its result: p.Err, once p.Done is closed
		select {
		case <-p.Opened():
		case <-p.Done():
			b.Fatalf("run: %v", p.Err())
		}
		stream, err := cb.Database("shop").Collection("orders").Watch(ctx, mongo.Pipeline{})
		if err != nil {
			b.Fatal(err)
		}
		total := rate * seconds
		lags := make([]time.Duration, 0, total)
		got := make(chan struct{})
		go func() {
			defer close(got)
			for len(lags) < total && stream.Next(ctx) {
				if stream.Current.Lookup("operationType").StringValue() != "insert" {
					continue
				}
				at, _ := stream.Current.Lookup("fullDocument", "at").AsInt64OK()
				lags = append(lags, time.Since(time.Unix(0, at)))
			}
		}()
		tick := time.NewTicker(time.Second / time.Duration(rate))
		coll := ca.Database("shop").Collection("orders", options.Collection().SetWriteConcern(majorityJournaled()))
		for i := range total {
			<-tick.C
			if _, err := coll.InsertOne(ctx, bson.D{{Key: "_id", Value: i}, {Key: "at", Value: time.Now().UnixNano()}}); err != nil {
				b.Fatal(err)
			}
		}
		tick.Stop()
		select {
		case <-got:
		case <-time.After(30 * time.Second):
			b.Fatalf("B saw %d of %d inserts in 30 s", len(lags), total)
		}
		stream.Close(ctx)
		dctx, dcancel := context.WithTimeout(ctx, 10*time.Second)
		if err := p.Drain(dctx); err != nil { // Run's result
			b.Fatal(err)
		}
		dcancel()
		slices.Sort(lags)
		q := func(f float64) float64 {
			return float64(lags[min(len(lags)-1, int(f*float64(len(lags))))].Microseconds()) / 1000
		}
		b.ReportMetric(q(0.5), "p50-ms")
		b.ReportMetric(q(0.99), "p99-ms")
		b.ReportMetric(float64(lags[len(lags)-1].Microseconds())/1000, "max-ms")
		if _, err := ca.Database("shop").Collection("orders").DeleteMany(ctx, bson.D{}); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(0, "ns/op")
}
