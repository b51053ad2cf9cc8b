package checkpoint

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/tide-cdc/tide/cdc"
	"github.com/tide-cdc/tide/internal/faultfs"
)

// TestDirFallsBackToOlderPage damages every byte of each page of a file
// whose two pages hold the last two checkpoints: damage to the newer page
// must give back the older checkpoint, damage to the older one the newer,
// and damage to both a refusal.
func TestDirFallsBackToOlderPage(t *testing.T) {
	dir := t.TempDir()
	var logs bytes.Buffer
	d, err := Open(dir, slogTo(&logs))
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	ctx := t.Context()
	older := cdc.Checkpoint{Source: cdc.Position(`{"seq":1}`), Sink: []byte(`{"committed_bytes":100}`)}
	newer := cdc.Checkpoint{Source: cdc.Position(`{"seq":2}`), Sink: []byte(`{"committed_bytes":200}`)}
	for _, cp := range []cdc.Checkpoint{older, newer} {
		if err := d.Save(ctx, "p", cp); err != nil {
			t.Fatal(err)
		}
	}
	path := File(dir, "p")
	good, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if len(good) != 2*pageSize {
		t.Fatalf("the file is %d bytes, want two pages", len(good))
	}
	// The first Save wrote page 1, the second page 2.
	if !strings.Contains(string(good[pageSize:]), `"seq": 2`) || !strings.Contains(string(good[:pageSize]), `"seq": 1`) {
		t.Fatalf("pages do not hold the two checkpoints:\n%s", good)
	}
	f, err := os.OpenFile(path, os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	flip := func(off int) {
		if _, err := f.WriteAt([]byte{good[off] ^ 0xff}, int64(off)); err != nil {
			t.Fatal(err)
		}
	}
	restore := func(off int) {
		if _, err := f.WriteAt(good[off:off+1], int64(off)); err != nil {
			t.Fatal(err)
		}
	}
	load := func() (*cdc.Checkpoint, error) { return d.Load(ctx, "p") }
	for i := range pageSize {
		flip(pageSize + i) // the newer page
		got, err := load()
		if err != nil || !sameCheckpoint(got, older) {
			t.Fatalf("byte %d of the newer page flipped: Load = %+v, %v; want the older checkpoint", i, got, err)
		}
		restore(pageSize + i)

		flip(i) // the older page
		got, err = load()
		if err != nil || !sameCheckpoint(got, newer) {
			t.Fatalf("byte %d of the older page flipped: Load = %+v, %v; want the newer checkpoint", i, got, err)
		}
		flip(pageSize + i) // and the newer one
		_, err = load()
		var ce *CorruptError
		if !errors.As(err, &ce) || !strings.Contains(err.Error(), "both pages are damaged: page 1: ") || !strings.Contains(err.Error(), "tide checkpoint reset -f FILE --yes") {
			t.Fatalf("byte %d of both pages flipped: Load = %v; want a *CorruptError saying both pages are damaged", i, err)
		}
		restore(i)
		restore(pageSize + i)
	}
	if !strings.Contains(logs.String(), "checkpoint page is damaged") || !strings.Contains(logs.String(), "page 2: ") {
		t.Fatalf("a damaged page was not logged; log:\n%.1000s", logs.String())
	}
	// Saves go on alternating: the third replaces the older page.
	third := cdc.Checkpoint{Source: cdc.Position(`{"seq":3}`)}
	if err := d.Save(ctx, "p", third); err != nil {
		t.Fatal(err)
	}
	b, _ := os.ReadFile(path)
	if !strings.Contains(string(b[:pageSize]), `"seq": 3`) || !strings.Contains(string(b[pageSize:]), `"seq": 2`) {
		t.Fatalf("the third save did not replace the older page:\n%s", b)
	}
}

// TestDirReadsOnePageFormat loads files written by the one-page format of
// earlier versions (testdata, written by that code), then saves over them.
func TestDirReadsOnePageFormat(t *testing.T) {
	for name, want := range map[string]string{
		"legacy-page":  `{"seq":42}`,
		"legacy-large": `{"seq":7,"pad":"` + strings.Repeat("x", 5000) + `"}`,
	} {
		t.Run(name, func(t *testing.T) {
			dir := t.TempDir()
			b, err := os.ReadFile(filepath.Join("testdata", name+fileSuffix))
			if err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(File(dir, name), b, 0o644); err != nil {
				t.Fatal(err)
			}
			d := openDir(t, dir)
			got, err := d.Load(t.Context(), name)
			if err != nil {
				t.Fatal(err)
			}
			if string(got.Source) != want {
				t.Fatalf("Load = %.80s, want %.80s", got.Source, want)
			}
			if name == "legacy-page" && (string(got.Sink) != `{"committed_bytes":4200}` || got.Meta["collection_uuid"] != "abc") {
				t.Fatalf("Load = %+v", got)
			}
			next := cdc.Checkpoint{Source: cdc.Position(`{"seq":100}`)}
			if err := d.Save(t.Context(), name, next); err != nil {
				t.Fatal(err)
			}
			r, err := Read(dir, name)
			if err != nil || string(r.Checkpoint().Source) != `{"seq":100}` || r.Generation != 1 {
				t.Fatalf("Read after Save over the old format = %+v, %v", r, err)
			}
		})
	}
}

// TestDirSurvivesPowerCuts cuts the power under a store at every operation
// of a sequence of saves, then restarts: once a save has returned, Load
// must give back the last checkpoint saved or the one before it (the save
// in flight may or may not have made it), never an error and never
// anything else. Before the first save returns, it may also find none.
func TestDirSurvivesPowerCuts(t *testing.T) {
	const saves = 40
	cps := make([]cdc.Checkpoint, saves+1)
	for i := 1; i <= saves; i++ {
		pad := strings.Repeat("m", (i*97)%400)
		if i == 7 {
			pad = strings.Repeat("L", 2*pageSize) // one record larger than a page: the rename path
		}
		cps[i] = cdc.Checkpoint{
			Source: cdc.Position(fmt.Sprintf(`{"seq":%d}`, i)),
			Meta:   map[string]string{"pad": pad},
			Sink:   []byte(fmt.Sprintf(`{"committed_bytes":%d}`, i*100)),
		}
	}
	seqOf := func(cp *cdc.Checkpoint) int {
		if cp == nil {
			return 0
		}
		var pos struct{ Seq int }
		if err := json.Unmarshal(cp.Source, &pos); err != nil {
			t.Fatalf("position %s: %v", cp.Source, err)
		}
		return pos.Seq
	}
	cuts, torn := 0, 0
	for budget := 0; ; budget++ {
		for variant := range uint64(3) {
			dir := t.TempDir()
			disk := faultfs.NewDisk()
			rng := rand.New(rand.NewPCG(uint64(budget), variant))
			// A process restart in the middle: the first save after it
			// takes the rename path again.
			restartAt := 1 + rng.IntN(saves)
			d, err := OpenFS(disk, dir, nil)
			if err != nil {
				t.Fatal(err)
			}
			disk.FailAfter(budget)
			done := 0
			for i := 1; i <= saves; i++ {
				if i == restartAt {
					d.Close()
					if d, err = OpenFS(disk, dir, nil); err != nil {
						break // the cut hit the removal of temporary files
					}
				}
				if err := d.Save(t.Context(), "p", cps[i]); err != nil {
					if !errors.Is(err, faultfs.ErrPowerCut) {
						t.Fatalf("budget %d: Save %d: %v", budget, i, err)
					}
					break
				}
				done = i
			}
			d.Close()
			if done == saves && variant == 0 {
				t.Logf("%d cut points, %d with a torn page", cuts, torn)
				if cuts < 200 || torn == 0 {
					t.Fatalf("only %d cut points, %d torn pages", cuts, torn)
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
			if b, err := os.ReadFile(File(dir, "p")); err == nil && len(b) == 2*pageSize {
				if _, damaged, _ := readFile(File(dir, "p"), "p"); damaged != nil {
					torn++
				}
			}
			d2, err := Open(dir, nil)
			if err != nil {
				t.Fatalf("budget %d: Open after the cut: %v", budget, err)
			}
			got, err := d2.Load(t.Context(), "p")
			if err != nil {
				d2.Close()
				t.Fatalf("budget %d variant %d: %d saves done; Load after the cut: %v", budget, variant, done, err)
			}
			seq := seqOf(got)
			if (seq != done && seq != done+1) || (seq > 0 && !sameCheckpoint(got, cps[seq])) {
				d2.Close()
				t.Fatalf("budget %d variant %d: %d saves done; Load after the cut = seq %d %+v", budget, variant, done, seq, got)
			}
			// And the store goes on from there.
			if err := d2.Save(t.Context(), "p", cps[saves]); err != nil {
				t.Fatal(err)
			}
			d2.Close()
		}
	}
}

func slogTo(w *bytes.Buffer) *slog.Logger {
	return slog.New(slog.NewTextHandler(w, nil))
}

// TestDirRecordOfExactlyOnePage: a record that fills a page to the last
// byte is still a page of a two-page file, and loads after a restart.
func TestDirRecordOfExactlyOnePage(t *testing.T) {
	dir := t.TempDir()
	var cp cdc.Checkpoint
	// saved_at is written with the nanoseconds' trailing zeros trimmed:
	// size the record with all nine digits, the longest a save can write.
	longest := time.Date(2026, 12, 2, 1, 2, 3, 123456789, time.UTC)
	for n := range pageSize {
		cp = cdc.Checkpoint{Source: cdc.Position(`{"seq":1}`), Meta: map[string]string{"pad": strings.Repeat("x", n)}}
		b, err := encodeGeneration("p", 2, cp, longest)
		if err != nil {
			t.Fatal(err)
		}
		if len(b) == pageSize {
			break
		}
	}
	d, err := Open(dir, nil)
	if err != nil {
		t.Fatal(err)
	}
	for range 2 { // the rename path, then in place
		if err := d.Save(t.Context(), "p", cp); err != nil {
			t.Fatal(err)
		}
		if b, _ := os.ReadFile(File(dir, "p")); len(b) != 2*pageSize {
			t.Fatalf("the file is %d bytes, want two pages", len(b))
		}
	}
	d.Close()
	d = openDir(t, dir)
	got, err := d.Load(t.Context(), "p")
	if err != nil || !sameCheckpoint(got, cp) {
		t.Fatalf("Load = %v, %v", got, err)
	}
}

// TestSaveAfterRestartInPlace: the first save of a new process into a
// two-page file an earlier one left writes the page that does not hold
// the newest valid record, in place (the file is not replaced), whether
// the other page is older or was torn by a power cut.
func TestSaveAfterRestartInPlace(t *testing.T) {
	seq := func(i int) cdc.Checkpoint {
		return cdc.Checkpoint{Source: cdc.Position(fmt.Sprintf(`{"seq":%d}`, i))}
	}
	for _, tc := range []struct {
		name string
		tear int // page to damage before the restart, or -1
		want string
		gen  uint64 // the new record's: one past the newest valid one's
	}{
		{"older page overwritten", -1, `"seq": 2`, 3},
		{"torn newer page overwritten", 1, `"seq": 1`, 2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			d := openDir(t, dir)
			for i := 1; i <= 2; i++ {
				if err := d.Save(t.Context(), "p", seq(i)); err != nil {
					t.Fatal(err)
				}
			}
			d.Close()
			path := File(dir, "p")
			if tc.tear >= 0 {
				f, err := os.OpenFile(path, os.O_WRONLY, 0)
				if err != nil {
					t.Fatal(err)
				}
				if _, err := f.WriteAt([]byte("torn"), int64(tc.tear*pageSize+10)); err != nil {
					t.Fatal(err)
				}
				f.Close()
			}
			before, err := os.Stat(path)
			if err != nil {
				t.Fatal(err)
			}
			d = openDir(t, dir)
			if err := d.Save(t.Context(), "p", seq(3)); err != nil {
				t.Fatal(err)
			}
			after, err := os.Stat(path)
			if err != nil {
				t.Fatal(err)
			}
			if !os.SameFile(before, after) {
				t.Fatal("the first save after a restart replaced the file instead of writing a page in place")
			}
			b, err := os.ReadFile(path)
			if err != nil || len(b) != 2*pageSize {
				t.Fatalf("file of %d bytes (%v), want two pages", len(b), err)
			}
			kept, wrote := b[:pageSize], b[pageSize:]
			if !strings.Contains(string(wrote), `"seq": 3`) {
				kept, wrote = wrote, kept
			}
			if !strings.Contains(string(wrote), `"seq": 3`) || !strings.Contains(string(kept), tc.want) {
				t.Fatalf("pages after the save:\n%s\nwant one with seq 3 and one with %s", b, tc.want)
			}
			got, err := d.Load(t.Context(), "p")
			if err != nil || string(got.Source) != `{"seq":3}` {
				t.Fatalf("Load = %v, %v; want seq 3", got, err)
			}
			// The record's generation goes on from the file's newest.
			r, err := Read(dir, "p")
			if err != nil || r.Generation != tc.gen {
				t.Fatalf("generation %v (%v), want %d", r, err, tc.gen)
			}
		})
	}
}
