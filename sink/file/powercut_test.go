package file

import (
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/tide-cdc/tide/cdc"
	"github.com/tide-cdc/tide/checkpoint"
	"github.com/tide-cdc/tide/internal/faultfs"
)

// cutRun is what the runtime does with a file sink and a checkpoint store:
// load, open, then batches of put, commit, save, with every file of both
// going through disk. It returns the sequence number of the last record
// in a checkpoint whose Save returned, and stops at the first error (the
// power failing) or after the last batch.
func cutRun(t *testing.T, disk *faultfs.Disk, dir string, batches int) (saved int, err error) {
	t.Helper()
	return cutRunAt(t, disk, dir, filepath.Join(dir, "out.jsonl"), nil, batches)
}

// cutRunAt is cutRun writing to path, record seq in namespace
// nss[seq%len(nss)] if nss is not empty.
func cutRunAt(t *testing.T, disk *faultfs.Disk, dir, path string, nss []string, batches int) (saved int, err error) {
	t.Helper()
	ctx := t.Context()
	store, err := checkpoint.OpenFS(disk, filepath.Join(dir, "data"), nil)
	if err != nil {
		return 0, err
	}
	defer store.Close()
	cp, err := store.Load(ctx, "p")
	if err != nil {
		t.Fatalf("Load: %v", err) // a cut may stop a run, never make a checkpoint unreadable
	}
	seq := seqOf(t, cp)
	saved = seq
	cfg := Config{Path: path, FS: disk}
	if len(nss) > 0 {
		cfg.Pipeline, cfg.DataDir = "p", filepath.Join(dir, "data")
	}
	s := New(cfg)
	if err := s.Open(ctx, cp); err != nil {
		return saved, err
	}
	defer s.Close()
	for b := range batches {
		var batch []cdc.Record
		for range 1 + (b*7)%5 {
			seq++
			r := cdc.Record{Event: cdc.Event{Pos: cdc.Position(fmt.Sprintf(`{"seq":%d}`, seq))}, Data: line(seq)}
			if len(nss) > 0 {
				r.Namespace = nss[seq%len(nss)]
			}
			batch = append(batch, r)
		}
		if err := s.Put(ctx, batch); err != nil {
			return saved, err
		}
		next := cdc.Checkpoint{Source: batch[len(batch)-1].Pos, Sink: s.State()}
		if err := s.Commit(ctx, next); err != nil {
			return saved, err
		}
		if err := store.Save(ctx, "p", next); err != nil {
			return saved, err
		}
		s.CheckpointSaved(next)
		saved = seq
	}
	return saved, nil
}

func line(seq int) []byte {
	return fmt.Appendf(nil, `{"seq":%d,"pad":"%s"}`, seq, strings.Repeat("x", seq%37))
}

func seqOf(t *testing.T, cp *cdc.Checkpoint) int {
	t.Helper()
	if cp == nil {
		return 0
	}
	var pos struct{ Seq int }
	if err := json.Unmarshal(cp.Source, &pos); err != nil {
		t.Fatalf("checkpoint position %s: %v", cp.Source, err)
	}
	return pos.Seq
}

// TestFileSinkSurvivesPowerCuts cuts the power under a file sink and its
// checkpoint store at every file operation of a run of batches (a fresh
// start first, then a restart with a checkpoint), then restarts: the
// checkpoint store must give back the last saved checkpoint or the one in
// flight, and the sink, opened with it, must leave a file that holds
// exactly the records up to that checkpoint, whole lines, no duplicate; a
// run after that continues the sequence.
func TestFileSinkSurvivesPowerCuts(t *testing.T) {
	const batches = 20
	cuts, cutTails := 0, 0
	for budget := 0; ; budget++ {
		for variant := range uint64(3) {
			dir := t.TempDir()
			disk := faultfs.NewDisk()
			rng := rand.New(rand.NewPCG(uint64(budget), variant))
			// Half the runs restart once before the cut, so that the cut
			// also lands in Open with a checkpoint (truncate, marker
			// removal) and in the first Save of a process.
			restart := variant == 1
			first := 0
			if restart {
				var err error
				if first, err = cutRun(t, disk, dir, 3); err != nil {
					t.Fatal(err)
				}
			}
			disk.FailAfter(budget)
			saved, err := cutRun(t, disk, dir, batches)
			if err != nil && !errors.Is(err, faultfs.ErrPowerCut) {
				t.Fatalf("budget %d variant %d: run: %v", budget, variant, err)
			}
			if err == nil && variant == 0 {
				t.Logf("%d cut points; %d left bytes after the checkpoint", cuts, cutTails)
				if cuts < 200 || cutTails == 0 {
					t.Fatalf("only %d cut points, %d with bytes to cut", cuts, cutTails)
				}
				return
			}
			r := rng
			if variant == 2 {
				r = nil // the worst case: nothing unsynced survives
			}
			if err := disk.Cut(r); err != nil {
				t.Fatal(err)
			}
			cuts++

			store, err := checkpoint.Open(filepath.Join(dir, "data"), nil)
			if err != nil {
				t.Fatal(err)
			}
			cp, err := store.Load(t.Context(), "p")
			store.Close()
			if err != nil {
				t.Fatalf("budget %d variant %d: Load after the cut: %v", budget, variant, err)
			}
			seq := seqOf(t, cp)
			if seq < max(saved, first) {
				t.Fatalf("budget %d variant %d: checkpoint after the cut is at %d, but %d was saved", budget, variant, seq, saved)
			}
			path := filepath.Join(dir, "out.jsonl")
			if fi, err := os.Stat(path); err == nil && cp != nil && fi.Size() > committedOf(t, cp) {
				cutTails++
			}
			s := New(Config{Path: path})
			if err := s.Open(t.Context(), cp); err != nil {
				t.Fatalf("budget %d variant %d: Open after the cut with checkpoint %s: %v", budget, variant, cp.Source, err)
			}
			s.Close()
			checkRecordLines(t, path, seq, fmt.Sprintf("budget %d variant %d: after the cut", budget, variant))

			// The next run continues where the checkpoint is.
			end, err := cutRun(t, faultfs.NewDisk(), dir, 2)
			if err != nil {
				t.Fatalf("budget %d variant %d: run after the cut: %v", budget, variant, err)
			}
			checkRecordLines(t, path, end, fmt.Sprintf("budget %d variant %d: after the run that followed the cut", budget, variant))
		}
	}
}

func committedOf(t *testing.T, cp *cdc.Checkpoint) int64 {
	n, _, _, err := restoredLength(cp)
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// checkRecordLines requires the file to hold exactly the lines of records 1 to
// n, in order.
func checkRecordLines(t *testing.T, path string, n int, when string) {
	t.Helper()
	b, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) && n == 0 {
		return
	}
	if err != nil {
		t.Fatal(err)
	}
	var want []byte
	for i := 1; i <= n; i++ {
		want = append(append(want, line(i)...), '\n')
	}
	if string(b) != string(want) {
		t.Fatalf("%s: the file holds\n%q\nwant records 1 to %d:\n%q", when, b, n, want)
	}
}

// TestTemplateSurvivesPowerCuts is TestFileSinkSurvivesPowerCuts for a
// sink writing one file per namespace, the files created one after the
// other during the run: a cut at any file operation (a file's creation,
// its marker, between the fsyncs of two files, before the checkpoint's
// save) leaves, after a restart, each file at exactly its committed
// length, and no file the checkpoint does not name.
func TestTemplateSurvivesPowerCuts(t *testing.T) {
	const batches = 12
	nss := []string{"db.a", "db.b", "other.c"}
	cuts := 0
	for budget := 0; ; budget++ {
		for variant := range uint64(2) {
			dir := t.TempDir()
			tmpl := filepath.Join(dir, "out", "{db}", "{coll}.jsonl")
			disk := faultfs.NewDisk()
			rng := rand.New(rand.NewPCG(uint64(budget), variant))
			disk.FailAfter(budget)
			saved, err := cutRunAt(t, disk, dir, tmpl, nss, batches)
			if err != nil && !errors.Is(err, faultfs.ErrPowerCut) {
				t.Fatalf("budget %d variant %d: run: %v", budget, variant, err)
			}
			if err == nil && variant == 0 {
				t.Logf("%d cut points", cuts)
				if cuts < 100 {
					t.Fatalf("only %d cut points", cuts)
				}
				return
			}
			r := rng
			if variant == 1 {
				r = nil // nothing unsynced survives
			}
			if err := disk.Cut(r); err != nil {
				t.Fatal(err)
			}
			cuts++

			store, err := checkpoint.Open(filepath.Join(dir, "data"), nil)
			if err != nil {
				t.Fatal(err)
			}
			cp, err := store.Load(t.Context(), "p")
			store.Close()
			if err != nil {
				t.Fatalf("budget %d variant %d: Load after the cut: %v", budget, variant, err)
			}
			seq := seqOf(t, cp)
			if seq < saved {
				t.Fatalf("budget %d variant %d: checkpoint after the cut is at %d, but %d was saved", budget, variant, seq, saved)
			}
			when := fmt.Sprintf("budget %d variant %d: after the cut", budget, variant)
			s := New(Config{Path: tmpl, Pipeline: "p", DataDir: filepath.Join(dir, "data")})
			if err := s.Open(t.Context(), cp); err != nil {
				t.Fatalf("%s: Open with checkpoint %s: %v", when, cp.Source, err)
			}
			s.Close()
			checkNSFiles(t, dir, nss, seq, when)

			end, err := cutRunAt(t, faultfs.NewDisk(), dir, tmpl, nss, 2)
			if err != nil {
				t.Fatalf("%s: the run that followed: %v", when, err)
			}
			checkNSFiles(t, dir, nss, end, when+", and a run")
		}
	}
}

// checkNSFiles requires each namespace's file under dir/out to hold
// exactly its records among 1 to n, and no other data file to exist.
func checkNSFiles(t *testing.T, dir string, nss []string, n int, when string) {
	t.Helper()
	for k, ns := range nss {
		db, coll, _ := strings.Cut(ns, ".")
		path := filepath.Join(dir, "out", db, coll+".jsonl")
		var want []byte
		for i := 1; i <= n; i++ {
			if i%len(nss) == k {
				want = append(append(want, line(i)...), '\n')
			}
		}
		b, err := os.ReadFile(path)
		if errors.Is(err, os.ErrNotExist) && len(want) == 0 {
			continue
		}
		if err != nil {
			t.Fatalf("%s: %v", when, err)
		}
		if string(b) != string(want) {
			t.Fatalf("%s: %s holds\n%q\nwant\n%q", when, path, b, want)
		}
	}
}
