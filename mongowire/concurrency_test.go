package mongowire

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"
)

// TestManyClients runs 32 goroutines over 8 clients mixing inserts,
// increments, finds, findAndModify and deletes, 4 change streams and a
// churn of short-lived connections, then checks the final state against
// what was acknowledged and that every stream saw every insert in
// increasing cluster time.
func TestManyClients(t *testing.T) {
	s, _ := csServer(t)
	ctx, cancel := context.WithTimeout(t.Context(), 45*time.Second)
	defer cancel()
	clients := make([]*mongo.Client, 8)
	for i := range clients {
		c, err := mongo.Connect(options.Client().ApplyURI(s.URI()).SetMaxPoolSize(8))
		if err != nil {
			t.Fatal(err)
		}
		defer c.Disconnect(context.Background())
		clients[i] = c
	}
	coll := func(i int) *mongo.Collection { return clients[i%len(clients)].Database("many").Collection("c") }
	if _, err := coll(0).InsertOne(ctx, bson.D{{Key: "_id", Value: "ctr"}, {Key: "n", Value: 0}}); err != nil {
		t.Fatal(err)
	}

	const workers, each, watchers = 32, 40, 4
	streams := make([]*mongo.ChangeStream, watchers)
	for i := range streams {
		cs, err := coll(i).Watch(ctx, mongo.Pipeline{{{Key: "$match", Value: bson.D{{Key: "operationType", Value: "insert"}}}}},
			options.ChangeStream().SetMaxAwaitTime(100*time.Millisecond))
		if err != nil {
			t.Fatal(err)
		}
		defer cs.Close(context.Background())
		streams[i] = cs
	}

	var (
		wg      sync.WaitGroup
		incs    atomic.Int64
		deleted sync.Map
		errs    = make(chan error, workers+watchers+1)
	)
	for w := range workers {
		wg.Go(func() {
			c := coll(w)
			for i := range each {
				id := fmt.Sprintf("w%d-%d", w, i)
				var err error
				switch i % 5 {
				case 0, 1:
					_, err = c.InsertOne(ctx, bson.D{{Key: "_id", Value: id}, {Key: "w", Value: w}, {Key: "i", Value: i}})
				case 2:
					if _, err = c.UpdateOne(ctx, bson.D{{Key: "_id", Value: "ctr"}}, bson.D{{Key: "$inc", Value: bson.D{{Key: "n", Value: 1}}}}); err == nil {
						incs.Add(1)
					}
				case 3:
					var docs []bson.Raw
					cur, ferr := c.Find(ctx, bson.D{{Key: "w", Value: w}}, options.Find().SetBatchSize(2))
					if err = ferr; err == nil {
						err = cur.All(ctx, &docs)
					}
					// Two inserts per cycle of five steps so far, one
					// delete per completed cycle; only this worker
					// touches its documents.
					if want := i/5 + 2; err == nil && len(docs) != want {
						err = fmt.Errorf("worker %d sees %d of its documents, want %d", w, len(docs), want)
					}
				case 4:
					// Delete the document inserted three steps ago, through findAndModify.
					prev := fmt.Sprintf("w%d-%d", w, i-3)
					res := c.FindOneAndDelete(ctx, bson.D{{Key: "_id", Value: prev}})
					if err = res.Err(); err == nil {
						deleted.Store(prev, true)
					}
				}
				if err != nil {
					errs <- fmt.Errorf("worker %d step %d: %w", w, i, err)
					return
				}
			}
		})
	}
	wg.Go(func() { // connection churn
		for range 20 {
			c, err := mongo.Connect(options.Client().ApplyURI(s.URI()))
			if err == nil {
				err = c.Ping(ctx, nil)
				c.Disconnect(context.Background())
			}
			if err != nil {
				errs <- fmt.Errorf("churn: %w", err)
				return
			}
		}
	})
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}

	var ctr struct{ N int64 }
	if err := coll(0).FindOne(ctx, bson.D{{Key: "_id", Value: "ctr"}}).Decode(&ctr); err != nil {
		t.Fatal(err)
	}
	if ctr.N != incs.Load() {
		t.Fatalf("counter %d, want %d", ctr.N, incs.Load())
	}
	wantInserts := workers * each * 2 / 5
	n, err := coll(0).CountDocuments(ctx, bson.D{{Key: "_id", Value: bson.D{{Key: "$ne", Value: "ctr"}}}})
	if err != nil {
		t.Fatal(err)
	}
	nDeleted := 0
	deleted.Range(func(any, any) bool { nDeleted++; return true })
	if int(n) != wantInserts-nDeleted {
		t.Fatalf("%d documents, want %d inserted - %d deleted", n, wantInserts, nDeleted)
	}

	var sg sync.WaitGroup
	serr := make(chan error, watchers)
	for i, cs := range streams {
		sg.Go(func() {
			var last bson.Timestamp
			for range wantInserts {
				if !cs.Next(ctx) {
					serr <- fmt.Errorf("stream %d: %w", i, cs.Err())
					return
				}
				tt, ti := cs.Current.Lookup("clusterTime").Timestamp()
				if ts := (bson.Timestamp{T: tt, I: ti}); ts.Compare(last) <= 0 {
					serr <- fmt.Errorf("stream %d: clusterTime %v after %v", i, ts, last)
					return
				} else {
					last = ts
				}
			}
		})
	}
	sg.Wait()
	close(serr)
	for err := range serr {
		t.Fatal(err)
	}
}

// TestCloseWithActiveClients closes the server while clients are writing,
// reading and waiting on change streams: Close returns promptly, the
// clients get errors rather than hanging, and no goroutine is left behind
// (goleak in TestMain).
func TestCloseWithActiveClients(t *testing.T) {
	s := New(Config{Addr: "127.0.0.1:0", DataDir: t.TempDir(), Logger: slog.New(slog.DiscardHandler)})
	if err := s.Start(); err != nil {
		t.Fatal(err)
	}
	c, err := mongo.Connect(options.Client().ApplyURI(s.URI()).SetRetryWrites(false).SetRetryReads(false).
		SetServerSelectionTimeout(2 * time.Second))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Disconnect(context.Background())
	coll := c.Database("d").Collection("c")
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()

	var (
		wg      sync.WaitGroup
		started atomic.Int64
	)
	for w := range 16 {
		wg.Go(func() {
			if w%4 == 0 {
				cs, err := coll.Watch(ctx, mongo.Pipeline{}, options.ChangeStream().SetMaxAwaitTime(10*time.Second))
				if err != nil {
					return
				}
				defer cs.Close(context.Background())
				started.Add(1)
				for cs.Next(ctx) {
				}
				return
			}
			for i := 0; ; i++ {
				if _, err := coll.InsertOne(ctx, bson.D{{Key: "w", Value: w}, {Key: "i", Value: i}}); err != nil {
					return
				}
				if i == 0 {
					started.Add(1)
				}
				if _, err := coll.Find(ctx, bson.D{{Key: "w", Value: w}}); err != nil {
					return
				}
			}
		})
	}
	for started.Load() < 16 && ctx.Err() == nil {
		time.Sleep(time.Millisecond)
	}
	begin := time.Now()
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if d := time.Since(begin); d > 5*time.Second {
		t.Fatalf("Close took %v with active clients", d)
	} else {
		t.Logf("Close took %v", d)
	}
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(20 * time.Second):
		t.Fatal("clients still blocked 20s after Close")
	}
}
