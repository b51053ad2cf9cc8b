package file

import (
	"bytes"
	"fmt"
	"hash/crc32"
	"log/slog"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/tide-cdc/tide/cdc"
)

// stateOf computes, from the file's bytes, the state a sink must report
// for them.
func stateOf(b []byte) string {
	table := crc32.MakeTable(crc32.Castagnoli)
	n := min(len(b), 4096)
	return fmt.Sprintf(`{"committed_bytes":%d,"head_bytes":%d,"head_crc32c":%d,"tail_bytes":%d,"tail_crc32c":%d}`,
		len(b), n, crc32.Checksum(b[:n], table), n, crc32.Checksum(b[len(b)-n:], table))
}

// sized returns records from..to whose lines are size bytes long, newline
// included.
func sized(from, to, size int) []cdc.Record {
	rs := records(from, to)
	for i := range rs {
		d := fmt.Appendf(nil, `{"seq":%d,"pad":"`, from+i)
		d = append(d, strings.Repeat("x", max(0, size-len(d)-3))...)
		rs[i].Data = append(d, `"}`...)
	}
	return rs
}

// TestStateChecksumsTheFile writes batches of many shapes (small lines,
// lines longer than the checksummed tail, markers) and requires, after every commit, State
// to match the checksums computed from the file, and a reopen from that
// state to succeed and go on reporting the right checksums.
func TestStateChecksumsTheFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "events.jsonl")
	s := newSink(t, path)
	if err := s.Open(t.Context(), nil); err != nil {
		t.Fatal(err)
	}
	batches := map[string][]cdc.Record{} // filled in order below; names for messages
	order := []string{"small", "marker only", "one line of 10 KiB", "lines crossing the wrap", "four lines of 1 KiB", "many small", "large then small"}
	batches["small"] = records(1, 3)
	batches["marker only"] = nil // a Commit with no Put
	batches["one line of 10 KiB"] = sized(4, 4, 10<<10)
	batches["lines crossing the wrap"] = sized(5, 9, 1500)
	batches["four lines of 1 KiB"] = sized(10, 13, 1024)
	batches["many small"] = records(14, 600)
	batches["large then small"] = append(sized(601, 601, 5000), records(602, 603)...)
	for i, name := range order {
		cp := putCommit(t, s, batches[name])
		file, _ := os.ReadFile(path)
		if want := stateOf(file); string(cp.Sink) != want {
			t.Fatalf("after batch %q: State = %s, want %s", name, cp.Sink, want)
		}
		if i%2 == 1 { // reopen now and then: Open reloads the ends from the file
			s.Close()
			s = newSink(t, path)
			if err := s.Open(t.Context(), &cp); err != nil {
				t.Fatalf("reopen after batch %q: %v", name, err)
			}
			if string(s.State()) != string(cp.Sink) {
				t.Fatalf("after reopen: State = %s, want %s", s.State(), cp.Sink)
			}
		}
	}
}

// TestEndsMatchWhatWasWritten feeds ends random batches (empty lines,
// lines around and beyond 4 KiB, lines that end exactly where the ring
// wraps) and compares its checksums with those of the concatenated
// lines.
func TestEndsMatchWhatWasWritten(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	sizes := []int{0, 1, 2, 100, 4094, 4095, 4096, 4097, 9000}
	var e ends
	var all []byte
	for round := range 2000 {
		if round%20 == 0 { // start over now and then: the first wrap is the tricky one
			e, all = ends{}, nil
		}
		var batch []cdc.Record
		for range rng.IntN(6) {
			n := sizes[rng.IntN(len(sizes))]
			if rng.IntN(2) == 0 { // a line that ends the stream at a multiple of 4 KiB
				n = (checkLen - len(all)%checkLen - 1 + checkLen) % checkLen
			}
			d := bytes.Repeat([]byte{byte('a' + rng.IntN(26))}, n)
			batch = append(batch, cdc.Record{Event: cdc.Event{Op: cdc.OpInsert}, Data: d})
			all = append(append(all, d...), '\n')
		}
		e.wrote(batch)
		got := string(e.sums().appendState(fmt.Appendf(nil, `{"committed_bytes":%d`, len(all)))) + "}"
		if want := stateOf(all); got != want {
			t.Fatalf("round %d, %d bytes: sums %s, want %s", round, len(all), got, want)
		}
	}
}

// TestChangedFileRefused changes a committed file behind the sink's back
// and requires the next Open to refuse it, explaining what happened and
// what to do, without touching the file.
func TestChangedFileRefused(t *testing.T) {
	tests := map[string]struct {
		change func(t *testing.T, s *Sink, path string) cdc.Checkpoint // returns the last saved checkpoint
		want   string
	}{
		// logrotate copytruncate: copy the file, truncate it to 0; the
		// writer goes on at its offset and leaves a hole of NUL bytes.
		"copytruncate": {copytruncate(30), "its first 4096 bytes (of the 245760 committed) do not match the checksum in the checkpoint; they are all NUL bytes"},
		// More than the checksummed tail written after the truncation:
		// the head still holds the NUL bytes.
		"copytruncate, then more than 4 KiB": {copytruncate(2000), "its first 4096 bytes (of the 16384000 committed) do not match the checksum in the checkpoint; they are all NUL bytes"},
		"last line rewritten, same length": {func(t *testing.T, s *Sink, path string) cdc.Checkpoint {
			cp := putCommit(t, s, sized(1, 10, 1000))
			s.Close()
			b, _ := os.ReadFile(path)
			b = bytes.Replace(b, []byte(`{"seq":10,`), []byte(`{"seq":11,`), 1)
			os.WriteFile(path, b, 0o644)
			return cp
		}, "the last 4096 bytes (of the 10000 committed) do not match the checksum in the checkpoint. "},
		"truncated and refilled to a greater length": {func(t *testing.T, s *Sink, path string) cdc.Checkpoint {
			cp := putCommit(t, s, records(1, 9))
			s.Close()
			os.WriteFile(path, []byte(lines(11, 30)), 0o644)
			return cp
		}, "its first 90 bytes (of the 90 committed) do not match the checksum in the checkpoint. "},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "events.jsonl")
			s := newSink(t, path)
			if err := s.Open(t.Context(), nil); err != nil {
				t.Fatal(err)
			}
			cp := tc.change(t, s, path)
			s.Close()
			before := readFile(t, path)

			err := newSink(t, path).Open(t.Context(), &cp)
			if err == nil {
				t.Fatal("Open of a changed file succeeded")
			}
			for _, want := range []string{
				"file sink " + path + " was changed by something other than this pipeline since its last commit",
				tc.want,
				"copytruncate",
				"restore the file as it was, or move it aside and reset the checkpoint",
			} {
				if !strings.Contains(err.Error(), want) {
					t.Errorf("refusal %q\ndoes not contain %q", err, want)
				}
			}
			if readFile(t, path) != before {
				t.Fatal("a refused Open changed the file")
			}
		})
	}
}

// copytruncate returns a change that commits 4096 lines of lineSize
// bytes, copies the file aside and truncates it, as logrotate's
// copytruncate does, and commits 4096 lines more.
func copytruncate(lineSize int) func(t *testing.T, s *Sink, path string) cdc.Checkpoint {
	return func(t *testing.T, s *Sink, path string) cdc.Checkpoint {
		putCommit(t, s, sized(1, 4096, lineSize))
		b, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path+".1", b, 0o644); err != nil {
			t.Fatal(err)
		}
		if err := os.Truncate(path, 0); err != nil {
			t.Fatal(err)
		}
		return putCommit(t, s, sized(4097, 8192, lineSize))
	}
}

// TestOldStateAccepted reopens a file from a checkpoint written before
// the sink recorded checksums: it is accepted, with a log line saying the
// file was not verified, and the next State carries the checksums.
func TestOldStateAccepted(t *testing.T) {
	path := filepath.Join(t.TempDir(), "events.jsonl")
	content := lines(1, 500) + `{"seq":501` // a torn uncommitted line too
	if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
	var logs bytes.Buffer
	s := New(Config{Path: path, Logger: slog.New(slog.NewTextHandler(&logs, nil))})
	defer s.Close()
	old := cdc.Checkpoint{Source: cdc.Position(`{"seq":500}`), Sink: fmt.Appendf(nil, `{"committed_bytes":%d}`, len(lines(1, 500)))}
	if err := s.Open(t.Context(), &old); err != nil {
		t.Fatalf("Open from a checkpoint without checksums: %v", err)
	}
	if !strings.Contains(logs.String(), "not verified") {
		t.Fatalf("no log line says the file was not verified:\n%s", logs.String())
	}
	cp := putCommit(t, s, records(501, 502))
	if want := stateOf([]byte(lines(1, 502))); string(cp.Sink) != want {
		t.Fatalf("State after an old checkpoint = %s, want %s", cp.Sink, want)
	}
}

// TestBadChecksumStateRefused: a sink state with incomplete or impossible
// checksums is refused, naming what is wrong.
func TestBadChecksumStateRefused(t *testing.T) {
	tests := map[string]struct{ state, want string }{
		"head without tail":       {`{"committed_bytes":4,"head_bytes":4,"head_crc32c":1}`, "has only some of head_bytes, head_crc32c, tail_bytes and tail_crc32c"},
		"head longer than file":   {`{"committed_bytes":4,"head_bytes":5,"head_crc32c":1,"tail_bytes":4,"tail_crc32c":1}`, "checksums 5 head and 4 tail bytes of a 4-byte file"},
		"negative tail":           {`{"committed_bytes":4,"head_bytes":4,"head_crc32c":1,"tail_bytes":-1,"tail_crc32c":1}`, "checksums 4 head and -1 tail bytes"},
		"checksum not an integer": {`{"committed_bytes":4,"head_bytes":4,"head_crc32c":"x","tail_bytes":4,"tail_crc32c":1}`, `is not {"committed_bytes": N}`},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "events.jsonl")
			os.WriteFile(path, []byte("abc\n"), 0o644)
			err := newSink(t, path).Open(t.Context(), &cdc.Checkpoint{Sink: []byte(tc.state)})
			if err == nil || !strings.Contains(err.Error(), tc.want) || !strings.Contains(err.Error(), path) {
				t.Fatalf("Open = %v\nwant an error naming %s and containing %q", err, path, tc.want)
			}
		})
	}
}

// BenchmarkEnds measures what keeping the checksummed ends costs a batch
// of 1000 lines of 200 bytes: the copies in Put and the checksums in
// State.
func BenchmarkEnds(b *testing.B) {
	batch := benchRecords()
	var e ends
	for b.Loop() {
		e.wrote(batch)
		e.sums()
	}
}
