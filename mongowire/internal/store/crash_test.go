package store

import (
	"bufio"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
)

const crashEnv = "TIDE_STORE_CRASH_DIR"

// crashChild runs the child side of TestCrash when the test binary is
// re-executed for it: it inserts documents one by one forever, printing the
// _id of each acknowledged insert, until it is killed.
func crashChild() bool {
	dir := os.Getenv(crashEnv)
	if dir == "" {
		return false
	}
	minCompactSize = 64 << 10 // compact often, so that kills land during compactions too
	syncInterval = 2 * time.Millisecond
	s, err := Open(Config{Dir: dir})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	start, _ := strconv.Atoi(os.Getenv(crashEnv + "_START"))
	pad := strings.Repeat("p", 200)
	w := bufio.NewWriterSize(os.Stdout, 64)
	for i := start; ; i++ {
		doc, _ := bson.Marshal(bson.D{{Key: "_id", Value: i}, {Key: "pad", Value: pad}})
		if _, errs := s.Insert(nsA, []bson.Raw{doc}, true); len(errs) > 0 {
			fmt.Fprintln(os.Stderr, errs[0].Err)
			os.Exit(3)
		}
		if i%7 == 0 {
			filter, _ := bson.Marshal(bson.D{{Key: "_id", Value: i - 3}})
			if _, err := s.Delete(nsA, filter, 1); err != nil {
				fmt.Fprintln(os.Stderr, err)
				os.Exit(3)
			}
			fmt.Fprintf(w, "d%d\n", i-3)
		}
		fmt.Fprintf(w, "%d\n", i)
		w.Flush()
	}
}

// TestCrash kills a process that is writing at a random moment and
// requires every acknowledged write to be there after a restart.
func TestCrash(t *testing.T) {
	if testing.Short() {
		t.Skip("re-executes the test binary; skipped with -short")
	}
	dir := t.TempDir()
	inserted := map[int]bool{}
	next := 0
	for round := range 3 {
		cmd := exec.Command(os.Args[0], "-test.run=^$")
		cmd.Env = append(os.Environ(), crashEnv+"="+dir, crashEnv+"_START="+strconv.Itoa(next))
		out, err := cmd.StdoutPipe()
		if err != nil {
			t.Fatal(err)
		}
		var stderr strings.Builder
		cmd.Stderr = &stderr
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		killAt := 500 + rand.IntN(4000)
		sc := bufio.NewScanner(out)
		acked := 0
		for sc.Scan() {
			line := sc.Text()
			if id, ok := strings.CutPrefix(line, "d"); ok {
				n, _ := strconv.Atoi(id)
				delete(inserted, n)
				continue
			}
			n, _ := strconv.Atoi(line)
			inserted[n] = true
			next = n + 1
			if acked++; acked == killAt {
				cmd.Process.Signal(syscall.SIGKILL)
			}
		}
		cmd.Wait()
		if acked < killAt {
			t.Fatalf("round %d: child stopped after %d writes: %s", round, acked, stderr.String())
		}

		s := openDir(t, dir, nil)
		docs := find(t, s, nsA, nil)
		present := map[int]bool{}
		for _, d := range docs {
			present[int(d.Lookup("_id").AsInt64())] = true
		}
		for id := range inserted {
			// The delete of next-3 may have been in flight, unacknowledged.
			inFlightDelete := next%7 == 0 && id == next-3
			if !present[id] && !inFlightDelete {
				t.Fatalf("round %d: acknowledged document %d missing after the crash", round, id)
			}
		}
		// At most the one write in flight when the process died may be
		// there without having been acknowledged.
		for id := range present {
			if !inserted[id] && id < next-1 {
				t.Fatalf("round %d: document %d present, but it was deleted", round, id)
			}
		}
		clear(inserted)
		for id := range present {
			next = max(next, id+1)
			inserted[id] = true
		}
		s.Close()
	}
	if _, err := os.Stat(filepath.Join(dir, snapshotFile)); err != nil {
		t.Errorf("no compaction happened during the crash test: %v", err)
	}
}
