package main

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"
)

// TestKafkaDeadLettersCommands: `tide run` into Kafka with checkpoint:
// sink and on_error: dead_letter sets the changes whose transform fails
// aside in the topic <pipeline>.dlq, in the batches' transactions; `tide
// dead-letters list` reads them from that topic, and `tide dead-letters
// replay`, after the transform is fixed, writes them to their topic:
// then every change is there once.
func TestKafkaDeadLettersCommands(t *testing.T) {
	t.Parallel()
	brokers := kafkaCluster(t, 1)
	dir := t.TempDir()
	pipelineFile := func(v string) string {
		return writePipeline(t, dir, `
name: gen-dlq
source:
  generate: {count: 50, payload_bytes: 3}
sink:
  kafka: {brokers: [`+brokers+`], topic: out}
transforms:
  - set: {v: '`+v+`'}
checkpoint: sink
on_error: dead_letter
batch: {max_records: 20}
`)
	}
	cfg := pipelineFile(`doc.seq % 10 == 7 ? int(doc.payload) : doc.seq`)
	if out, err := runTide(t, dir, "run", "-f", cfg, "--progress", "never"); err != nil {
		t.Fatalf("tide run: %v\n%s", err, out)
	}
	var got []int64
	for _, s := range kcatSeqs(t, brokers, "out") {
		got = append(got, s...)
	}
	slices.Sort(got)
	if len(got) != 45 || slices.Contains(got, 7) {
		t.Fatalf("topic out holds %v; want the 45 changes whose transform works", got)
	}
	out, err := runTide(t, dir, "dead-letters", "list", "-f", cfg)
	if err != nil || strings.Count(out, " transform ") != 5 {
		t.Fatalf("dead-letters list: %v; want 5 letters of stage transform:\n%s", err, out)
	}
	for seq := 7; seq < 50; seq += 10 {
		if !strings.Contains(out, fmt.Sprintf(`{"seq":%d}`, seq)) {
			t.Fatalf("dead-letters list does not show the letter at seq %d:\n%s", seq, out)
		}
	}

	cfg = pipelineFile(`doc.seq`)
	if out, err := runTide(t, dir, "dead-letters", "replay", "-f", cfg); err != nil || !strings.Contains(out, "replayed 5 dead letters into sink.kafka") {
		t.Fatalf("dead-letters replay: %v\n%s", err, out)
	}
	got = got[:0]
	for _, s := range kcatSeqs(t, brokers, "out") {
		got = append(got, s...)
	}
	slices.Sort(got)
	var want []int64
	for i := int64(1); i <= 50; i++ {
		want = append(want, i)
	}
	if !slices.Equal(got, want) {
		t.Fatalf("after the replay, topic out holds %v; want 1..50 once each", got)
	}
}

// TestKafkaDeadLettersSIGKILL: tide runs generate → Kafka with
// checkpoint: sink and on_error: dead_letter, where the transform of
// every change whose seq ends in 07 fails, and is SIGKILLed at random
// moments 5 times, then runs to the end: read with read_committed, every
// other change is in its topic once, in order in each partition, and
// every failed one once in <pipeline>.dlq, since each batch's letters
// are in its transaction.
func TestKafkaDeadLettersSIGKILL(t *testing.T) {
	const total = 30000
	brokers := kafkaCluster(t, 1)
	dir := t.TempDir()
	cfg := writePipeline(t, dir, fmt.Sprintf(`
name: crash-dlq
source:
  generate: {count: %d, rate: 10000, payload_bytes: 20}
sink:
  kafka: {brokers: [%s], partitions: 3, topic: out}
transforms:
  - set: {v: 'doc.seq %% 100 == 7 ? int(doc.payload) : doc.seq'}
checkpoint: sink
on_error: dead_letter
batch: {max_records: 500, commit_interval: 20ms}
`, total, brokers))
	sigkillRuns(t, dir, 5, 150*time.Millisecond, 300*time.Millisecond, "run", "-f", cfg, "--progress", "never")
	if out, err := runTide(t, dir, "run", "-f", cfg, "--progress", "never"); err != nil {
		t.Fatalf("final tide run: %v\n%s", err, out)
	}

	seen := map[int64]int{}
	for p, s := range kcatSeqs(t, brokers, "out") {
		for i, v := range s {
			if i > 0 && v <= s[i-1] {
				t.Fatalf("partition %d: seq %d read after %d", p, v, s[i-1])
			}
			seen[v]++
		}
	}
	for v := int64(1); v <= total; v++ {
		want := 1
		if v%100 == 7 {
			want = 0
		}
		if seen[v] != want {
			t.Fatalf("topic out holds seq %d %d times, want %d", v, seen[v], want)
		}
	}

	out, err := runTide(t, dir, "dead-letters", "list", "-f", cfg)
	if err != nil {
		t.Fatalf("dead-letters list: %v\n%s", err, out)
	}
	if n := strings.Count(out, " transform "); n != total/100 {
		t.Fatalf("dead-letters list shows %d letters, want %d", n, total/100)
	}
	// The topic itself, not only the list (which keeps a letter once by
	// its id): each letter is there once.
	letters := map[string]int{}
	for _, r := range kcatRaw(t, brokers, "crash-dlq.dlq") {
		letters[r]++
	}
	for pos, n := range letters {
		if n != 1 {
			t.Fatalf("crash-dlq.dlq holds the letter of %s %d times", pos, n)
		}
	}
	if len(letters) != total/100 {
		t.Fatalf("crash-dlq.dlq holds %d letters, want %d", len(letters), total/100)
	}
}

// kcatRaw returns the key of each record of topic, read by kcat with
// read_committed.
func kcatRaw(t *testing.T, brokers, topic string) []string {
	t.Helper()
	return strings.Fields(string(kcatRead(t, brokers, topic, "%k\n")))
}
