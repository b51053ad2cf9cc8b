package mongo

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"path/filepath"
	"strings"
	"testing"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/tide-cdc/tide/cdc"
	"github.com/tide-cdc/tide/checkpoint"
	"github.com/tide-cdc/tide/internal/testenv"
)

// logTo makes cfg log at Info to t's output and to the returned buffer.
func logTo(t testing.TB, cfg *Config) *testenv.Buffer {
	var buf testenv.Buffer
	cfg.Logger = slog.New(slog.NewTextHandler(io.MultiWriter(t.Output(), &buf), nil))
	return &buf
}

// stoppedAfter runs a source of cfg until n changes were read and
// returns a checkpoint at the last one, as a pipeline that committed it
// and crashed would leave.
func stoppedAfter(t *testing.T, e *multiEnv, cfg Config, n int, write func()) cdc.Checkpoint {
	t.Helper()
	src := openSource(t, cfg, nil)
	write()
	evs, err := pollUntil(t, src, countOps(n))
	if err != nil {
		t.Fatal(err)
	}
	cp := checkpointOf(evs[len(evs)-1].Pos, src.Identity())
	src.Close()
	return cp
}

func drop(t testing.TB, e *multiEnv, ns string) {
	t.Helper()
	if err := e.coll(ns).Drop(context.Background()); err != nil {
		t.Fatal(err)
	}
}

// A collection dropped and re-created while the pipeline was stopped:
// the stream from the checkpoint shows the old collection's last
// changes, its drop, the create and the new collection's inserts, and a
// restart delivers them in order, from the checkpoint and from every
// position of the stream after it.
func TestMultiRecreatedWhileStopped(t *testing.T) {
	e := newMultiEnv(t, "shop.orders", "shop.cust")
	cfg := e.config(t, "shop", "*")
	cp := stoppedAfter(t, e, cfg, 1, func() { insert(t, e.coll("shop.orders"), 1) })

	insert(t, e.coll("shop.orders"), 2) // the old collection, after the checkpoint
	drop(t, e, "shop.orders")
	e.create(t, "shop.orders")
	insert(t, e.coll("shop.orders"), 3)
	insert(t, e.coll("shop.cust"), 4)
	want := []mchange{
		ins("shop.orders", 2), {cdc.OpDrop, "shop.orders", -1}, {cdc.OpCreate, "shop.orders", -1},
		ins("shop.orders", 3), ins("shop.cust", 4),
	}

	c := cfg
	logs := logTo(t, &c)
	again := openSource(t, c, &cp)
	all, err := pollUntil(t, again, countOps(len(want)))
	if err != nil {
		t.Fatal(err)
	}
	wantChanges(t, changes(t, all), want...)
	for _, w := range []string{"another UUID than in the checkpoint", "shows the old collection's end"} {
		if !strings.Contains(logs.String(), w) {
			t.Errorf("log does not say %q:\n%s", w, logs)
		}
	}
	if got := catalogAt(t, again.Identity(), all[len(all)-1].Pos); got["shop.orders"] == catalogAt(t, cp.Meta, cp.Source)["shop.orders"] {
		t.Errorf("catalog after the create still has the old UUID of shop.orders: %v", got)
	}

	// A crash at any point after the checkpoint resumes the same way.
	meta := again.Identity()
	again.Close()
	evs := nonMarkers(all)
	for k := range evs {
		t.Run(fmt.Sprint(k), func(t *testing.T) {
			cp := checkpointOf(evs[k].Pos, meta)
			third := openSource(t, cfg, &cp)
			got, err := pollUntil(t, third, countOps(len(evs)-k-1))
			if err != nil {
				t.Fatal(err)
			}
			wantChanges(t, changes(t, got), want[k+1:]...)
		})
	}
}

// A collection renamed over (dropTarget) while the pipeline was stopped:
// the rename onto it ends the old one.
func TestMultiRenamedOverWhileStopped(t *testing.T) {
	e := newMultiEnv(t, "shop.orders", "shop.cust")
	cfg := e.config(t, "shop", "*")
	cp := stoppedAfter(t, e, cfg, 1, func() { insert(t, e.coll("shop.orders"), 1) })

	e.create(t, "shop.tmp")
	insert(t, e.coll("shop.tmp"), 5)
	e.adminCommand(t, bson.D{{Key: "renameCollection", Value: "shop.tmp"}, {Key: "to", Value: "shop.orders"}, {Key: "dropTarget", Value: true}})
	insert(t, e.coll("shop.orders"), 6)

	again := openSource(t, cfg, &cp)
	got, err := pollUntil(t, again, countOps(4))
	if err != nil {
		t.Fatal(err)
	}
	wantChanges(t, changes(t, got),
		mchange{cdc.OpCreate, "shop.tmp", -1}, ins("shop.tmp", 5), mchange{cdc.OpRename, "shop.tmp", -1}, ins("shop.orders", 6))
}

// forgeUUID returns cp with another UUID for ns in the catalog its
// position names: a collection whose drop is not in the stream.
func forgeUUID(t *testing.T, cp cdc.Checkpoint, ns string) cdc.Checkpoint {
	t.Helper()
	e, ok := positionEpoch(cp.Source)
	if !ok {
		t.Fatalf("position %s names no catalog", cp.Source)
	}
	cat := catalogAt(t, cp.Meta, cp.Source)
	if cat[ns] == "" {
		t.Fatalf("catalog %v has no UUID for %s", cat, ns)
	}
	cat[ns] = "00112233445566778899aabbccddeeff"
	cp.Meta = maps.Clone(cp.Meta)
	cp.Meta[catalogKey(e)] = cat.json()
	return cp
}

// A UUID that differs from the checkpoint's without the collection's
// drop in the stream is refused while reading: at the first event of the
// new collection, or when the stream is read to its end; nothing of that
// collection is handed out, and the message names the ways on.
func TestMultiUUIDChangedWithoutDropRefused(t *testing.T) {
	ways := []string{"shop.orders", "00112233445566778899aabbccddeeff", "tide checkpoint reset -f FILE --yes", "tide snapshot -f FILE"}
	for name, tc := range map[string]struct {
		cluster bool // a cluster-wide source, whose exclude entries are "db.coll"
		write   func(e *multiEnv)
		words   []string
		want    []mchange
	}{
		"event first": {
			write: func(e *multiEnv) { insert(t, e.coll("shop.cust"), 2); insert(t, e.coll("shop.orders"), 3) },
			words: []string{"shows an event of it (insert, UUID", "before any drop or rename of it"},
			want:  []mchange{ins("shop.cust", 2)},
		},
		"read to the end": {
			write: func(e *multiEnv) { insert(t, e.coll("shop.cust"), 2) },
			words: []string{"read to its end, shows no drop or rename of it"},
			want:  []mchange{ins("shop.cust", 2)},
		},
		"cluster-wide": {
			cluster: true,
			write:   func(e *multiEnv) { insert(t, e.coll("shop.orders"), 3) },
			words:   []string{"shows an event of it (insert, UUID", `add "shop.orders" to the source's exclude`},
		},
	} {
		t.Run(name, func(t *testing.T) {
			e := newMultiEnv(t, "shop.orders", "shop.cust")
			cfg := e.config(t, "shop", "*")
			if tc.cluster {
				cfg = e.config(t, "", "shop.*")
			} else {
				tc.words = append(tc.words, `add "orders" to the source's exclude`)
			}
			cp := stoppedAfter(t, e, cfg, 1, func() { insert(t, e.coll("shop.orders"), 1) })
			cp = forgeUUID(t, cp, "shop.orders")
			tc.write(e)

			again := openSource(t, cfg, &cp)
			evs, err := pollUntil(t, again, func([]cdc.Event) bool { return false })
			wantErr(t, err, ErrIdentity, append(ways, tc.words...)...)
			wantChanges(t, changes(t, evs), tc.want...)
		})
	}
}

// A filter narrowed at restart (more exclude entries, fewer collections)
// is accepted with a log line: an operator steps around a re-created
// collection without a reset. The checkpoints written from then on name
// the new filter.
func TestMultiFilterNarrowed(t *testing.T) {
	for name, edit := range map[string]func(*Config){
		"exclude":     func(c *Config) { c.Exclude = []string{"orders"} },
		"collections": func(c *Config) { c.Collections = []string{"cust"} },
	} {
		t.Run(name, func(t *testing.T) {
			e := newMultiEnv(t, "shop.orders", "shop.cust")
			cfg := e.config(t, "shop", "*")
			cp := stoppedAfter(t, e, cfg, 1, func() { insert(t, e.coll("shop.orders"), 1) })
			cp = forgeUUID(t, cp, "shop.orders")
			insert(t, e.coll("shop.orders"), 2)
			insert(t, e.coll("shop.cust"), 3)

			c := cfg
			edit(&c)
			logs := logTo(t, &c)
			again := openSource(t, c, &cp)
			evs, err := pollUntil(t, again, countOps(1))
			if err != nil {
				t.Fatal(err)
			}
			wantChanges(t, changes(t, evs), ins("shop.cust", 3))
			if !strings.Contains(logs.String(), "the filter narrows the checkpoint's: accepted") {
				t.Errorf("no log line says the narrowed filter was accepted:\n%s", logs)
			}
			id := again.Identity()
			if id["collections"] == cp.Meta["collections"] && id["exclude"] == cp.Meta["exclude"] || id["stream_hash"] == cp.Meta["stream_hash"] {
				t.Errorf("identity after a narrowed start keeps the checkpoint's filter: %v", id)
			}
			if cat := catalogAt(t, id, evs[len(evs)-1].Pos); cat["shop.orders"] != "" || cat["shop.cust"] == "" {
				t.Errorf("catalog after a narrowed start = %v, want shop.cust alone", cat)
			}
		})
	}
}

// A filter that widens is refused; so is a narrowing together with
// another change of the stream.
func TestMultiFilterWidenedRefused(t *testing.T) {
	e := newMultiEnv(t, "shop.orders", "shop.cust")
	cfg := e.config(t, "shop", "orders")
	cp := stoppedAfter(t, e, cfg, 1, func() { insert(t, e.coll("shop.orders"), 1) })
	for name, tc := range map[string]struct {
		edit  func(*Config)
		words []string
	}{
		"collections": {func(c *Config) { c.Collections = []string{"orders", "cust"} }, []string{"collections is", "other collections"}},
		"glob":        {func(c *Config) { c.Collections = []string{"*"}; c.Exclude = []string{"cust"} }, []string{"collections is"}},
		"narrowed and another pipeline": {func(c *Config) {
			c.Collections = []string{"orders"}
			c.Exclude = []string{"tmp"}
			c.Pipeline = `[{"$match": {"operationType": "insert"}}]`
		}, []string{"exclude is"}},
	} {
		t.Run(name, func(t *testing.T) {
			c := cfg
			tc.edit(&c)
			s := New(c)
			defer s.Close()
			wantErr(t, s.Open(t.Context(), &cp), ErrIdentity, append(tc.words, "tide checkpoint reset")...)
		})
	}
}

func TestFilterNarrows(t *testing.T) {
	type f struct {
		db            string
		include, excl []string
	}
	for name, tc := range map[string]struct {
		old, now f
		want     bool
	}{
		"same":                  {f{"shop", []string{"*"}, nil}, f{"shop", []string{"*"}, nil}, true},
		"exclude added":         {f{"shop", []string{"*"}, nil}, f{"shop", []string{"*"}, []string{"orders"}}, true},
		"exclude glob added":    {f{"shop", []string{"*"}, []string{"a"}}, f{"shop", []string{"*"}, []string{"a", "tmp*"}}, true},
		"collection left out":   {f{"shop", []string{"a", "b*"}, nil}, f{"shop", []string{"b*"}, nil}, true},
		"names for a glob":      {f{"shop", []string{"*"}, []string{"tmp"}}, f{"shop", []string{"a", "b"}, nil}, true},
		"cluster names":         {f{"", []string{"shop.*"}, nil}, f{"", []string{"shop.a"}, nil}, true},
		"exclude removed":       {f{"shop", []string{"*"}, []string{"a"}}, f{"shop", []string{"*"}, nil}, false},
		"name excluded before":  {f{"shop", []string{"*"}, []string{"tmp"}}, f{"shop", []string{"tmp"}, nil}, false},
		"collection added":      {f{"shop", []string{"a"}, nil}, f{"shop", []string{"a", "b"}, nil}, false},
		"glob for a name":       {f{"shop", []string{"a"}, nil}, f{"shop", []string{"a*"}, nil}, false},
		"narrower glob":         {f{"shop", []string{"*"}, nil}, f{"shop", []string{"a*"}, nil}, false}, // narrower, but not by the rule
		"other database":        {f{"shop", []string{"*"}, nil}, f{"crm", []string{"*"}, nil}, false},
		"cluster other db":      {f{"", []string{"shop.*"}, nil}, f{"", []string{"crm.a"}, nil}, false},
		"system name for glob":  {f{"shop", []string{"*"}, nil}, f{"shop", []string{"system.views"}, nil}, false},
		"glob kept, excl moved": {f{"shop", []string{"*"}, []string{"a"}}, f{"shop", []string{"*"}, []string{"b"}}, false},
	} {
		t.Run(name, func(t *testing.T) {
			old, err := newFilter(tc.old.db, tc.old.include, tc.old.excl)
			if err != nil {
				t.Fatal(err)
			}
			now, err := newFilter(tc.now.db, tc.now.include, tc.now.excl)
			if err != nil {
				t.Fatal(err)
			}
			if got := now.narrows(old); got != tc.want {
				t.Errorf("%+v narrows %+v = %v, want %v", tc.now, tc.old, got, tc.want)
			}
		})
	}
}

// The initial snapshot copies collections by name: one re-created while
// a pipeline stopped in the middle of it is refused at Open.
func TestMultiRecreatedMidSnapshotRefused(t *testing.T) {
	e := newMultiEnv(t, "shop.orders", "shop.cust")
	insert(t, e.coll("shop.orders"), 1, 2)
	insert(t, e.coll("shop.cust"), 3, 4)
	cfg := e.config(t, "shop", "*")
	cfg.Snapshot, cfg.SnapshotBatch = "initial", 1
	cp := stoppedAfter(t, e, cfg, 1, func() {})
	if !strings.HasPrefix(string(cp.Source), `{"snapshot":`) {
		t.Fatalf("checkpoint %s is not in the snapshot", cp.Source)
	}
	drop(t, e, "shop.orders")
	e.create(t, "shop.orders")

	s := New(cfg)
	defer s.Close()
	wantErr(t, s.Open(t.Context(), &cp), ErrIdentity, "shop.orders", "initial snapshot", "tide checkpoint reset", "tide snapshot -f FILE", "exclude")
}

// Through the pipeline: the refusal at the first event of the new
// collection stops it with the checkpoint as it was and nothing of that
// collection in the output, and the next run is refused the same way.
func TestPipelineUUIDChangedWithoutDropKeepsCheckpoint(t *testing.T) {
	e := newMultiEnv(t, "shop.orders", "shop.cust")
	cfg := e.config(t, "shop", "*")
	dir := t.TempDir()
	out := filepath.Join(dir, "out.jsonl")
	var store checkpoint.Mem
	ctx, cancel := context.WithCancel(t.Context())
	p, _ := newPipeline(t, cfg, out, &store)
	done := make(chan error, 1)
	go func() { done <- p.Run(ctx) }()
	waitFor(t, "first checkpoint", func() bool { return store.Saves() > 0 })
	insert(t, e.coll("shop.orders"), 1)
	waitFor(t, "the insert in the output", func() bool { return len(readJSONL(t, out)) == 1 })
	waitFor(t, "the insert committed", func() bool {
		cp, _ := store.Load(context.Background(), "orders")
		var st struct {
			Committed int64 `json:"committed_bytes"`
		}
		return json.Unmarshal(cp.Sink, &st) == nil && st.Committed == fileSize(t, out)
	})
	cancel()
	<-done
	cp, _ := store.Load(context.Background(), "orders")
	forged := forgeUUID(t, *cp, "shop.orders")
	if err := store.Save(context.Background(), "orders", forged); err != nil {
		t.Fatal(err)
	}

	insert(t, e.coll("shop.orders"), 2)
	for run := range 2 {
		p, _ := newPipeline(t, cfg, out, &store)
		wantErr(t, p.Run(t.Context()), ErrIdentity, "shop.orders", "before any drop or rename of it", "tide checkpoint reset", "tide snapshot", "exclude")
		after, _ := store.Load(context.Background(), "orders")
		if string(after.Source) != string(forged.Source) || !maps.Equal(after.Meta, forged.Meta) {
			t.Fatalf("run %d: checkpoint moved from %s to %s after the refusal", run+1, forged.Source, after.Source)
		}
		if got := readJSONL(t, out); len(got) != 1 {
			t.Fatalf("run %d: output holds %v, want the first insert alone", run+1, got)
		}
	}
}
