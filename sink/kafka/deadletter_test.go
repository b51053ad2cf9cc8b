package kafka_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/tide-cdc/tide/cdc"
	"github.com/tide-cdc/tide/checkpoint"
	"github.com/tide-cdc/tide/encode"
	"github.com/tide-cdc/tide/pipeline"
	"github.com/tide-cdc/tide/sink/kafka"
	"github.com/tide-cdc/tide/source/generate"
)

// bigSevens makes the document of every change whose seq ends in 7 too
// large for the broker (over its message.max.bytes, below the client's
// own limit): the broker refuses its record. It fails on those whose seq
// ends in 3: their letters are the batch's own (stage transform).
type bigSevens struct{}

func (bigSevens) Apply(ev *cdc.Event) (bool, error) {
	if strings.HasSuffix(string(ev.Pos), "3}") {
		return false, errors.New("threes fail")
	}
	if !strings.HasSuffix(string(ev.Pos), "7}") {
		return true, nil
	}
	doc, err := bson.Marshal(bson.D{{Key: "pad", Value: strings.Repeat("x", 100_000)}})
	if err != nil {
		return false, err
	}
	ev.FullDocument = doc
	return true, nil
}

// seqOf reads the seq of a generated change's position, {"seq":N}.
func seqOf(t *testing.T, pos []byte) int {
	t.Helper()
	var p struct {
		Seq int `json:"seq"`
	}
	if err := json.Unmarshal(pos, &p); err != nil {
		t.Fatalf("position %q: %v", pos, err)
	}
	return p.Seq
}

// TestRecordTooLargeSetAside: a broker that refuses records over 64 KiB;
// among the generated changes, those of seq ending in 7 are 100 KB, and
// those ending in 3 fail their transform. With on_error dead_letter, the
// pipeline splits each batch the sink refused, and, across a restart from
// the checkpoint, every good change is in its topic once and in order,
// every large one once in <pipeline>.dlq with stage sink, every failed
// one once with stage transform; exactly once with checkpoint: sink, and
// at least once (with no duplicate, since the sink does not write again
// what the cluster acknowledged of a refused batch) without.
func TestRecordTooLargeSetAside(t *testing.T) {
	t.Parallel()
	for name, eos := range map[string]bool{"exactly once": true, "at least once": false} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			brokers := cluster(t, kfake.BrokerConfigs(map[string]string{"message.max.bytes": "65536"}))
			mem := &checkpoint.Mem{}
			run := func(count int64) {
				cfg := kafka.DefaultConfig()
				cfg.Brokers, cfg.Pipeline, cfg.Logger, cfg.Topic, cfg.Partitions = brokers, "big", testLogger(t), "out", 3
				s := kafka.New(cfg)
				var store pipeline.Checkpointer = mem
				if eos {
					store = s.Checkpoints()
				}
				p := pipeline.New(pipeline.Config{Name: "big", MaxRecords: 40, Transform: bigSevens{}, OnError: pipeline.OnErrorDeadLetter, Logger: testLogger(t)},
					generate.New(generate.Config{Count: count, PayloadBytes: 4}), encode.Envelope, s, store)
				ctx, cancel := context.WithTimeout(t.Context(), 90*time.Second)
				defer cancel()
				if err := p.Run(ctx); err != nil {
					t.Fatal(err)
				}
				if err := s.Close(); err != nil {
					t.Fatal(err)
				}
			}
			run(100)
			run(200) // from the checkpoint: 101..200

			byPart := map[int32][]int{}
			var got []int
			for _, r := range readTopic(t, brokers, "out") {
				pos := r.Headers[slices.IndexFunc(r.Headers, func(h kgo.RecordHeader) bool { return h.Key == "tide-position" })].Value
				n := seqOf(t, pos)
				byPart[r.Partition] = append(byPart[r.Partition], n)
				got = append(got, n)
			}
			for p, seqs := range byPart {
				if !slices.IsSorted(seqs) {
					t.Errorf("partition %d out of order: %v", p, seqs)
				}
			}
			slices.Sort(got)
			var want []int
			for i := 1; i <= 200; i++ {
				if i%10 != 7 && i%10 != 3 {
					want = append(want, i)
				}
			}
			if !slices.Equal(got, want) {
				t.Fatalf("topic out holds %d records %v;\nwant each of the %d good changes once", len(got), got, len(want))
			}

			dlq := readTopic(t, brokers, "big.dlq")
			var dead, failed []int
			for _, r := range dlq {
				var l struct {
					Stage, Error string
					Position     json.RawMessage
					Change       struct {
						FullDocument json.RawMessage `json:"full_document"`
					}
				}
				if err := json.Unmarshal(r.Value, &l); err != nil {
					t.Fatal(err)
				}
				if l.Stage == "transform" {
					failed = append(failed, seqOf(t, l.Position))
					continue
				}
				if l.Stage != "sink" || !strings.Contains(l.Error, "MESSAGE_TOO_LARGE") || len(l.Change.FullDocument) < 100_000 {
					t.Errorf("letter at %s: stage %q, error %q, a document of %d bytes; want stage sink, the broker's refusal and the change", l.Position, l.Stage, l.Error, len(l.Change.FullDocument))
				}
				dead = append(dead, seqOf(t, l.Position))
			}
			slices.Sort(failed)
			if want := []int{3, 13, 23, 33, 43, 53, 63, 73, 83, 93, 103, 113, 123, 133, 143, 153, 163, 173, 183, 193}; !slices.Equal(failed, want) {
				t.Fatalf("big.dlq holds letters of stage transform at %v, want %v", failed, want)
			}
			slices.Sort(dead) // the topic's partitions, by the letters' keys
			if want := []int{7, 17, 27, 37, 47, 57, 67, 77, 87, 97, 107, 117, 127, 137, 147, 157, 167, 177, 187, 197}; !slices.Equal(dead, want) {
				t.Fatalf("big.dlq holds %v, want %v", dead, want)
			}

			cfg := kafka.DefaultConfig()
			cfg.Brokers = brokers
			letters, err := cfg.ReadDeadLetters(t.Context(), "big")
			if err != nil {
				t.Fatal(err)
			}
			i := slices.IndexFunc(letters, func(d cdc.DeadLetter) bool { return string(d.Event.Pos) == `{"seq":7}` })
			if len(letters) != 40 || i < 0 || letters[i].Stage != "sink" || len(letters[i].Event.FullDocument) < 100_000 {
				t.Fatalf("ReadDeadLetters: %d letters (seq 7 at %d); want 40, seq 7's with its document", len(letters), i)
			}
		})
	}
}

// TestRefusalIsErrRefused: a record the broker refuses as too large is a
// *RecordError that is a cdc.ErrRefused; an unreachable cluster is not.
func TestRefusalIsErrRefused(t *testing.T) {
	t.Parallel()
	brokers := cluster(t, kfake.BrokerConfigs(map[string]string{"message.max.bytes": "4096"}))
	cfg := kafka.DefaultConfig()
	cfg.Brokers, cfg.Pipeline, cfg.Logger = brokers, "p", testLogger(t)
	s, _ := eosSink(t, cfg)
	big := doc(t, "db.c", cdc.OpInsert, 2, 2)
	big.Data = fmt.Appendf(nil, `{"_id":2,"pad":%q}`, strings.Repeat("x", 8000))
	if err := s.Put(t.Context(), []cdc.Record{doc(t, "db.c", cdc.OpInsert, 1, 1), big}); err != nil {
		t.Fatal(err)
	}
	err := s.Commit(t.Context(), cdc.Checkpoint{Source: cdc.Position(`{"i":2}`)})
	var re *kafka.RecordError
	if !errors.Is(err, cdc.ErrRefused) || !errors.As(err, &re) {
		t.Fatalf("Commit = %v, want a RecordError that is cdc.ErrRefused", err)
	}
	// The transaction was aborted: the sink takes the next batch.
	if err := commit(t, s, 3, 5); err != nil {
		t.Fatalf("commit after the refusal: %v", err)
	}
	if got := values(t, brokers); !slices.Equal(got, []int{3, 4}) {
		t.Fatalf("read_committed sees %v, want [3 4]", got)
	}

	if errors.Is(&kafka.RecordError{Err: &net.OpError{Op: "dial", Err: errors.New("refused")}}, cdc.ErrRefused) {
		t.Error("a network error is cdc.ErrRefused")
	}
}
