package main

import (
	"bufio"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestCrashTransformsAndDeadLetters runs a pipeline with a filter, a set,
// a drop, a mask and a route, into one file per route, with one change
// in 997 failing its transform into a dead-letter file, and SIGKILLs tide
// again and again. After a final run each route's file equals what a
// reference implementation of the same transforms computes from the
// generator's changes, exactly once and in order, and every failing
// change is in the dead-letter file once. Then `tide dead-letters list`
// shows them, and a replay after a fix of the pipeline file adds them to
// their route's file.
func TestCrashTransformsAndDeadLetters(t *testing.T) {
	const total = 60000
	const key = "e2e-mask-key"
	dir := t.TempDir()
	pipelineFile := func(check string) string {
		return writePipeline(t, dir, fmt.Sprintf(`
name: shaped
source:
  generate: {count: %d, rate: 50000, payload_bytes: 20}
sink:
  file: {path: "./out/{route}.jsonl"}
batch: {max_records: 500, commit_interval: 20ms}
transforms:
  - filter: {ops: [insert], namespaces: ["gen.*"], where: 'doc.seq %% 5 != 0'}
  - set: {parity: 'doc.seq %% 2 == 0 ? "even" : "odd"', check: '%s'}
  - drop_fields: [check]
  - mask_fields: {payload: hash}
  - route: 'doc.parity'
mask_key: ${E2E_MASK_KEY}
on_error: dead_letter
dead_letter: {file: {path: ./dead.jsonl}}
`, total, check))
	}
	cfg := pipelineFile(`doc.seq % 997 != 0 || doc.payload * 2 == 0`)
	t.Setenv("E2E_MASK_KEY", key)

	sigkillRuns(t, dir, 6, 60*time.Millisecond, 120*time.Millisecond, "run", "-f", cfg)
	if out, err := runTide(t, dir, "run", "-f", cfg); err != nil {
		t.Fatalf("final tide run: %v\n%s", err, out)
	}

	// The reference: the same transforms, computed here.
	mac := hmac.New(sha256.New, []byte(key))
	mac.Write([]byte(strings.Repeat("x", 20)))
	masked := hex.EncodeToString(mac.Sum(nil))
	want := map[string][]string{}
	var bad []string
	for seq := 1; seq <= total; seq++ {
		if seq%5 == 0 {
			continue
		}
		if seq%997 == 0 {
			bad = append(bad, fmt.Sprintf(`{"seq":%d}`, seq))
			continue
		}
		parity := "odd"
		if seq%2 == 0 {
			parity = "even"
		}
		want[parity] = append(want[parity], fmt.Sprintf(`{"_id":%d,"seq":%d,"payload":"%s","parity":"%s"}`, seq, seq, masked, parity))
	}
	for parity, docs := range want {
		got := fullDocuments(t, filepath.Join(dir, "out", parity+".jsonl"))
		if len(got) != len(docs) {
			t.Fatalf("%s.jsonl holds %d records, want %d", parity, len(got), len(docs))
		}
		for i := range docs {
			if got[i] != docs[i] {
				t.Fatalf("%s.jsonl record %d = %s\nwant %s", parity, i, got[i], docs[i])
			}
		}
	}
	letters := readLetters(t, filepath.Join(dir, "dead.jsonl"))
	if len(letters) != len(bad) {
		t.Fatalf("dead.jsonl holds %d letters, want %d (each once)", len(letters), len(bad))
	}
	for i, l := range letters {
		if string(l.Position) != bad[i] || l.Stage != "transform" || !strings.Contains(l.Error, "transforms[1].set.check") {
			t.Fatalf("letter %d = %+v, want the change at %s", i, l, bad[i])
		}
	}

	out, err := runTide(t, dir, "dead-letters", "list", "-f", cfg)
	if err != nil || strings.Count(out, "no such overload") != len(bad) {
		t.Fatalf("dead-letters list: %v, want %d letters:\n%s", err, len(bad), out)
	}
	for _, pos := range bad {
		if !strings.Contains(out, pos) {
			t.Fatalf("dead-letters list does not show the letter at %s:\n%s", pos, out)
		}
	}

	// The fix, then the replay: the letters reach their route's file.
	cfg = pipelineFile(`true`)
	if out, err := runTide(t, dir, "dead-letters", "replay", "-f", cfg); err != nil || !strings.Contains(out, fmt.Sprintf("replayed %d dead letters", len(bad))) {
		t.Fatalf("dead-letters replay: %v\n%s", err, out)
	}
	odd := fullDocuments(t, filepath.Join(dir, "out", "odd.jsonl"))
	even := fullDocuments(t, filepath.Join(dir, "out", "even.jsonl"))
	if len(odd)+len(even) != len(want["odd"])+len(want["even"])+len(bad) {
		t.Fatalf("after the replay: %d + %d records, want %d more than before", len(odd), len(even), len(bad))
	}
}

func fullDocuments(t *testing.T, path string) []string {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var out []string
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		var line struct {
			Doc json.RawMessage `json:"_full_document"`
		}
		if err := json.Unmarshal(sc.Bytes(), &line); err != nil {
			t.Fatalf("%s: %v: %s", path, err, sc.Bytes())
		}
		out = append(out, string(line.Doc))
	}
	return out
}

type storedLetter struct {
	Position json.RawMessage `json:"position"`
	Stage    string          `json:"stage"`
	Error    string          `json:"error"`
}

func readLetters(t *testing.T, path string) []storedLetter {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var out []storedLetter
	for _, line := range strings.Split(strings.TrimSpace(string(b)), "\n") {
		var l storedLetter
		if err := json.Unmarshal([]byte(line), &l); err != nil {
			t.Fatalf("%s: %v", path, err)
		}
		out = append(out, l)
	}
	return out
}
