package store

import (
	"fmt"
	"maps"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/tide-cdc/tide/internal/faultfs"
)

// cutOp is one write of the power-cut workload.
type cutOp struct {
	kind string // "insert", "update", "delete"
	id   int
}

// cutWorkload returns n writes: inserts, with an update of an earlier
// document every fourth write and a delete every sixth.
func cutWorkload(n int) []cutOp {
	ops := make([]cutOp, 0, n)
	next := 0
	for i := range n {
		switch {
		case i%4 == 3:
			ops = append(ops, cutOp{"update", next - 2})
		case i%6 == 5:
			ops = append(ops, cutOp{"delete", next - 3})
		default:
			ops = append(ops, cutOp{"insert", next})
			next++
		}
	}
	return ops
}

// modelState returns the documents (_id to v) after the first k writes.
func modelState(ops []cutOp, k int) map[int]int {
	m := map[int]int{}
	for i, op := range ops[:k] {
		switch op.kind {
		case "insert":
			m[op.id] = 0
		case "update":
			if _, ok := m[op.id]; ok {
				m[op.id] = i
			}
		case "delete":
			delete(m, op.id)
		}
	}
	return m
}

func runCutOp(t *testing.T, s *Store, i int, op cutOp) error {
	filter := raw(t, bson.D{{Key: "_id", Value: op.id}})
	switch op.kind {
	case "insert":
		doc := raw(t, bson.D{{Key: "_id", Value: op.id}, {Key: "v", Value: 0}, {Key: "pad", Value: strings.Repeat("p", 100)}})
		if _, errs := s.Insert(nsA, []bson.Raw{doc}, true); len(errs) > 0 {
			return errs[0].Err
		}
	case "update":
		u := raw(t, bson.D{{Key: "$set", Value: bson.D{{Key: "v", Value: i}}}})
		if _, err := s.Update(nsA, UpdateSpec{Filter: filter, Update: bson.RawValue{Type: bson.TypeEmbeddedDocument, Value: u}}); err != nil {
			return err
		}
	case "delete":
		if _, err := s.Delete(nsA, filter, 1); err != nil {
			return err
		}
	}
	return nil
}

// TestJournalSurvivesPowerCuts cuts the power under a store at every file
// operation of a workload of writes, some of them waited for with
// WaitDurable, and a compaction in the middle. After each cut the reopened
// store must hold the result of a prefix of the writes performed, in
// order (the oplog says so), that includes every write WaitDurable
// acknowledged: nothing acknowledged as durable lost, nothing that was
// not written invented.
func TestJournalSurvivesPowerCuts(t *testing.T) {
	const n = 60
	ops := cutWorkload(n)
	cuts, lostUnsynced := 0, 0
	for budget := 0; ; budget++ {
		for variant := range uint64(3) {
			dir := t.TempDir()
			disk := faultfs.NewDisk()
			rng := rand.New(rand.NewPCG(uint64(budget), variant))
			s, err := Open(Config{Dir: dir, FS: disk, NoopInterval: -1, SyncInterval: -1})
			if err != nil {
				t.Fatal(err)
			}
			disk.FailAfter(budget)
			performed, durable := 0, 0
			for i, op := range ops {
				if i == n/2 {
					if err := s.compact(); err != nil {
						break
					}
				}
				if err := runCutOp(t, s, i, op); err != nil {
					break
				}
				performed = i + 1
				if rng.IntN(3) == 0 || i == n-1 {
					if err := s.WaitDurable(); err != nil {
						break
					}
					durable = i + 1
				}
			}
			s.Close()
			if performed == n && durable == n && variant == 0 {
				t.Logf("%d cut points; %d of them lost writes that were never waited for", cuts, lostUnsynced)
				if cuts < 200 || lostUnsynced == 0 {
					t.Fatalf("only %d cut points, %d losing unsynced writes", cuts, lostUnsynced)
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

			s2, err := Open(Config{Dir: dir, NoopInterval: -1})
			if err != nil {
				t.Fatalf("budget %d variant %d: reopen after the cut: %v", budget, variant, err)
			}
			got := map[int]int{}
			for _, d := range find(t, s2, nsA, nil) {
				got[int(d.Lookup("_id").AsInt64())] = int(d.Lookup("v").AsInt64())
			}
			k := recoveredPrefix(s2, ops)
			if k < 0 || k < durable || k > performed || !maps.Equal(got, modelState(ops, k)) {
				s2.Close()
				t.Fatalf("budget %d variant %d: %d writes performed, %d waited for as durable; after the cut the oplog is a prefix of %d writes (-1: not a prefix) and the documents are %v, want %v",
					budget, variant, performed, durable, k, got, modelState(ops, max(k, 0)))
			}
			if k < performed {
				lostUnsynced++
			}
			if err := runCutOp(t, s2, 0, cutOp{"insert", 1000}); err != nil {
				t.Fatalf("budget %d variant %d: a write after recovery: %v", budget, variant, err)
			}
			if err := s2.Close(); err != nil {
				t.Fatal(err)
			}
		}
	}
}

// recoveredPrefix returns k if the store's oplog holds exactly the first k
// writes of ops, in order, and -1 otherwise.
func recoveredPrefix(s *Store, ops []cutOp) int {
	entries, _, _ := s.Oplog().ReadAfter(bson.Timestamp{}, 0, 0)
	var got []string
	for _, e := range entries {
		if e.Op == "create" {
			continue
		}
		op := e.Op
		if op == "replace" {
			op = "update"
		}
		got = append(got, fmt.Sprintf("%s %d", op, e.DocKey.Lookup("_id").AsInt64()))
	}
	var want []string
	for _, op := range ops {
		want = append(want, fmt.Sprintf("%s %d", op.kind, op.id))
	}
	if len(got) > len(want) || !slices.Equal(got, want[:len(got)]) {
		return -1
	}
	return len(got)
}

// TestWaitDurable checks that a write waited for is on disk: with the
// power cut right after WaitDurable, nothing unsynced surviving, it is
// there; and that without a wait the same cut loses it, so that the first
// half can fail.
func TestWaitDurable(t *testing.T) {
	for _, wait := range []bool{true, false} {
		dir := t.TempDir()
		disk := faultfs.NewDisk()
		s, err := Open(Config{Dir: dir, FS: disk, NoopInterval: -1, SyncInterval: -1})
		if err != nil {
			t.Fatal(err)
		}
		if err := runCutOp(t, s, 0, cutOp{"insert", 1}); err != nil {
			t.Fatal(err)
		}
		if wait {
			syncs := disk.Syncs()
			if err := s.WaitDurable(); err != nil {
				t.Fatal(err)
			}
			if disk.Syncs() != syncs+1 {
				t.Fatalf("WaitDurable made %d syncs, want 1", disk.Syncs()-syncs)
			}
			if err := s.WaitDurable(); err != nil || disk.Syncs() != syncs+1 {
				t.Fatalf("a second WaitDurable with nothing new written synced again (%v)", err)
			}
		}
		if err := disk.Cut(nil); err != nil {
			t.Fatal(err)
		}
		s.Close()
		s2 := openDir(t, dir, nil)
		docs := find(t, s2, nsA, nil)
		s2.Close()
		if wait && len(docs) != 1 {
			t.Fatalf("a write acknowledged by WaitDurable is gone after a power cut: %v", docs)
		}
		if !wait && len(docs) != 0 {
			t.Fatalf("a write never synced survived the worst-case power cut: %v", docs)
		}
	}
}

// TestWaitDurableFailure: a failed sync is reported and breaks the store.
func TestWaitDurableFailure(t *testing.T) {
	disk := faultfs.NewDisk()
	s, err := Open(Config{Dir: t.TempDir(), FS: disk, NoopInterval: -1, SyncInterval: -1})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if err := runCutOp(t, s, 0, cutOp{"insert", 1}); err != nil {
		t.Fatal(err)
	}
	disk.FailAfter(0)
	err = s.WaitDurable()
	if err == nil || !strings.Contains(err.Error(), "sync journal") || !strings.Contains(err.Error(), faultfs.ErrPowerCut.Error()) {
		t.Fatalf("WaitDurable with the power off = %v, want a sync journal error", err)
	}
	err = runCutOp(t, s, 1, cutOp{"insert", 2})
	if err == nil || !strings.Contains(err.Error(), "refuses writes after a journal failure") {
		t.Fatalf("a write after a failed sync = %v, want a refusal", err)
	}
	if (&Store{}).WaitDurable() != nil {
		t.Fatal("WaitDurable of an in-memory store failed")
	}
}
