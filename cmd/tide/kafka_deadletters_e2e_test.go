package main

import (
	"fmt"
	"slices"
	"strings"
	"testing"
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
