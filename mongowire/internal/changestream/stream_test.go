package changestream

import (
	"context"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.uber.org/goleak"

	"github.com/tide-cdc/tide/mongowire/internal/mongoerr"
	"github.com/tide-cdc/tide/mongowire/internal/store"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func openStore(t *testing.T, cfg store.Config) *store.Store {
	t.Helper()
	st, err := store.Open(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	return st
}

func insert(t *testing.T, st *store.Store, ns store.Namespace, docs ...bson.D) {
	t.Helper()
	raws := make([]bson.Raw, len(docs))
	for i, d := range docs {
		raws[i] = mustDoc(t, d)
	}
	if _, errs := st.Insert(ns, raws, true); len(errs) > 0 {
		t.Fatalf("insert: %v", errs[0].Err)
	}
}

func openStream(t *testing.T, st *store.Store, opts bson.D, follow ...bson.D) *Stream {
	t.Helper()
	if opts == nil {
		opts = bson.D{}
	}
	sp, err := Parse(testNS.DB, testNS.Coll, stages(t, append([]bson.D{cs(opts)}, follow...)...))
	if err != nil {
		t.Fatal(err)
	}
	s, err := Open(sp, st, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Close)
	return s
}

func pbrtOf(t *testing.T, extra bson.D) string {
	t.Helper()
	if len(extra) != 1 || extra[0].Key != "postBatchResumeToken" {
		t.Fatalf("extra %v", extra)
	}
	return extra[0].Value.(bson.Raw).Lookup("_data").StringValue()
}

func TestStreamBatches(t *testing.T) {
	st := openStore(t, store.Config{})
	insert(t, st, testNS, bson.D{{Key: "_id", Value: "before"}})
	s := openStream(t, st, nil)

	// The first batch of a new stream is empty, with the start point as
	// its token: the write before it is not returned.
	docs, extra, done, err := s.Next(t.Context(), 0, maxEventBytes, 0)
	if err != nil || done || len(docs) != 0 {
		t.Fatalf("first batch: %d docs, done %v, err %v", len(docs), done, err)
	}
	start := pbrtOf(t, extra)

	for i := range 5 {
		insert(t, st, testNS, bson.D{{Key: "_id", Value: i}})
	}
	docs, extra, _, err = s.Next(t.Context(), 2, maxEventBytes, 0)
	if err != nil || len(docs) != 2 {
		t.Fatalf("batch of 2: %d docs, %v", len(docs), err)
	}
	// Stopped at an event: the token is that event's.
	if got, want := pbrtOf(t, extra), docs[1].Lookup("_id", "_data").StringValue(); got != want {
		t.Errorf("token %s, want the last event's %s", got, want)
	}
	if pbrtOf(t, extra) <= start {
		t.Error("token went back")
	}
	// maxBytes cuts a batch, but never below one event.
	docs, _, _, _ = s.Next(t.Context(), 100, 1, 0)
	if len(docs) != 1 {
		t.Fatalf("byte-bounded batch: %d docs, want 1", len(docs))
	}
	docs, extra, _, _ = s.Next(t.Context(), 100, maxEventBytes, 0)
	if len(docs) != 2 {
		t.Fatalf("rest: %d docs, want 2", len(docs))
	}
	last := docs[1].Lookup("_id", "_data").StringValue()
	// Caught up: a high-water mark after the last event.
	if got := pbrtOf(t, extra); got <= last || !strings.HasSuffix(got, "2B0429296E1404") {
		t.Errorf("token %s, want a high-water mark after %s", got, last)
	}
	// Writes elsewhere advance the idle token.
	insert(t, st, store.Namespace{DB: "d", Coll: "other"}, bson.D{{Key: "_id", Value: 1}})
	_, extra2, _, _ := s.Next(t.Context(), 100, maxEventBytes, 0)
	if pbrtOf(t, extra2) <= pbrtOf(t, extra) {
		t.Errorf("idle token did not advance past %s", pbrtOf(t, extra))
	}
}

func TestStreamWaitsForWrites(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		st := openStore(t, store.Config{})
		s := openStream(t, st, nil)
		start := time.Now()
		docs, _, _, err := s.Next(t.Context(), 10, maxEventBytes, time.Second)
		if err != nil || len(docs) != 0 {
			t.Fatalf("idle getMore: %d docs, %v", len(docs), err)
		}
		if waited := time.Since(start); waited != time.Second {
			t.Errorf("waited %v, want the full maxWait of 1s", waited)
		}

		got := make(chan int, 1)
		go func() {
			docs, _, _, _ := s.Next(context.Background(), 10, maxEventBytes, time.Hour)
			got <- len(docs)
		}()
		synctest.Wait() // the getMore is blocked on the oplog
		start = time.Now()
		insert(t, st, testNS, bson.D{{Key: "_id", Value: 1}})
		if n := <-got; n != 1 {
			t.Fatalf("woken getMore returned %d events", n)
		}
		if d := time.Since(start); d != 0 {
			t.Errorf("the write took %v of fake time to wake the getMore", d)
		}
	})
}

// eventSize is the size of the insert event of doc, for choosing a limit
// just below it.
func eventSize(t *testing.T, st *store.Store, doc bson.D) int {
	t.Helper()
	s := openStream(t, st, nil)
	insert(t, st, testNS, doc)
	docs, _, _, err := s.Next(t.Context(), 10, maxEventBytes, 0)
	if err != nil || len(docs) != 1 {
		t.Fatalf("%d docs, %v", len(docs), err)
	}
	return len(docs[0])
}

func TestStreamEventTooLarge(t *testing.T) {
	st := openStore(t, store.Config{})
	big := bson.D{{Key: "_id", Value: "big"}, {Key: "a", Value: strings.Repeat("x", 3000)}}
	limit := eventSize(t, st, big) - 1
	tests := map[string]struct {
		follow  []bson.D
		wantErr int32
	}{
		"refused": {nil, mongoerr.BSONObjectTooLarge},
		"split":   {[]bson.D{{{Key: "$changeStreamSplitLargeEvent", Value: bson.D{}}}}, 0},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			s := openStream(t, st, nil, tc.follow...)
			s.maxEvent = limit
			big[0].Value = name
			insert(t, st, testNS, big)
			docs, _, _, err := s.Next(t.Context(), 10, maxEventBytes, 0)
			if tc.wantErr != 0 {
				e, ok := mongoerr.As(err)
				if !ok || e.Code != tc.wantErr {
					t.Fatalf("got %v, want %d", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if len(docs) != 2 {
				t.Fatalf("%d fragments, want 2", len(docs))
			}
			for i, d := range docs {
				if len(d) > limit || d.Lookup("splitEvent", "fragment").Int32() != int32(i+1) || d.Lookup("splitEvent", "of").Int32() != 2 {
					t.Errorf("fragment %d: %d bytes, %s", i, len(d), d.Lookup("splitEvent"))
				}
			}
			if docs[1].Lookup("fullDocument", "_id").StringValue() != name {
				t.Errorf("the large field goes last: %s", docs[1])
			}
		})
	}
}

func TestStreamResumeFromFragment(t *testing.T) {
	st := openStore(t, store.Config{})
	big := bson.D{{Key: "_id", Value: "big"}, {Key: "a", Value: strings.Repeat("x", 3000)}}
	limit := eventSize(t, st, big) - 1
	split := []bson.D{{{Key: "$changeStreamSplitLargeEvent", Value: bson.D{}}}}
	s := openStream(t, st, nil, split...)
	s.maxEvent = limit
	big[0].Value = "big2"
	insert(t, st, testNS, big)
	insert(t, st, testNS, bson.D{{Key: "_id", Value: "next"}})
	docs, _, _, err := s.Next(t.Context(), 10, maxEventBytes, 0)
	if err != nil || len(docs) != 3 {
		t.Fatalf("%d docs, %v", len(docs), err)
	}
	frag0 := docs[0].Lookup("_id").Document()

	r := openStream(t, st, bson.D{{Key: "resumeAfter", Value: frag0}}, split...)
	r.maxEvent = limit
	rest, _, _, err := r.Next(t.Context(), 10, maxEventBytes, 0)
	if err != nil {
		t.Fatal(err)
	}
	if len(rest) != 2 {
		t.Fatalf("resumed with %d docs, want 2", len(rest))
	}
	for i := range rest {
		if string(rest[i]) != string(docs[i+1]) {
			t.Errorf("doc %d differs after resume", i)
		}
	}
}

func TestStreamHistoryLost(t *testing.T) {
	st := openStore(t, store.Config{OplogBytes: 16 << 10})
	insert(t, st, testNS, bson.D{{Key: "_id", Value: 0}})
	s := openStream(t, st, bson.D{{Key: "startAtOperationTime", Value: bson.Timestamp{T: 1, I: 1}}})
	docs, _, _, err := s.Next(t.Context(), 10, maxEventBytes, 0)
	if err != nil || len(docs) != 1 {
		t.Fatalf("%d docs, %v", len(docs), err)
	}
	// Fall behind past the bound while not reading.
	pad := strings.Repeat("p", 1024)
	for i := range 64 {
		insert(t, st, testNS, bson.D{{Key: "_id", Value: i + 1}, {Key: "pad", Value: pad}})
	}
	_, _, _, err = s.Next(t.Context(), 10, maxEventBytes, 0)
	e, ok := mongoerr.As(err)
	if !ok || e.Code != mongoerr.ChangeStreamHistoryLost || !e.HasLabel(labelNonResumable) {
		t.Fatalf("got %v, want 286 labelled NonResumableChangeStreamError", err)
	}
	sp, _ := Parse(testNS.DB, testNS.Coll, stages(t, cs(bson.D{{Key: "startAtOperationTime", Value: bson.Timestamp{T: 1, I: 1}}})))
	if _, err := Open(sp, st, nil); err == nil {
		t.Error("opening at a lost time must fail")
	} else if e, ok := mongoerr.As(err); !ok || e.Code != mongoerr.ChangeStreamHistoryLost {
		t.Errorf("got %v, want 286", err)
	}
}

func TestLabelError(t *testing.T) {
	tests := map[string]struct {
		err  error
		want []string
	}{
		"transient":    {mongoerr.New(mongoerr.ShutdownInProgress, "x"), []string{labelResumable}},
		"fatal":        {mongoerr.New(mongoerr.ChangeStreamFatalError, "x"), []string{labelNonResumable}},
		"history lost": {mongoerr.New(mongoerr.ChangeStreamHistoryLost, "x"), []string{labelNonResumable}},
		"other":        {mongoerr.New(mongoerr.BadValue, "x"), nil},
		"given labels": {&mongoerr.Error{Code: 91, Labels: []string{"Other"}}, []string{"Other"}},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			e, _ := mongoerr.As(LabelError(tc.err))
			if strings.Join(e.Labels, ",") != strings.Join(tc.want, ",") {
				t.Errorf("labels %v, want %v", e.Labels, tc.want)
			}
		})
	}
	if LabelError(nil) != nil {
		t.Error("nil must stay nil")
	}
}

func TestStreamPipelineMustKeepID(t *testing.T) {
	tests := map[string]struct {
		stage   bson.D
		wantErr bool
	}{
		"unset _id":       {bson.D{{Key: "$unset", Value: "_id"}}, true},
		"replace _id":     {bson.D{{Key: "$set", Value: bson.D{{Key: "_id", Value: "mine"}}}}, true},
		"replaceRoot":     {bson.D{{Key: "$replaceRoot", Value: bson.D{{Key: "newRoot", Value: "$fullDocument"}}}}, true},
		"project keeps":   {bson.D{{Key: "$project", Value: bson.D{{Key: "operationType", Value: 1}}}}, false},
		"rewrite op type": {bson.D{{Key: "$set", Value: bson.D{{Key: "operationType", Value: "other"}}}}, false},
		"match filters":   {bson.D{{Key: "$match", Value: bson.D{{Key: "operationType", Value: "delete"}}}}, false},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			st := openStore(t, store.Config{})
			s := openStream(t, st, nil, tc.stage)
			insert(t, st, testNS, bson.D{{Key: "_id", Value: 1}})
			docs, _, _, err := s.Next(t.Context(), 10, maxEventBytes, 0)
			if !tc.wantErr {
				if err != nil {
					t.Fatal(err)
				}
				for _, d := range docs {
					if d.Lookup("_id", "_data").StringValue() == "" {
						t.Errorf("event without its token: %s", d)
					}
				}
				return
			}
			e, ok := mongoerr.As(err)
			if !ok || e.Code != mongoerr.ChangeStreamFatalError || !e.HasLabel(labelNonResumable) ||
				!strings.Contains(e.Message, "_id field") {
				t.Fatalf("got %v, want 280 labelled NonResumableChangeStreamError", err)
			}
		})
	}
}

// Events before a failing one are handed out first; the error follows.
func TestStreamDeliversEventsBeforeAnError(t *testing.T) {
	st := openStore(t, store.Config{})
	s := openStream(t, st, bson.D{{Key: "fullDocumentBeforeChange", Value: "required"}})
	insert(t, st, testNS, bson.D{{Key: "_id", Value: 1}})
	if _, err := st.Delete(testNS, mustDoc(t, bson.D{{Key: "_id", Value: 1}}), 1); err != nil {
		t.Fatal(err)
	}
	docs, _, _, err := s.Next(t.Context(), 10, maxEventBytes, 0)
	if err != nil || len(docs) != 1 || docs[0].Lookup("operationType").StringValue() != "insert" {
		t.Fatalf("first batch: %d docs, %v", len(docs), err)
	}
	_, _, _, err = s.Next(t.Context(), 10, maxEventBytes, 0)
	if e, ok := mongoerr.As(err); !ok || e.Code != mongoerr.NoMatchingDocument {
		t.Fatalf("got %v, want 47 for the delete without a pre-image", err)
	}
}

// clockAhead is a store whose cluster clock has moved past its oplog, as
// it has while a write that took its time is not yet in the oplog.
type clockAhead struct{ *store.Store }

func (c clockAhead) ClusterTime() bson.Timestamp {
	ts := c.Store.ClusterTime()
	ts.I++
	return ts
}

// TestStreamFromNowKeepsWriteInProgress: a stream opened without a start
// point starts after the newest write in the oplog, so a write in
// progress when it opens (its time taken, its oplog entry not yet
// appended) is returned, not skipped.
func TestStreamFromNowKeepsWriteInProgress(t *testing.T) {
	synctest.Test(t, func(t *testing.T) { // a fixed clock: the write takes the time the stream opened at
		st := openStore(t, store.Config{NoopInterval: -1})
		insert(t, st, testNS, bson.D{{Key: "_id", Value: "before"}})
		sp, err := Parse(testNS.DB, testNS.Coll, stages(t, cs(bson.D{})))
		if err != nil {
			t.Fatal(err)
		}
		s, err := Open(sp, clockAhead{st}, nil)
		if err != nil {
			t.Fatal(err)
		}
		defer s.Close()
		insert(t, st, testNS, bson.D{{Key: "_id", Value: "in progress"}})
		docs, _, _, err := s.Next(t.Context(), 10, maxEventBytes, 0)
		if err != nil {
			t.Fatal(err)
		}
		if len(docs) != 1 || docs[0].Lookup("documentKey", "_id").StringValue() != "in progress" {
			t.Fatalf("stream opened during a write returned %v, want that write's insert alone", docs)
		}
	})
}
