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
	"github.com/twmb/franz-go/pkg/kmsg"
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

// TestRefusedBatchKeepsPartitionOrder: at least once, a partition's batch
// the broker refuses (a record too large) while later batches of the same
// partition are in flight. The later ones must not be written ahead of
// the refused batch's other records: put again, as the pipeline's split
// does, everything but the large record lands once, in order.
func TestRefusedBatchKeepsPartitionOrder(t *testing.T) {
	t.Parallel()
	c, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.BrokerConfigs(map[string]string{"message.max.bytes": "65536"}))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	// Each produce answer is held back, so that the client sends the
	// next batches before it hears of the refused one.
	c.ControlKey(int16(kmsg.Produce), func(kmsg.Request) (kmsg.Response, error, bool) {
		c.KeepControl()
		time.Sleep(20 * time.Millisecond)
		return nil, nil, false
	})
	cfg := kafka.DefaultConfig()
	cfg.Brokers, cfg.Pipeline, cfg.Logger, cfg.Topic, cfg.Partitions = c.ListenAddrs(), "order", testLogger(t), "out", 1
	s := openSink(t, cfg)
	const n, big = 60, 10
	batch := func(skip int) []cdc.Record {
		var b []cdc.Record
		for i := range n {
			if i == skip {
				continue
			}
			r := doc(t, "db.c", cdc.OpInsert, int32(i), i)
			if i == big {
				r.Data = fmt.Appendf(nil, `{"_id":%d,"op":"insert","pos":%d,"pad":%q}`, i, i, strings.Repeat("x", 100_000))
			}
			b = append(b, r)
			if i%7 == 6 {
				// Put in pieces with pauses, as a producer whose
				// batches are in flight one after the other.
				if err := s.Put(t.Context(), b); err != nil {
					t.Fatal(err)
				}
				b = b[:0]
				time.Sleep(5 * time.Millisecond)
			}
		}
		return b
	}
	if err := s.Put(t.Context(), batch(-1)); err != nil {
		t.Fatal(err)
	}
	err = s.Commit(t.Context(), cdc.Checkpoint{Source: cdc.Position(`{"i":59}`)})
	if !errors.Is(err, cdc.ErrRefused) {
		t.Fatalf("Commit of a batch with a record too large = %v, want a refusal", err)
	}
	if err := s.Put(t.Context(), batch(big)); err != nil {
		t.Fatal(err)
	}
	if err := s.Commit(t.Context(), cdc.Checkpoint{Source: cdc.Position(`{"i":59}`)}); err != nil {
		t.Fatalf("Commit of the batch put again without the large record: %v", err)
	}
	var got []int
	for _, r := range readTopic(t, c.ListenAddrs(), "out") {
		var v struct{ Pos int }
		if err := json.Unmarshal(r.Value, &v); err != nil {
			t.Fatal(err)
		}
		got = append(got, v.Pos)
	}
	var want []int
	for i := range n {
		if i != big {
			want = append(want, i)
		}
	}
	if !slices.Equal(got, want) {
		t.Fatalf("partition 0 holds %v;\nwant every record but %d once, in order", got, big)
	}
}
