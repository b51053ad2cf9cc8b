package kafka_test

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/tide-cdc/tide/cdc"
	"github.com/tide-cdc/tide/sink/kafka"
)

// eosSink opens a sink that keeps the checkpoint, as the pipeline does:
// Load, then Open.
func eosSink(t *testing.T, cfg kafka.Config) (*kafka.Sink, *cdc.Checkpoint) {
	t.Helper()
	s := kafka.New(cfg)
	cp, err := s.Checkpoints().Load(t.Context(), cfg.Pipeline)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Open(t.Context(), cp); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s, cp
}

func batchOf(t *testing.T, from, to int) []cdc.Record {
	var b []cdc.Record
	for i := from; i < to; i++ {
		b = append(b, doc(t, "db.c", cdc.OpInsert, int32(i), i))
	}
	return b
}

// commit puts records [from, to) and commits the checkpoint of the last.
func commit(t *testing.T, s *kafka.Sink, from, to int) error {
	t.Helper()
	b := batchOf(t, from, to)
	if err := s.Put(t.Context(), b); err != nil {
		return err
	}
	err := s.Commit(t.Context(), cdc.Checkpoint{Source: b[len(b)-1].Pos})
	if err == nil {
		err = s.Checkpoints().Save(t.Context(), "p", cdc.Checkpoint{Source: b[len(b)-1].Pos})
	}
	return err
}

// values returns the pos of each record of db.c a read_committed
// consumer sees.
func values(t *testing.T, brokers []string) []int {
	var out []int
	for _, r := range readTopic(t, brokers, "p.db.c") {
		var id, pos int
		var op string
		if _, err := fmt.Sscanf(string(r.Value), `{"_id":%d,"op":%q,"pos":%d}`, &id, &op, &pos); err != nil {
			t.Fatalf("value %q", r.Value)
		}
		out = append(out, pos)
	}
	return out
}

func eosConfig(t *testing.T, brokers []string) kafka.Config {
	cfg := kafka.DefaultConfig()
	cfg.Brokers, cfg.Pipeline, cfg.Logger, cfg.Partitions = brokers, "p", testLogger(t), 1
	return cfg
}

// TestFencing: a second sink of the same pipeline takes the
// transactional id over; the first one's next commit fails with
// ErrFenced and nothing of that batch becomes visible; the second resumes
// from the checkpoint the first committed.
func TestFencing(t *testing.T) {
	t.Parallel()
	brokers := cluster(t)
	cfg := eosConfig(t, brokers)
	a, _ := eosSink(t, cfg)
	if err := commit(t, a, 0, 5); err != nil {
		t.Fatal(err)
	}
	if err := a.Put(t.Context(), batchOf(t, 5, 8)); err != nil { // an open transaction
		t.Fatal(err)
	}
	b, cp := eosSink(t, cfg)
	if cp == nil || string(cp.Source) != `{"i":4}` {
		t.Fatalf("the second sink loaded %+v, want the checkpoint of record 4", cp)
	}
	err := a.Commit(t.Context(), cdc.Checkpoint{Source: cdc.Position(`{"i":7}`)})
	if !errors.Is(err, kafka.ErrFenced) {
		t.Fatalf("the first sink's commit after the takeover: %v, want ErrFenced", err)
	}
	if err := commit(t, b, 5, 9); err != nil {
		t.Fatal(err)
	}
	if got := fmt.Sprint(values(t, brokers)); got != "[0 1 2 3 4 5 6 7 8]" {
		t.Errorf("read_committed sees %s, want each of 0-8 once", got)
	}
}

// TestUnknownCommitOutcome: the answer to EndTxn never arrives (the
// connection is cut, every retry too, until the sink takes its
// transactional id over again to read the checkpoint back). When the
// coordinator had committed, the sink finds its checkpoint and reports
// success: the batch is not written again. When it had not, the
// transaction is aborted by the takeover, and the sink writes the batch
// again in a new one: each record is visible once either way.
func TestUnknownCommitOutcome(t *testing.T) {
	t.Parallel()
	for name, applied := range map[string]bool{"committed": true, "not committed": false} {
		t.Run(name, func(t *testing.T) {
			c, err := kfake.NewCluster(kfake.NumBrokers(1))
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			brokers := c.ListenAddrs()
			cfg := eosConfig(t, brokers)
			cfg.ClientOptions = []kgo.Opt{kgo.RequestRetries(2), kgo.RetryTimeout(3 * time.Second)}
			s, _ := eosSink(t, cfg)
			if err := commit(t, s, 0, 3); err != nil {
				t.Fatal(err)
			}

			raw, err := kgo.NewClient(kgo.SeedBrokers(brokers...))
			if err != nil {
				t.Fatal(err)
			}
			defer raw.Close()
			var cutting, replaying atomic.Bool
			cutting.Store(true)
			// The takeover to read the checkpoint back ends the outage.
			c.ControlKey(int16(kmsg.InitProducerID), func(kmsg.Request) (kmsg.Response, error, bool) {
				if replaying.Load() {
					return nil, nil, false
				}
				cutting.Store(false)
				return nil, nil, false
			})
			c.ControlKey(int16(kmsg.EndTxn), func(req kmsg.Request) (kmsg.Response, error, bool) {
				if replaying.Load() || !cutting.Load() {
					return nil, nil, false // the replay below, or after the test: as usual
				}
				c.KeepControl()
				end := req.(*kmsg.EndTxnRequest)
				if applied && end.Commit {
					// Let the coordinator commit, once, through another
					// connection; the sink's connection is cut all the same.
					c.SleepControl(func() {
						replaying.Store(true)
						defer replaying.Store(false)
						ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
						defer cancel()
						r := *end
						if _, err := raw.Request(ctx, &r); err != nil {
							t.Errorf("replay EndTxn: %v", err)
						}
					})
					applied = false
				}
				return nil, errors.New("connection cut after EndTxn"), true
			})

			if err := commit(t, s, 3, 6); err != nil {
				t.Fatalf("commit of unknown outcome: %v", err)
			}
			st := s.Stats()
			if name == "committed" && (st.Resolved != 1 || st.Replayed != 0) || name != "committed" && (st.Resolved != 0 || st.Replayed != 1) {
				t.Errorf("Stats() = %+v, want the commit %s", st, map[bool]string{true: "resolved", false: "written again"}[name == "committed"])
			}
			if err := commit(t, s, 6, 8); err != nil {
				t.Fatalf("the commit after: %v", err)
			}
			if got, want := fmt.Sprint(values(t, brokers)), "[0 1 2 3 4 5 6 7]"; got != want {
				t.Errorf("read_committed sees %s, want %s", got, want)
			}
		})
	}
}

// TestAbortableProduceError: a broker that refuses a transaction's
// produce for its sequence (OUT_OF_ORDER_SEQUENCE_NUMBER, as a broker that
// lost the producer's state answers) ends the transaction, not the batch:
// the sink aborts it and writes the whole batch again in a new one, and a
// read_committed consumer sees each record once.
func TestAbortableProduceError(t *testing.T) {
	t.Parallel()
	for _, code := range []int16{kerr.OutOfOrderSequenceNumber.Code, kerr.UnknownProducerID.Code, kerr.TransactionAbortable.Code} {
		t.Run(kerr.ErrorForCode(code).(*kerr.Error).Message, func(t *testing.T) {
			t.Parallel()
			c, err := kfake.NewCluster(kfake.NumBrokers(1))
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			brokers := c.ListenAddrs()
			s, _ := eosSink(t, eosConfig(t, brokers))
			if err := commit(t, s, 0, 3); err != nil {
				t.Fatal(err)
			}
			ckptID := topicID(t, brokers, "tide_checkpoints")
			var refused atomic.Int32
			c.ControlKey(int16(kmsg.Produce), func(req kmsg.Request) (kmsg.Response, error, bool) {
				c.KeepControl()
				pr := req.(*kmsg.ProduceRequest)
				checkpoint := false
				for _, tp := range pr.Topics {
					checkpoint = checkpoint || tp.Topic == "tide_checkpoints" || tp.TopicID == ckptID
				}
				if !checkpoint || refused.Load() > 0 {
					return nil, nil, false
				}
				refused.Add(1)
				resp := pr.ResponseKind().(*kmsg.ProduceResponse)
				for _, tp := range pr.Topics {
					rt := kmsg.NewProduceResponseTopic()
					rt.Topic, rt.TopicID = tp.Topic, tp.TopicID
					for _, p := range tp.Partitions {
						rp := kmsg.NewProduceResponseTopicPartition()
						rp.Partition, rp.ErrorCode = p.Partition, code
						rt.Partitions = append(rt.Partitions, rp)
					}
					resp.Topics = append(resp.Topics, rt)
				}
				return resp, nil, true
			})
			if err := commit(t, s, 3, 6); err != nil {
				t.Fatalf("commit of a batch whose produce was refused for its sequence: %v", err)
			}
			if refused.Load() != 1 {
				t.Fatalf("the broker refused %d produce requests, want 1", refused.Load())
			}
			if st := s.Stats(); st.Replayed != 1 {
				t.Errorf("Stats().Replayed = %d, want 1", st.Replayed)
			}
			if err := commit(t, s, 6, 8); err != nil {
				t.Fatalf("the commit after: %v", err)
			}
			if got, want := fmt.Sprint(values(t, brokers)), "[0 1 2 3 4 5 6 7]"; got != want {
				t.Errorf("read_committed sees %s, want %s", got, want)
			}
		})
	}
}

// topicID returns the id of topic (produce requests name topics by id
// from version 13).
func topicID(t *testing.T, brokers []string, topic string) [16]byte {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(brokers...))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	topics, err := kadm.NewClient(cl).ListTopics(t.Context(), topic)
	if err != nil {
		t.Fatal(err)
	}
	d, ok := topics[topic]
	if !ok || d.Err != nil {
		t.Fatalf("topic %s: %v", topic, d.Err)
	}
	return d.ID
}
