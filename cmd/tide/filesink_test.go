package main

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestTwoPipelinesOneFileRefused runs two pipelines with different data
// directories and the same sink.file.path: the second exits non-zero,
// naming the first's pipeline and PID, and the file holds only the
// first's lines, each valid and in order.
func TestTwoPipelinesOneFileRefused(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	pipeline := func(name string) string {
		path := filepath.Join(dir, name+".yaml")
		body := fmt.Sprintf(`
name: %s
source:
  generate: {count: 0, rate: 2000}
sink:
  file: {path: ./out.jsonl}
data_dir: ./%s-data
batch: {commit_interval: 10ms}
`, name, name)
		if err := os.WriteFile(path, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
		return path
	}
	alpha, beta := pipeline("alpha"), pipeline("beta")

	first := tideCmd(t, dir, "run", "-f", alpha)
	logs, err := first.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := first.Start(); err != nil {
		t.Fatal(err)
	}
	stopped := false
	defer func() {
		if !stopped {
			first.Process.Kill()
			first.Wait()
		}
	}()
	// The sink holds its lock once the pipeline has started.
	var stderr strings.Builder
	sc := bufio.NewScanner(logs)
	for sc.Scan() {
		stderr.WriteString(sc.Text() + "\n")
		if strings.Contains(sc.Text(), "pipeline started") {
			break
		}
	}
	copied := make(chan struct{})
	go func() { // keep the first run's stderr flowing
		defer close(copied)
		for sc.Scan() {
			stderr.WriteString(sc.Text() + "\n")
		}
	}()

	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	second := exec.CommandContext(ctx, first.Path, "run", "-f", beta)
	second.Dir, second.Env = dir, first.Env
	out, err := second.CombinedOutput()
	if err == nil || ctx.Err() != nil {
		t.Fatalf("a second pipeline on the same sink file was not refused (err %v):\n%s", err, out)
	}
	for _, want := range []string{
		"out.jsonl is in use by pipeline \"alpha\"",
		fmt.Sprintf("pid %d", first.Process.Pid),
		"alpha-data",
		"set another sink.file.path",
	} {
		if !strings.Contains(string(out), want) {
			t.Errorf("the refusal does not contain %q:\n%s", want, out)
		}
	}

	if err := first.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	<-copied
	err = first.Wait()
	stopped = true
	if err != nil {
		t.Fatalf("the first pipeline after SIGTERM: %v\n%s", err, stderr.String())
	}
	checkSeqFile(t, filepath.Join(dir, "out.jsonl"), checkpointSeq(t, dir, alpha))
}

// TestCopytruncateRefused runs a pipeline, truncates its file as
// logrotate's copytruncate does while it runs, and requires the next run
// to refuse the file, saying what happened and what to do, and to leave
// the file as it was.
func TestCopytruncateRefused(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	cfg := writePipeline(t, dir, `
name: rotated
source:
  generate: {count: 0, rate: 2000}
sink:
  file: {path: ./out.jsonl}
batch: {commit_interval: 10ms}
`)
	out := filepath.Join(dir, "out.jsonl")
	cmd := tideCmd(t, dir, "run", "-f", cfg)
	logs, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer cmd.Wait()
	defer cmd.Process.Kill() // no-op once it has exited
	var stderr strings.Builder
	sc := bufio.NewScanner(logs)
	for sc.Scan() {
		stderr.WriteString(sc.Text() + "\n")
		if strings.Contains(sc.Text(), "pipeline started") {
			break
		}
	}
	copied := make(chan struct{})
	go func() {
		defer close(copied)
		for sc.Scan() {
			stderr.WriteString(sc.Text() + "\n")
		}
	}()
	// copytruncate once the file holds more than the checksummed head; the
	// run goes on writing at its offset, after a hole of NUL bytes.
	truncatedAt := waitForSize(t, out, 8192)
	if err := os.Truncate(out, 0); err != nil {
		t.Fatal(err)
	}
	waitForSize(t, out, truncatedAt) // it wrote after the truncation
	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	<-copied
	if err := cmd.Wait(); err != nil {
		t.Fatalf("tide run after SIGTERM: %v\n%s", err, stderr.String())
	}
	before, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}

	again, err := runTide(t, dir, "run", "-f", cfg)
	if err == nil {
		t.Fatalf("the run after a copytruncate was not refused:\n%s", again)
	}
	for _, want := range []string{
		"was changed by something other than this pipeline since its last commit",
		"they are all NUL bytes",
		"copytruncate",
		"move it aside and reset the checkpoint",
	} {
		if !strings.Contains(again, want) {
			t.Errorf("the refusal does not contain %q:\n%s", want, again)
		}
	}
	if after, _ := os.ReadFile(out); string(after) != string(before) {
		t.Fatal("the refused run changed the file")
	}
}

// waitForSize waits until the file at path is larger than size bytes, and
// returns its size then.
func waitForSize(t *testing.T, path string, size int64) int64 {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	for time.Now().Before(deadline) {
		if fi, err := os.Stat(path); err == nil && fi.Size() > size {
			return fi.Size()
		}
		time.Sleep(10 * time.Millisecond) // polls another process; no event to wait on
	}
	t.Fatalf("%s did not grow past %d bytes in a minute", path, size)
	return 0
}

// TestFileSinkPerNamespaceSIGKILL runs generate (three collections) into
// sink.file.path ./out/{db}/{coll}.jsonl through the binary, SIGKILLs it
// mid-run three times, then lets it finish: each collection's file holds
// exactly its own records, in order, once.
func TestFileSinkPerNamespaceSIGKILL(t *testing.T) {
	t.Parallel()
	const total, colls = 6000, 3
	dir := t.TempDir()
	cfg := writePipeline(t, dir, fmt.Sprintf(`
name: routed
source:
  generate: {count: %d, rate: 4000, collections: %d}
sink:
  file: {path: "./out/{db}/{coll}.jsonl"}
batch: {commit_interval: 5ms, max_records: 100}
`, total, colls))
	// outBytes sums the sizes of the per-namespace files.
	outBytes := func() int64 {
		var n int64
		for k := range colls {
			if fi, err := os.Stat(filepath.Join(dir, "out", "gen", fmt.Sprintf("events_%d.jsonl", k))); err == nil {
				n += fi.Size()
			}
		}
		return n
	}
	for range 3 {
		cmd := tideCmd(t, dir, "run", "-f", cfg)
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		// Kill once this run wrote something of its own: at 4000 events a
		// second the kill then lands inside a run of 5 ms batches.
		before, deadline := outBytes(), time.Now().Add(time.Minute)
		for outBytes() <= before {
			if time.Now().After(deadline) {
				cmd.Process.Kill()
				cmd.Wait()
				t.Fatalf("tide run wrote nothing past %d bytes within a minute", before)
			}
			time.Sleep(10 * time.Millisecond) // polls another process's output
		}
		cmd.Process.Kill()
		cmd.Wait()
	}
	if seq := checkpointSeq(t, dir, cfg); seq <= 0 || seq >= total {
		t.Fatalf("checkpoint after the kills at seq %d: want one inside the run, or the kills tested nothing", seq)
	}
	if out, err := runTide(t, dir, "run", "-f", cfg); err != nil {
		t.Fatalf("final run: %v\n%s", err, out)
	}
	for k := range colls {
		path := filepath.Join(dir, "out", "gen", fmt.Sprintf("events_%d.jsonl", k))
		b, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		want := int64(k + 1)
		n := 0
		for line := range strings.Lines(string(b)) {
			var rec struct {
				Namespace string `json:"_namespace"`
				Doc       struct {
					Seq int64 `json:"seq"`
				} `json:"_full_document"`
			}
			if err := json.Unmarshal([]byte(line), &rec); err != nil {
				t.Fatalf("%s line %d: %v", path, n+1, err)
			}
			if rec.Doc.Seq != want || rec.Namespace != fmt.Sprintf("gen.events_%d", k) {
				t.Fatalf("%s line %d: %s, want seq %d of gen.events_%d (lost, duplicated or misrouted)", path, n+1, line, want, k)
			}
			want += colls
			n++
		}
		if n != total/colls {
			t.Fatalf("%s holds %d records, want %d", path, n, total/colls)
		}
	}
}
