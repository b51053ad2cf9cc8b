package mongo

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"

	"github.com/tide-cdc/tide/cdc"
	"github.com/tide-cdc/tide/checkpoint"
	"github.com/tide-cdc/tide/encode"
	"github.com/tide-cdc/tide/pipeline"
	"github.com/tide-cdc/tide/sink/file"
)

// Writing $changeStreamSplitLargeEvent is allowed (last, with {}), and
// hashes as if it were not there: the source adds it by itself. The hash
// of a stream is what it was before the source split events, so existing
// checkpoints still match.
func TestSplitStageInPipeline(t *testing.T) {
	hashOf := func(t *testing.T, text string) (string, bool) {
		t.Helper()
		_, canon, split, err := parsePipeline(text)
		if err != nil {
			t.Fatalf("parsePipeline(%s): %v", text, err)
		}
		return streamHash(canon, "delta", "off"), split
	}
	// Recorded before the source split events; checkpoints hold them.
	golden := map[string]string{
		``: "0c4671c886a6af639fbd448ba6140e9e1896e16784830c3678834386cb25c23f",
		`[{"$match":{"operationType":"insert"}}]`: "8acea98aca3554e1dd2ca21fb5c8b3fb56dd878f961617ed372e5d18cff311cb",
	}
	for text, want := range golden {
		if got, split := hashOf(t, text); got != want || split {
			t.Errorf("stream hash of %q = %s (split %v), want %s as before", text, got, split, want)
		}
	}
	if got, split := hashOf(t, `[{"$changeStreamSplitLargeEvent": {}}]`); got != golden[``] || !split {
		t.Errorf("a pipeline of only the split stage hashes to %s (split %v), want the empty pipeline's hash", got, split)
	}
	if got, split := hashOf(t, `[{"$match":{"operationType":"insert"}}, {"$changeStreamSplitLargeEvent": {}}]`); got != golden[`[{"$match":{"operationType":"insert"}}]`] || !split {
		t.Errorf("$match then the split stage hashes to %s (split %v), want the $match's hash", got, split)
	}
	for text, word := range map[string]string{
		`[{"$changeStreamSplitLargeEvent": {}}, {"$match": {}}]`: "must be the last stage",
		`[{"$changeStreamSplitLargeEvent": {"x": 1}}]`:           "takes an empty document",
	} {
		if _, _, _, err := parsePipeline(text); err == nil || !strings.Contains(err.Error(), word) {
			t.Errorf("parsePipeline(%s) = %v, want %q", text, err, word)
		}
	}

	parse := func(pipeline string) error {
		doc := "name: orders\nsource:\n  mongo: {database: shop, collection: orders, pipeline: " + pipeline + "}\nsink: {stdout: {}}\n"
		_, err := parseSection(doc, func(string) (string, bool) { return "", false })
		return err
	}
	if err := parse(`[{$match: {operationType: insert}}, {$changeStreamSplitLargeEvent: {}}]`); err != nil {
		t.Errorf("validation refuses $changeStreamSplitLargeEvent as the last stage: %v", err)
	}
	for _, p := range []string{`[{$changeStreamSplitLargeEvent: {}}, {$match: {}}]`, `[{$changeStreamSplitLargeEvent: {a: 1}}]`} {
		if err := parse(p); err == nil || !strings.Contains(err.Error(), "pipeline[0]: $changeStreamSplitLargeEvent must be the last stage and take an empty object") {
			t.Errorf("validation of %s = %v, want pipeline[0] named and the rule stated", p, err)
		}
	}
}

// bigDoc is a document of about 15.9 MiB: two strings of c, the first of
// 8 MiB.
func bigDoc(id int, c byte) bson.D {
	return bson.D{
		{Key: "_id", Value: id},
		{Key: "a", Value: strings.Repeat(string(c), 8<<20)},
		{Key: "b", Value: strings.Repeat(string(c), 15900<<10-8<<20)},
	}
}

// largeUpdate inserts a 15.9 MiB document, updates half of it and
// inserts a small one. With full_document update_lookup the update's
// change event is about 24 MiB: the server must split it.
func largeUpdate(t *testing.T, coll *mongo.Collection) {
	t.Helper()
	ctx := context.Background()
	if _, err := coll.InsertOne(ctx, bigDoc(1, 'x')); err != nil {
		t.Fatalf("insert the 15.9 MiB document: %v", err)
	}
	if _, err := coll.UpdateOne(ctx, bson.D{{Key: "_id", Value: 1}},
		bson.D{{Key: "$set", Value: bson.D{{Key: "a", Value: strings.Repeat("y", 8<<20)}}}}); err != nil {
		t.Fatalf("update it: %v", err)
	}
	insert(t, coll, 2)
}

// fragmentTokens reads, with the driver alone, the split update's
// fragments after tok and returns their tokens, in order.
func fragmentTokens(t *testing.T, coll *mongo.Collection, tok bson.Raw) []bson.Raw {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cs, err := coll.Watch(ctx, bson.A{bson.D{{Key: splitStage, Value: bson.D{}}}},
		options.ChangeStream().SetFullDocument(options.UpdateLookup).SetResumeAfter(tok))
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close(context.Background())
	var toks []bson.Raw
	for cs.Next(ctx) {
		frag, of := cs.Current.Lookup("splitEvent", "fragment").AsInt64(), cs.Current.Lookup("splitEvent", "of")
		if of.Type == 0 {
			continue
		}
		toks = append(toks, bytes.Clone(cs.Current.Lookup("_id").Document()))
		if frag == of.AsInt64() {
			return toks
		}
	}
	t.Fatalf("no split event after %v: %v", tok, cs.Err())
	return nil
}

// A change event over 16 MiB reaches the runtime as one event, whole,
// whose position is its last fragment's token; resuming from it gives
// the next event, and resuming from the event before gives the large one
// again, whole and once: a restart never starts inside a split event.
func TestLargeEventReassembled(t *testing.T) {
	e := newEnv(t)
	cfg := e.config(t)
	cfg.FullDocument = "update_lookup"
	src := openSource(t, cfg, nil)
	if got := src.Identity()[splitKey]; got != "true" {
		t.Fatalf("identity %s = %q, want true against a 7.0 server", splitKey, got)
	}
	largeUpdate(t, e.coll)

	got, err := pollUntil(t, src, func(evs []cdc.Event) bool { return len(nonMarkers(evs)) >= 3 })
	if err != nil {
		t.Fatal(err)
	}
	evs := nonMarkers(got)
	if want := []cdc.Op{cdc.OpInsert, cdc.OpUpdate, cdc.OpInsert}; !slicesEqual(ops(evs), want) {
		t.Fatalf("ops = %v, want %v: the split update as one event", ops(evs), want)
	}
	upd := evs[1]
	full := bson.Raw(upd.FullDocument)
	if a, b := full.Lookup("a").StringValue(), full.Lookup("b").StringValue(); len(a) != 8<<20 || a[0] != 'y' || len(b) != 15900<<10-8<<20 {
		t.Errorf("update's full document has a of %d bytes and b of %d, want the updated 15.9 MiB document", len(a), len(b))
	}
	if a := bson.Raw(upd.UpdateDesc).Lookup("updatedFields", "a").StringValue(); len(a) != 8<<20 {
		t.Errorf("update description's a is %d bytes, want 8 MiB", len(a))
	}
	if upd.ClusterTime.T == 0 || upd.Namespace != "shop.orders" || docID(t, upd) != 1 {
		t.Errorf("update: cluster time %v, namespace %q, key %v: want all from the first fragment", upd.ClusterTime, upd.Namespace, bson.Raw(upd.DocumentKey))
	}
	if bson.Raw(upd.Extra).Lookup("splitEvent").Type != 0 {
		t.Errorf("the whole event still carries a splitEvent: %v", bson.Raw(upd.Extra))
	}

	frags := fragmentTokens(t, e.coll, evs[0].ResumeToken)
	if len(frags) < 2 {
		t.Fatalf("the update came in %d fragment(s), want it split", len(frags))
	}
	lastTok := frags[len(frags)-1]
	// No position, of an event or of a marker, names a fragment before
	// the last: a checkpoint there would resume inside the event.
	for _, ev := range got {
		for i, ft := range frags[:len(frags)-1] {
			if bytes.Contains(ev.Pos, []byte(tokenJSON(ft))) {
				t.Errorf("%s position %s is fragment %d's token", ev.Op, ev.Pos, i+1)
			}
		}
	}
	if !bytes.Equal(upd.ResumeToken, lastTok) {
		t.Errorf("update token = %v, want the last fragment's %v", bson.Raw(upd.ResumeToken), lastTok)
	}
	if !bytes.Contains(upd.Pos, []byte(tokenJSON(lastTok))) {
		t.Errorf("update position = %s, want the last fragment's token %s", upd.Pos, tokenJSON(lastTok))
	}

	for name, tc := range map[string]struct {
		after cdc.Event
		want  []cdc.Op
	}{
		"after the large event":  {upd, []cdc.Op{cdc.OpInsert}},
		"before the large event": {evs[0], []cdc.Op{cdc.OpUpdate, cdc.OpInsert}},
	} {
		t.Run(name, func(t *testing.T) {
			cp := checkpointOf(tc.after.Pos, src.Identity())
			again := openSource(t, cfg, &cp)
			got, err := pollUntil(t, again, func(evs []cdc.Event) bool { return len(nonMarkers(evs)) >= len(tc.want) })
			if err != nil {
				t.Fatal(err)
			}
			if evs := nonMarkers(got); !slicesEqual(ops(evs), tc.want) || docID(t, evs[len(evs)-1]) != 2 {
				t.Fatalf("resumed %s: ops %v, want %v ending with insert 2", name, ops(evs), tc.want)
			}
		})
	}
}

// The pipeline writes the large event as one line of the file, and the
// checkpoint after it names the last fragment's token.
func TestLargeEventThroughPipeline(t *testing.T) {
	e := newEnv(t)
	cfg := e.config(t)
	cfg.FullDocument = "update_lookup"
	dir := t.TempDir()
	out := filepath.Join(dir, "orders.jsonl")
	store, err := checkpoint.Open(filepath.Join(dir, "ckpt"), slogDiscard())
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	src := New(cfg)
	p := pipeline.New(pipeline.Config{Name: "orders", CommitInterval: 20 * time.Millisecond, Workers: 2},
		src, encode.Envelope, file.New(file.Config{Path: out}), store)
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() { done <- p.Run(ctx) }()
	waitFor(t, "the first checkpoint", func() bool { return p.Stats().Batches > 0 })
	largeUpdate(t, e.coll)
	waitFor(t, "three lines", func() bool {
		select {
		case err := <-done:
			t.Fatalf("the pipeline stopped before writing the large event: %v", err)
		default:
		}
		fi, err := os.Stat(out) // cheap, before reading 40 MB
		return err == nil && fi.Size() > 30<<20 && len(readLines(t, out)) >= 3
	})
	if err := p.Drain(t.Context()); err != nil {
		t.Fatal(err)
	}
	cancel()
	if err := <-done; err != nil && !errors.Is(err, context.Canceled) {
		t.Fatal(err)
	}
	lines := readLines(t, out)
	var got []change
	for i, l := range lines {
		var line struct {
			Op  cdc.Op `json:"_op"`
			Key struct {
				ID int64 `json:"_id"`
			} `json:"_document_key"`
			Full struct {
				A string `json:"a"`
			} `json:"_full_document"`
		}
		if err := json.Unmarshal(l, &line); err != nil {
			t.Fatalf("line %d (%d bytes): %v", i+1, len(l), err)
		}
		got = append(got, change{line.Op, line.Key.ID})
		if line.Op == cdc.OpUpdate && len(line.Full.A) != 8<<20 {
			t.Errorf("the update's line has _full_document.a of %d bytes, want 8 MiB", len(line.Full.A))
		}
	}
	if want := []change{{cdc.OpInsert, 1}, {cdc.OpUpdate, 1}, {cdc.OpInsert, 2}}; !slicesEqual(got, want) {
		t.Fatalf("file holds %v, want %v", got, want)
	}
	cp, err := store.Load(context.Background(), "orders")
	if err != nil || cp == nil {
		t.Fatalf("load checkpoint: %v", err)
	}
	if cp.Meta[splitKey] != "true" {
		t.Errorf("checkpoint identity %s = %q, want true", splitKey, cp.Meta[splitKey])
	}
}

// readLines returns the complete lines of a JSON-lines file, however
// long (readJSONL's scanner stops at 16 MiB; the large event's line is
// longer).
func readLines(t *testing.T, path string) [][]byte {
	t.Helper()
	b, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		t.Fatal(err)
	}
	lines := bytes.SplitAfter(b, []byte("\n"))
	var out [][]byte
	for _, l := range lines {
		if len(l) > 0 && l[len(l)-1] == '\n' {
			out = append(out, l[:len(l)-1])
		}
	}
	return out
}

// A checkpoint written before the source split events (no
// split_large_events) is accepted; one written while splitting is refused
// by a stream that does not split, naming the field.
func TestSplitIdentity(t *testing.T) {
	e := newEnv(t)
	cp := checkpointAfter(t, e.config(t))
	delete(cp.Meta, splitKey)
	openSource(t, e.config(t), &cp)

	now := map[string]string{}
	for k, v := range cp.Meta {
		now[k] = v
	}
	saved := map[string]string{splitKey: "true"}
	for k, v := range cp.Meta {
		saved[k] = v
	}
	now[splitKey] = "false"
	wantErr(t, checkIdentity(saved, now), ErrIdentity, splitKey, "$changeStreamSplitLargeEvent", "tide checkpoint reset")
	saved[splitKey] = "false"
	now[splitKey] = "true"
	if err := checkIdentity(saved, now); err != nil {
		t.Errorf("a checkpoint written without splitting is refused by a splitting stream: %v", err)
	}
}

// fragment builds fragment n of m of an event, with one field.
func fragment(t *testing.T, n, m int, key, value string) bson.Raw {
	t.Helper()
	b, err := bson.Marshal(bson.D{
		{Key: "_id", Value: bson.D{{Key: "_data", Value: "tok" + string(rune('0'+n))}}},
		{Key: "splitEvent", Value: bson.D{{Key: "fragment", Value: int32(n)}, {Key: "of", Value: int32(m)}}},
		{Key: key, Value: value},
	})
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// Fragments join in order into one event with the last fragment's token;
// anything else (a gap, a repeat, an event in between, a start past
// fragment 1) is an error, and reset drops a half-read event.
func TestFragmentsJoin(t *testing.T) {
	var f fragments
	if whole, err := f.add(fragment(t, 1, 3, "operationType", "update"), 0); whole != nil || err != nil || !f.pending() {
		t.Fatalf("fragment 1 of 3: %v, %v, pending %v; want nothing yet", whole, err, f.pending())
	}
	if whole, err := f.add(fragment(t, 2, 3, "fullDocument", "big"), 0); whole != nil || err != nil {
		t.Fatalf("fragment 2 of 3: %v, %v; want nothing yet", whole, err)
	}
	whole, err := f.add(fragment(t, 3, 3, "updateDescription", "desc"), 0)
	if err != nil || whole == nil || f.pending() {
		t.Fatalf("fragment 3 of 3: %v, %v, pending %v; want the whole event", whole, err, f.pending())
	}
	want := `{"_id": {"_data": "tok3"},"operationType": "update","fullDocument": "big","updateDescription": "desc"}`
	if got := bson.Raw(whole).String(); got != want {
		t.Errorf("whole event = %s, want %s", got, want)
	}

	plain, _ := bson.Marshal(bson.D{{Key: "_id", Value: bson.D{{Key: "_data", Value: "p"}}}, {Key: "operationType", Value: "insert"}})
	if got, err := f.add(plain, 0); err != nil || !bytes.Equal(got, plain) {
		t.Errorf("a whole event passes as it is: %v, %v", bson.Raw(got), err)
	}

	bad := map[string][]bson.Raw{
		"a gap":                 {fragment(t, 1, 3, "a", "x"), fragment(t, 3, 3, "b", "y")},
		"a repeat":              {fragment(t, 1, 2, "a", "x"), fragment(t, 1, 2, "a", "x")},
		"an event in between":   {fragment(t, 1, 2, "a", "x"), plain},
		"a start past 1":        {fragment(t, 2, 2, "a", "x")},
		"another fragment size": {fragment(t, 1, 2, "a", "x"), fragment(t, 2, 3, "b", "y")},
	}
	for name, docs := range bad {
		t.Run(name, func(t *testing.T) {
			var f fragments
			var err error
			for _, d := range docs {
				if _, err = f.add(d, 0); err != nil {
					break
				}
			}
			if err == nil || !strings.Contains(err.Error(), "fragment") {
				t.Fatalf("err = %v, want one naming the fragment", err)
			}
		})
	}

	f.reset()
	f.add(fragment(t, 1, 2, "a", "x"), 0)
	f.reset() // the stream broke: the event is read again from fragment 1
	if _, err := f.add(fragment(t, 1, 2, "a", "x"), 0); err != nil || !f.pending() {
		t.Fatalf("after reset, fragment 1 again: %v, pending %v", err, f.pending())
	}
	if whole, err := f.add(fragment(t, 2, 2, "b", "y"), 0); err != nil || bson.Raw(whole).Lookup("a").StringValue() != "x" || bson.Raw(whole).Lookup("b").StringValue() != "y" {
		t.Fatalf("after reset: %v, %v; want a and b once", bson.Raw(whole), err)
	}
}
