package kafka

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/tide-cdc/tide/cdc"
	"github.com/tide-cdc/tide/internal/sinkcheckpoint"
)

// TransactionalID is the transactional id of pipeline's sink: a second
// tide running the pipeline takes it over, and the first is fenced.
func TransactionalID(pipeline string) string { return "tide." + pipeline }

// Checkpoints is the checkpoint store of a sink that keeps the pipeline's
// checkpoint in Kafka (checkpoint: sink): one record keyed by the
// pipeline's name in the compacted Config.CheckpointTopic, produced in
// the transaction of the records it covers, which makes the sink
// exactly-once for read_committed consumers. Get it from
// Sink.Checkpoints and pass it to the pipeline as its
// pipeline.Checkpointer.
type Checkpoints struct {
	s      *Sink
	ledger sinkcheckpoint.Ledger // what Commit wrote, for Save to find
}

// Load takes the pipeline's transactional id over (a tide still running
// the pipeline is fenced, and a transaction a killed one left open is
// aborted), then reads the checkpoint topic to its end with
// read_committed and returns the pipeline's checkpoint, or nil. Call it
// before Open, as the pipeline does.
func (c *Checkpoints) Load(ctx context.Context, pipeline string) (*cdc.Checkpoint, error) {
	s := c.s
	if pipeline != s.cfg.Pipeline {
		return nil, fmt.Errorf("kafka sink: asked for the checkpoint of pipeline %q, but the sink writes that of %q", pipeline, s.cfg.Pipeline)
	}
	if err := s.check(); err != nil {
		return nil, err
	}
	if s.client == nil {
		cl, err := s.newProducer()
		if err != nil {
			return nil, err
		}
		s.client = cl
	}
	if err := s.takeOver(ctx); err != nil {
		return nil, err
	}
	if err := ensureCheckpointTopic(ctx, s.client, s.cfg); err != nil {
		return nil, err
	}
	b, err := readCheckpoint(ctx, s.cfg, pipeline)
	if err != nil || b == nil {
		return nil, err
	}
	return unmarshal(s.cfg, pipeline, b)
}

// Save writes nothing: Commit already wrote cp in the transaction of the
// records it covers, and the pipeline calls Save only after that Commit
// returned. Save only checks that this sink committed cp.
func (c *Checkpoints) Save(_ context.Context, pipeline string, cp cdc.Checkpoint) error {
	if pipeline != c.s.cfg.Pipeline {
		return fmt.Errorf("kafka sink: asked to save the checkpoint of pipeline %q, but the sink writes that of %q", pipeline, c.s.cfg.Pipeline)
	}
	ok, err := c.ledger.Saved(cp)
	switch {
	case err != nil:
		return fmt.Errorf("kafka sink: %w", err)
	case ok:
		return nil
	}
	return fmt.Errorf("kafka sink: checkpoint at %s was not committed by this sink: pass Sink.Checkpoints only to the pipeline writing to that sink", cp.Source)
}

func unmarshal(c Config, pipeline string, b []byte) (*cdc.Checkpoint, error) {
	cp, err := sinkcheckpoint.Unmarshal(b)
	if err != nil {
		return nil, fmt.Errorf("kafka sink: checkpoint of %q in topic %s: %w", pipeline, c.CheckpointTopic, err)
	}
	return cp, nil
}

// producerID loads the producer id of the transactional id: the
// coordinator bumps its epoch, fencing any other producer of it, and
// ends the transaction that producer left open (committing one it had
// asked to commit). It retries an unreachable cluster for max_outage.
func producerID(ctx context.Context, cl *kgo.Client, c Config) (int64, int16, error) {
	ctx, cancel := context.WithTimeout(ctx, c.MaxOutage)
	defer cancel()
	id, epoch, err := cl.ProducerID(ctx)
	if err != nil {
		return 0, 0, fmt.Errorf("kafka sink: take over transactional id %q at %v: %w", TransactionalID(c.Pipeline), c.Brokers, err)
	}
	return id, epoch, nil
}

// takeOver takes the transactional id over with the sink's client, and
// remembers the producer id and epoch it got, by which it later tells
// whether another tide took the id over since (owner).
func (s *Sink) takeOver(ctx context.Context) error {
	id, epoch, err := producerID(ctx, s.client, s.cfg)
	if err != nil {
		return err
	}
	s.pid, s.epoch, s.pidKnown = id, epoch, true
	return nil
}

// owner says who holds the transactional id after a commit of unknown
// outcome, from the coordinator's producer id and epoch against the ones
// the sink's transaction used (s.pid, s.epoch):
//   - the same epoch: nobody took the id over, and the commit did not
//     end the transaction; taking the id over to settle it is safe;
//   - one more: either the commit ended the transaction (a coordinator
//     bumps the epoch at each end, KIP-890) or another tide took the id
//     over; only the checkpoint tells, read back without taking the id:
//     the sink's own means committed, anything else means fenced;
//   - anything else: another tide took the id over.
//
// Taking the id back from a tide that took it over would fence that tide
// in turn (a zombie stealing the pipeline back), so a fenced sink stops;
// a doubtful answer stops it too: the safe mistake, since a restart takes
// the id over and resumes from the checkpoint.
func (s *Sink) owner(ctx context.Context, value []byte) (owned, committed bool, err error) {
	if !s.pidKnown {
		return false, false, errors.New("kafka sink: the producer id of the transaction is unknown")
	}
	dctx, cancel := context.WithTimeout(ctx, s.cfg.MaxOutage)
	defer cancel()
	txn := TransactionalID(s.cfg.Pipeline)
	var d kadm.DescribedTransaction
	for {
		described, err := kadm.NewClient(s.client).DescribeTransactions(dctx, txn)
		if err == nil {
			var ok bool
			if d, ok = described[txn]; !ok {
				err = fmt.Errorf("no description of transactional id %q", txn)
			} else {
				err = d.Err
			}
		}
		if err == nil {
			break
		}
		select {
		case <-dctx.Done():
			return false, false, fmt.Errorf("kafka sink: describe transactional id %q for max_outage (%s): %w", txn, s.cfg.MaxOutage, err)
		case <-time.After(200 * time.Millisecond):
		}
	}
	switch {
	case d.ProducerID != s.pid:
		return false, false, nil
	case d.ProducerEpoch == s.epoch:
		return true, false, nil
	case d.ProducerEpoch == s.epoch+1:
		got, err := readCheckpoint(ctx, s.cfg, s.cfg.Pipeline)
		if err != nil {
			return false, false, err
		}
		if bytes.Equal(got, value) {
			return true, true, nil
		}
	}
	return false, false, nil
}

// noteEpoch remembers the producer id and epoch the client will use for
// its next transaction (a coordinator may bump the epoch at each end).
func (s *Sink) noteEpoch(ctx context.Context) {
	ctx, cancel := context.WithTimeout(ctx, s.cfg.MaxOutage)
	defer cancel()
	id, epoch, err := s.client.ProducerID(ctx)
	s.pid, s.epoch, s.pidKnown = id, epoch, err == nil
}

// ensureCheckpointTopic creates the compacted checkpoint topic if it is
// missing.
func ensureCheckpointTopic(ctx context.Context, cl *kgo.Client, c Config) error {
	compact := "compact"
	_, err := createTopic(ctx, cl, 1, c.ReplicationFactor, map[string]*string{"cleanup.policy": &compact}, c.CheckpointTopic)
	if err != nil {
		return fmt.Errorf("kafka sink: checkpoint topic: %w", err)
	}
	return nil
}

// createTopic creates topic, and reports whether it did: a topic that
// exists is no error.
func createTopic(ctx context.Context, cl *kgo.Client, partitions int32, rf int16, configs map[string]*string, topic string) (bool, error) {
	resp, err := kadm.NewClient(cl).CreateTopic(ctx, partitions, rf, configs, topic)
	if err == nil {
		err = resp.Err
	}
	switch {
	case err == nil:
		return true, nil
	case errors.Is(err, kerr.TopicAlreadyExists):
		return false, nil
	}
	if resp.ErrMessage != "" {
		err = fmt.Errorf("%w (%s)", err, resp.ErrMessage)
	}
	return false, fmt.Errorf("create topic %q: %w", topic, err)
}

// readCheckpoint reads c.CheckpointTopic with read_committed up to its
// last stable offset, as it was when the read began, and returns the
// last value of the record keyed pipeline: nil if there is none, or if
// the last is a tombstone.
func readCheckpoint(ctx context.Context, c Config, pipeline string) ([]byte, error) {
	var value []byte
	var at int64 = -1 // the offset of value's record
	err := eachCommitted(ctx, c, c.CheckpointTopic, func(r *kgo.Record) {
		// A pipeline's records all go to one partition (they share a
		// key), so the highest offset is the last written.
		if string(r.Key) == pipeline && r.Offset > at {
			value, at = r.Value, r.Offset
		}
	})
	if err != nil || len(value) == 0 {
		return nil, err
	}
	return bytes.Clone(value), nil
}

// eachCommitted calls fn with each record of topic that a read_committed
// consumer sees, up to the last stable offset of each partition as it was
// when the read began (nothing if the topic does not exist), within
// c.MaxOutage.
func eachCommitted(ctx context.Context, c Config, topic string, fn func(*kgo.Record)) error {
	opts, err := connOpts(c)
	if err != nil {
		return fmt.Errorf("kafka sink: %w", err)
	}
	ctx, cancel := context.WithTimeout(ctx, c.MaxOutage)
	defer cancel()
	admin, err := kgo.NewClient(opts...)
	if err != nil {
		return fmt.Errorf("kafka sink: %w", err)
	}
	defer admin.Close()
	adm := kadm.NewClient(admin)
	starts, err := adm.ListStartOffsets(ctx, topic)
	if err == nil {
		err = starts.Error()
	}
	if errors.Is(err, kerr.UnknownTopicOrPartition) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("kafka sink: read topic %s: %w", topic, err)
	}
	ends, err := adm.ListCommittedOffsets(ctx, topic)
	if err == nil {
		err = ends.Error()
	}
	if err != nil {
		return fmt.Errorf("kafka sink: read topic %s: %w", topic, err)
	}
	// The partitions to read, and the offset each is read to: the last
	// before the last stable offset. With control records kept, the
	// record there is always returned (a commit or abort marker, or a
	// record of no transaction), which says the read is complete.
	from := map[int32]kgo.Offset{}
	last := map[int32]int64{}
	for p, e := range ends[topic] {
		s, _ := starts.Lookup(topic, p)
		if e.Offset > s.Offset {
			from[p] = kgo.NewOffset().At(s.Offset)
			last[p] = e.Offset - 1
		}
	}
	if len(from) == 0 {
		return nil
	}
	consumer, err := kgo.NewClient(append(opts,
		kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{topic: from}),
		kgo.FetchIsolationLevel(kgo.ReadCommitted()),
		kgo.KeepControlRecords(),
		kgo.FetchMaxWait(200*time.Millisecond),
	)...)
	if err != nil {
		return fmt.Errorf("kafka sink: %w", err)
	}
	defer consumer.Close()
	for len(last) > 0 {
		fs := consumer.PollFetches(ctx)
		if err := ctx.Err(); err != nil {
			return fmt.Errorf("kafka sink: read topic %s: %d partitions not read to their end: %w", topic, len(last), err)
		}
		var ferr error
		fs.EachError(func(_ string, _ int32, err error) { ferr = errors.Join(ferr, err) })
		if ferr != nil && !isNetwork(ferr) {
			return fmt.Errorf("kafka sink: read topic %s: %w", topic, ferr)
		}
		fs.EachRecord(func(r *kgo.Record) {
			end, reading := last[r.Partition]
			if !reading || r.Offset > end {
				return
			}
			if r.Offset == end {
				delete(last, r.Partition)
			}
			if !r.Attrs.IsControl() {
				fn(r)
			}
		})
	}
	return nil
}

// The Config's side of a sink that keeps the checkpoint
// (cdc.CheckpointTable), for tide checkpoint show|set|reset.
var _ cdc.CheckpointTable = Config{}

// FenceCheckpoint takes pipeline's transactional id over, as a starting
// sink does: a tide running the pipeline fails its next commit, and
// nothing it wrote since its last commit becomes visible (Spec.BuildFenced,
// for tide worker).
func (c Config) FenceCheckpoint(ctx context.Context, pipeline string) error {
	cl, _, err := c.takeOver(ctx, pipeline)
	if err != nil {
		return err
	}
	cl.Close()
	return nil
}

// takeOver takes pipeline's transactional id over with a new transactional
// producer, which it returns (to close), with the config it runs with.
func (c Config) takeOver(ctx context.Context, pipeline string) (*kgo.Client, Config, error) {
	c.Pipeline = pipeline
	s := New(c)
	s.Checkpoints() // transactional
	if err := s.check(); err != nil {
		return nil, c, err
	}
	cl, err := s.newProducer()
	if err != nil {
		return nil, c, err
	}
	s.client = cl
	if err := s.takeOver(ctx); err != nil {
		cl.Close()
		return nil, c, err
	}
	return cl, s.cfg, nil
}

// CheckpointLocation names the checkpoint topic, for people.
func (c Config) CheckpointLocation() string {
	return fmt.Sprintf("the checkpoint topic %q of sink.kafka", c.withDefaults().CheckpointTopic)
}

// ReadCheckpoint returns the checkpoint pipeline keeps in the checkpoint
// topic, or nil if it has none, without taking the pipeline over, so that
// it works while the pipeline runs.
func (c Config) ReadCheckpoint(ctx context.Context, pipeline string) (*cdc.Checkpoint, error) {
	c.Pipeline = pipeline
	c = c.withDefaults()
	b, err := readCheckpoint(ctx, c, pipeline)
	if err != nil || b == nil {
		return nil, err
	}
	return unmarshal(c, pipeline, b)
}

// RewriteCheckpoint replaces the checkpoint of pipeline with what change
// returns for it, in a transaction of the pipeline's transactional id: a
// tide running the pipeline is fenced, and stops at its next commit
// instead of overwriting the new checkpoint.
func (c Config) RewriteCheckpoint(ctx context.Context, pipeline string, change func(*cdc.Checkpoint) (*cdc.Checkpoint, error)) error {
	return c.rewrite(ctx, pipeline, func(cp *cdc.Checkpoint) ([]byte, bool, error) {
		next, err := change(cp)
		if err != nil || next == nil {
			return nil, false, err
		}
		b, err := sinkcheckpoint.Marshal(*next)
		if err != nil {
			return nil, false, fmt.Errorf("kafka sink: %w", err)
		}
		return b, true, nil
	})
}

// DeleteCheckpoint writes a tombstone for the checkpoint of pipeline,
// taking the pipeline over as RewriteCheckpoint does. The records the
// sink wrote stay: the next run writes them again.
func (c Config) DeleteCheckpoint(ctx context.Context, pipeline string) error {
	return c.rewrite(ctx, pipeline, func(*cdc.Checkpoint) ([]byte, bool, error) { return nil, true, nil })
}

// rewrite takes pipeline over, reads its checkpoint and writes the value
// next returns for it (nil: a tombstone), if it says so.
func (c Config) rewrite(ctx context.Context, pipeline string, next func(*cdc.Checkpoint) ([]byte, bool, error)) error {
	cl, c, err := c.takeOver(ctx, pipeline)
	if err != nil {
		return err
	}
	defer cl.Close()
	if err := ensureCheckpointTopic(ctx, cl, c); err != nil {
		return err
	}
	b, err := readCheckpoint(ctx, c, pipeline)
	if err != nil {
		return err
	}
	var cp *cdc.Checkpoint
	if b != nil {
		if cp, err = unmarshal(c, pipeline, b); err != nil {
			return err
		}
	}
	value, write, err := next(cp)
	if err != nil || !write {
		return err
	}
	if err := cl.BeginTransaction(); err != nil {
		return fmt.Errorf("kafka sink: %w", err)
	}
	rec := &kgo.Record{Topic: c.CheckpointTopic, Key: []byte(pipeline), Value: value}
	if err := cl.ProduceSync(ctx, rec).FirstErr(); err != nil {
		cl.EndTransaction(context.WithoutCancel(ctx), kgo.TryAbort)
		return fmt.Errorf("kafka sink: write checkpoint of %q: %w", pipeline, err)
	}
	if err := cl.EndTransaction(ctx, kgo.TryCommit); err != nil {
		return fmt.Errorf("kafka sink: commit checkpoint of %q: %w", pipeline, err)
	}
	return nil
}
