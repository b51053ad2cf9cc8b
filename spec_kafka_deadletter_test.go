package tide

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/tide-cdc/tide/cdc"
	"github.com/tide-cdc/tide/transform"
)

// bigSevens makes the document of each change whose seq ends in 7 larger
// than the test cluster takes in a record.
func bigSevens(ev *cdc.Event) (bool, error) {
	if !strings.HasSuffix(string(ev.Pos), "7}") {
		return true, nil
	}
	doc, err := bson.Marshal(bson.D{{Key: "pad", Value: strings.Repeat("x", 100_000)}})
	ev.FullDocument = doc
	return err == nil, err
}

// kafkaSeqs returns the seq of each record of topic, from its key
// ({"id": "{\"$numberLong\": \"N\"}"}), as kcat reads them with
// read_committed.
func kafkaSeqs(t *testing.T, brokers, topic string) []int {
	t.Helper()
	var out []int
	for _, r := range kcatTopic(t, brokers, topic) {
		var k struct{ ID string }
		var id struct {
			N string `json:"$numberLong"`
		}
		var n int
		if err := json.Unmarshal([]byte(r.Key), &k); err != nil {
			t.Fatalf("key %q: %v", r.Key, err)
		}
		if err := json.Unmarshal([]byte(k.ID), &id); err != nil {
			t.Fatalf("key %q: %v", r.Key, err)
		}
		fmt.Sscan(id.N, &n)
		out = append(out, n)
	}
	slices.Sort(out)
	return out
}

// TestSpecKafkaDeadLetters: a pipeline file into Kafka with checkpoint:
// sink and on_error: dead_letter, on a cluster that refuses records over
// 64 KiB, where the changes of seq ending in 7 are 100 KB. Across a
// restart, every other change is in its topic once; the large ones are
// in <pipeline>.dlq once, with stage sink, and Spec.DeadLetters (tide
// dead-letters list) reads them. Once the topic takes larger records,
// BuildReplay (tide dead-letters replay) writes them, and the checkpoint
// stays where it was.
func TestSpecKafkaDeadLetters(t *testing.T) {
	t.Parallel()
	kc, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.BrokerConfigs(map[string]string{"message.max.bytes": "65536"}))
	if err != nil {
		t.Fatal(err)
	}
	defer kc.Close()
	brokers := strings.Join(kc.ListenAddrs(), ",")
	dir := t.TempDir()
	text := func(count int) []byte {
		return fmt.Appendf(nil, `name: big
source:
  generate: {count: %d, payload_bytes: 4}
sink:
  kafka: {brokers: [%s], topic: out, partitions: 3}
checkpoint: sink
on_error: dead_letter
data_dir: %q
batch: {max_records: 40, commit_interval: 10ms}
`, count, brokers, dir)
	}
	parse := func(count int) *Spec {
		s, err := Parse(text(count), Options{Transforms: []transform.Step{{FuncName: "big_sevens", Func: bigSevens}}})
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	run := func(count int) {
		ctx, cancel := context.WithTimeout(t.Context(), 90*time.Second)
		defer cancel()
		p, err := parse(count).Build(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if err := p.Run(ctx); err != nil {
			t.Fatal(err)
		}
	}
	run(100)
	run(200) // from the checkpoint

	var good, big []int
	for i := 1; i <= 200; i++ {
		if i%10 == 7 {
			big = append(big, i)
		} else {
			good = append(good, i)
		}
	}
	if got := kafkaSeqs(t, brokers, "out"); !slices.Equal(got, good) {
		t.Fatalf("topic out holds %v,\nwant each of the %d good changes once", got, len(good))
	}
	s := parse(200)
	letters, err := s.DeadLetters(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	var dead []int
	for _, l := range letters {
		var p struct{ Seq int }
		if err := json.Unmarshal(l.Position, &p); err != nil {
			t.Fatal(err)
		}
		if l.Stage != "sink" || !strings.Contains(l.Error, "MESSAGE_TOO_LARGE") || l.Namespace != "gen.events" {
			t.Errorf("letter at %s: stage %q, namespace %q, error %q", l.Position, l.Stage, l.Namespace, l.Error)
		}
		dead = append(dead, p.Seq)
	}
	slices.Sort(dead)
	if !slices.Equal(dead, big) {
		t.Fatalf("dead letters at %v, want %v", dead, big)
	}

	// The fix: the topic takes records of up to 1 MB.
	cl, err := kgo.NewClient(kgo.SeedBrokers(kc.ListenAddrs()...))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	limit := "1048576"
	resp, err := kadm.NewClient(cl).AlterTopicConfigs(t.Context(), []kadm.AlterConfig{{Op: kadm.SetConfig, Name: "max.message.bytes", Value: &limit}}, "out")
	if err == nil {
		_, err = resp.On("out", nil)
	}
	if err != nil {
		t.Fatal(err)
	}
	store, err := s.Checkpoints(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	before, err := store.Load(t.Context())
	store.Close()
	if err != nil || before == nil {
		t.Fatalf("checkpoint before the replay: %v, %v", before, err)
	}
	p, err := s.BuildReplay(t.Context(), letters)
	if err != nil {
		t.Fatal(err)
	}
	if err := p.Run(t.Context()); err != nil {
		t.Fatal(err)
	}
	all := slices.Sorted(slices.Values(append(slices.Clone(good), big...)))
	if got := kafkaSeqs(t, brokers, "out"); !slices.Equal(got, all) {
		t.Fatalf("after the replay, topic out holds %v,\nwant each of the 200 changes once", got)
	}
	store, err = parse(200).Checkpoints(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	after, err := store.Load(t.Context())
	store.Close()
	if err != nil || after == nil || string(after.Source) != string(before.Source) {
		t.Fatalf("checkpoint after the replay: %v (%v), want %s", after, err, before.Source)
	}
}
