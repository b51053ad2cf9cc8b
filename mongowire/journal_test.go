package mongowire_test

import (
	"context"
	"fmt"
	"io/fs"
	"log/slog"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"
	"go.mongodb.org/mongo-driver/v2/mongo/writeconcern"

	"github.com/tide-cdc/tide/internal/faultfs"
	"github.com/tide-cdc/tide/mongowire"
	"github.com/tide-cdc/tide/mongowire/internal/store"
)

// startOn starts a server keeping its data in dir, written through fsys.
// The caller closes it: the tests close it after cutting the power.
func startOn(t testing.TB, dir string, fsys faultfs.FS) (*mongowire.Server, *mongo.Client) {
	t.Helper()
	s := mongowire.NewOnFS(mongowire.Config{Addr: "127.0.0.1:0", DataDir: dir, Logger: slog.New(slog.DiscardHandler)}, fsys)
	if err := s.Start(); err != nil {
		t.Fatal(err)
	}
	c, err := mongo.Connect(options.Client().ApplyURI(s.URI()))
	if err != nil {
		s.Close()
		t.Fatal(err)
	}
	return s, c
}

// docsAfterRestart opens the store of dir as a restart would and returns
// the _ids in db.c.
func docsAfterRestart(t *testing.T, dir string) map[string]bool {
	t.Helper()
	st, err := store.Open(store.Config{Dir: dir})
	if err != nil {
		t.Fatalf("restart after the power cut: %v", err)
	}
	defer st.Close()
	docs, err := st.Find(store.Namespace{DB: "db", Coll: "c"}, store.FindSpec{})
	if err != nil {
		t.Fatal(err)
	}
	ids := map[string]bool{}
	for _, d := range docs {
		ids[d.Lookup("_id").StringValue()] = true
	}
	return ids
}

// TestJournaledWriteConcernSurvivesPowerCut: a write acknowledged with a
// write concern that asks for the journal (w: majority, j: true, or none:
// the default is majority) is on disk when the reply arrives. The power is
// cut right after the reply, keeping nothing that was not fsynced, and the
// restarted store must hold the document.
func TestJournaledWriteConcernSurvivesPowerCut(t *testing.T) {
	yes, no := true, false
	tests := map[string]*writeconcern.WriteConcern{
		"majority":            writeconcern.Majority(),
		"majority j false":    {W: "majority", Journal: &no},
		"w 1 j true":          {W: 1, Journal: &yes},
		"default (majority)":  nil,
		"majority with w 1 j": {W: "majority", Journal: &yes},
	}
	for name, wc := range tests {
		t.Run(name, func(t *testing.T) {
			dir := t.TempDir()
			disk := faultfs.NewDisk()
			s, c := startOn(t, dir, disk)
			var opts []options.Lister[options.CollectionOptions]
			if wc != nil {
				opts = append(opts, options.Collection().SetWriteConcern(wc))
			}
			coll := c.Database("db").Collection("c", opts...)
			if _, err := coll.InsertOne(t.Context(), bson.D{{Key: "_id", Value: name}}); err != nil {
				t.Fatal(err)
			}
			if err := disk.Cut(nil); err != nil {
				t.Fatal(err)
			}
			c.Disconnect(context.Background())
			s.Close() // fails: the power is gone under it
			if ids := docsAfterRestart(t, dir); !ids[name] {
				t.Fatalf("the acknowledged write is gone after a power cut right after its reply: %v", ids)
			}
		})
	}
}

// TestW1IsNotJournaled is the other side: w: 1 is acknowledged before the
// fsync, so the same cut loses the write, unless the background syncer
// happened to fsync in between (then the attempt is repeated).
func TestW1IsNotJournaled(t *testing.T) {
	for attempt := range 20 {
		dir := t.TempDir()
		disk := faultfs.NewDisk()
		s, c := startOn(t, dir, disk)
		// A journaled write first, so that the collection is on disk.
		if _, err := c.Database("db").Collection("c").InsertOne(t.Context(), bson.D{{Key: "_id", Value: "majority"}}); err != nil {
			t.Fatal(err)
		}
		coll := c.Database("db").Collection("c", options.Collection().SetWriteConcern(writeconcern.W1()))
		before := disk.Syncs()
		if _, err := coll.InsertOne(t.Context(), bson.D{{Key: "_id", Value: "w1"}}); err != nil {
			t.Fatal(err)
		}
		disk.Cut(nil)
		synced := disk.Syncs() != before
		c.Disconnect(context.Background())
		s.Close()
		if synced {
			t.Logf("attempt %d: the syncer ran between the reply and the cut; again", attempt)
			continue
		}
		if ids := docsAfterRestart(t, dir); ids["w1"] || !ids["majority"] {
			t.Fatalf("after a cut that kept nothing unsynced, with no fsync since the w: 1 write: %v; want only the majority write", ids)
		}
		return
	}
	t.Fatal("the syncer ran in every attempt")
}

// TestConcurrentMajorityWritesSurvivePowerCut: 16 clients insert with w:
// majority at once; every acknowledged insert survives the cut.
func TestConcurrentMajorityWritesSurvivePowerCut(t *testing.T) {
	dir := t.TempDir()
	disk := faultfs.NewDisk()
	s, c := startOn(t, dir, disk)
	coll := c.Database("db").Collection("c", options.Collection().SetWriteConcern(writeconcern.Majority()))
	var wg sync.WaitGroup
	var mu sync.Mutex
	acked := map[string]bool{}
	for g := range 16 {
		wg.Go(func() {
			for i := range 8 {
				id := fmt.Sprintf("%d-%d", g, i)
				if _, err := coll.InsertOne(context.Background(), bson.D{{Key: "_id", Value: id}}); err != nil {
					t.Error(err)
					return
				}
				mu.Lock()
				acked[id] = true
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	if err := disk.Cut(nil); err != nil {
		t.Fatal(err)
	}
	c.Disconnect(context.Background())
	s.Close()
	ids := docsAfterRestart(t, dir)
	for id := range acked {
		if !ids[id] {
			t.Fatalf("acknowledged w: majority insert %s is gone after the power cut", id)
		}
	}
	if len(acked) != 16*8 {
		t.Fatalf("%d inserts acknowledged, want %d", len(acked), 16*8)
	}
}

func TestGetDefaultRWConcern(t *testing.T) {
	_, c := setup(t)
	r := run(t, c.Database("admin"), bson.D{{Key: "getDefaultRWConcern", Value: 1}})
	if w := r.Lookup("defaultWriteConcern", "w").StringValue(); w != "majority" {
		t.Fatalf("default write concern w = %q, want majority: %v", w, r)
	}
	if src := r.Lookup("defaultWriteConcernSource").StringValue(); src != "implicit" {
		t.Fatalf("defaultWriteConcernSource = %q: %v", src, r)
	}
	err := c.Database("db").RunCommand(t.Context(), bson.D{{Key: "getDefaultRWConcern", Value: 1}}).Err()
	wantCode(t, err, 13, "getDefaultRWConcern may only be run against the admin database")
}

// syncCounter is the real file system, counting file fsyncs.
type syncCounter struct{ syncs atomic.Int64 }

func (sc *syncCounter) OpenFile(name string, flag int, perm fs.FileMode) (faultfs.File, error) {
	f, err := faultfs.OS.OpenFile(name, flag, perm)
	if err != nil {
		return nil, err
	}
	return countedFile{f, &sc.syncs}, nil
}
func (sc *syncCounter) Rename(oldpath, newpath string) error {
	return faultfs.OS.Rename(oldpath, newpath)
}
func (sc *syncCounter) Remove(name string) error { return faultfs.OS.Remove(name) }
func (sc *syncCounter) SyncDir(dir string) error { return faultfs.OS.SyncDir(dir) }

type countedFile struct {
	faultfs.File
	syncs *atomic.Int64
}

func (f countedFile) Sync() error {
	f.syncs.Add(1)
	return f.File.Sync()
}

// BenchmarkJournalWriteConcern measures inserts by 16 concurrent clients
// into a server with a data directory, acknowledged with w: 1 (written to
// the OS) and with w: majority (fsynced: group commit shares the fsyncs).
// It reports inserts/s and fsyncs per insert.
//
//	go test ./mongowire -run '^$' -bench JournalWriteConcern -benchtime 3000x
func BenchmarkJournalWriteConcern(b *testing.B) {
	for _, tc := range []struct {
		name string
		wc   *writeconcern.WriteConcern
	}{{"w1", writeconcern.W1()}, {"majority", writeconcern.Majority()}} {
		b.Run(tc.name, func(b *testing.B) {
			counter := &syncCounter{}
			s, c := startOn(b, b.TempDir(), counter)
			defer s.Close()
			defer c.Disconnect(context.Background())
			coll := c.Database("db").Collection("c", options.Collection().SetWriteConcern(tc.wc))
			if _, err := coll.InsertOne(context.Background(), bson.D{{Key: "warm", Value: 1}}); err != nil {
				b.Fatal(err)
			}
			const clients = 16
			var next atomic.Int64
			syncs0 := counter.syncs.Load()
			b.ResetTimer()
			start := time.Now()
			var wg sync.WaitGroup
			for range clients {
				wg.Go(func() {
					for {
						i := next.Add(1)
						if i > int64(b.N) {
							return
						}
						if _, err := coll.InsertOne(context.Background(), bson.D{{Key: "i", Value: i}, {Key: "pad", Value: "0123456789abcdef0123456789abcdef"}}); err != nil {
							b.Error(err)
							return
						}
					}
				})
			}
			wg.Wait()
			elapsed := time.Since(start)
			b.StopTimer()
			b.ReportMetric(float64(b.N)/elapsed.Seconds(), "inserts/s")
			b.ReportMetric(float64(counter.syncs.Load()-syncs0)/float64(b.N), "fsyncs/insert")
		})
	}
}
