package store

import (
	"fmt"
	"sync"
	"testing"

	"go.mongodb.org/mongo-driver/v2/bson"
)

// TestConcurrentClients runs writers, readers, DDL and an oplog follower at
// once on a durable store (its syncer and compactions run too), then
// checks that the oplog saw every write once, in cluster-time order.
func TestConcurrentClients(t *testing.T) {
	old := minCompactSize
	minCompactSize = 32 << 10
	defer func() { minCompactSize = old }()
	s := openDir(t, t.TempDir(), nil)
	defer s.Close()
	if _, _, _, err := s.CreateIndexes(nsA, []IndexSpec{{Key: bson.D{{Key: "w", Value: 1}, {Key: "i", Value: 1}}, Unique: true}}); err != nil {
		t.Fatal(err)
	}
	start := s.Oplog().Newest()
	const writers, perWriter = 4, 300

	stop := make(chan struct{})
	var follower sync.WaitGroup
	inserts := 0
	var followErr error
	follower.Add(1)
	go func() {
		defer follower.Done()
		after := start
		done := false
		for {
			changed := s.Oplog().Changed()
			es, scanned, lost := s.Oplog().ReadAfter(after, 100, 0)
			if lost {
				followErr = fmt.Errorf("history lost after %v", after)
				return
			}
			for _, e := range es {
				if !tsLess(after, e.TS) {
					followErr = fmt.Errorf("entry %v not after %v", e.TS, after)
					return
				}
				after = e.TS
				if e.Op == "insert" && e.NS == nsA {
					inserts++
				}
			}
			after = scanned
			if len(es) > 0 {
				continue
			}
			if done {
				return
			}
			select {
			case <-changed:
			case <-stop:
				done = true // writers are finished: drain what is left
			}
		}
	}()

	var wg sync.WaitGroup
	for w := range writers {
		wg.Add(2)
		go func() {
			defer wg.Done()
			for i := range perWriter {
				doc, _ := bson.Marshal(bson.D{{Key: "w", Value: w}, {Key: "i", Value: i}})
				if _, errs := s.Insert(nsA, []bson.Raw{doc}, true); len(errs) > 0 {
					t.Error(errs[0].Err)
					return
				}
				if i%10 == 0 {
					f, _ := bson.Marshal(bson.D{{Key: "w", Value: w}, {Key: "i", Value: i}})
					if _, err := s.Delete(nsA, f, 1); err != nil {
						t.Error(err)
						return
					}
				}
			}
		}()
		go func() {
			defer wg.Done()
			other := Namespace{"db", fmt.Sprintf("tmp%d", w)}
			for i := range perWriter / 10 {
				f, _ := bson.Marshal(bson.D{{Key: "w", Value: w}})
				if _, err := s.Find(nsA, FindSpec{Filter: f}); err != nil {
					t.Error(err)
					return
				}
				if _, err := s.Count(nsA, nil, 0, 0); err != nil {
					t.Error(err)
					return
				}
				mustInsert(t, s, other, bson.D{{Key: "i", Value: i}})
				if _, err := s.Drop(other); err != nil {
					t.Error(err)
					return
				}
				s.Now()
			}
		}()
	}
	wg.Wait()
	close(stop)
	follower.Wait()
	if followErr != nil {
		t.Fatal(followErr)
	}
	if inserts != writers*perWriter {
		t.Errorf("follower saw %d inserts, want %d", inserts, writers*perWriter)
	}
	if n, _ := s.Count(nsA, nil, 0, 0); n != writers*perWriter*9/10 {
		t.Errorf("count %d, want %d", n, writers*perWriter*9/10)
	}
}
