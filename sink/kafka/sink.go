package kafka

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/tide-cdc/tide/cdc"
	"github.com/tide-cdc/tide/encode"
	"github.com/tide-cdc/tide/internal/placeholder"
	"github.com/tide-cdc/tide/internal/retry"
	"github.com/tide-cdc/tide/internal/sinkcheckpoint"
)

// transactionTimeout is how long the coordinator lets a transaction stay
// open before it aborts it: long enough for a batch that rides out an
// outage of max_outage, within the brokers' default limit
// (transaction.max.timeout.ms, 15 minutes). A tide killed mid-batch is
// aborted at once by the next start instead.
func transactionTimeout(maxOutage time.Duration) time.Duration {
	return min(max(2*maxOutage, time.Minute), 15*time.Minute)
}

// Stats counts what the sink did.
type Stats struct {
	Records      int64 // records acknowledged by the cluster (tombstones included)
	Transactions int64 // committed transactions (checkpoint: sink)
	// Resolved counts commits of unknown outcome that reading the
	// checkpoint back showed had succeeded: not written again.
	Resolved int64
	// Replayed counts transactions that aborted (the checkpoint read
	// back was not theirs) and were written again, whole.
	Replayed int64
	Created  int64 // topics created
}

// Sink writes records to Kafka topics. It implements cdc.Sink. Open, Put,
// Commit and Close are called from one goroutine.
type Sink struct {
	cfg   Config
	log   *slog.Logger
	topic []placeholder.Part
	ckpts *Checkpoints // nil unless the sink keeps the checkpoint

	client *kgo.Client
	// pid and epoch: the producer id the sink took the transactional id
	// over with (checkpoint.go).
	pid      int64
	epoch    int16
	pidKnown bool
	opened   bool
	inTxn    bool
	topics   map[string]bool // topics known to exist
	// limits holds each topic's largest record batch (topic -> int32),
	// read by the client's goroutines (batchMax); brokerMax is the
	// brokers' message.max.bytes, 0 until known.
	limits    sync.Map
	brokerMax int32
	// rendered caches each namespace's topic, unless the template has
	// {op} (byOp).
	rendered map[string]string
	byOp     bool
	avro     *registry // encode.format: avro: the schemas registered

	// txnRecords are the records of the open transaction, written
	// again in a new one if it aborts.
	txnRecords []kept
	// letters are the dead letters staged for the next Commit.
	letters []*kgo.Record
	// skip names the records (ackKey) that a Commit refused for another
	// record of its batch had got acknowledged for, without a
	// transaction: the runtime puts them again as it splits the batch,
	// and the sink does not write them twice.
	skip map[string]bool
	// skipping are the records of skip the last Put skipped: forgotten
	// once the Commit of their part succeeds.
	skipping []string

	report  cdc.RetryFunc // SetRetry's; nil outside a pipeline
	retries retries

	// The produce results of the records put since the last Commit,
	// which the client reports from its own goroutines.
	mu       sync.Mutex // guards the fields below
	produced *RecordError
	// refused is the first record of the batch refused for what it
	// holds (RecordError.Is cdc.ErrRefused).
	refused *RecordError
	// acked are the records acknowledged since the last Commit,
	// without a transaction: named (ackKey) only if the Commit is
	// refused, so that the common case allocates nothing per record.
	acked []acked

	records, txns, resolved, replayed, created atomic.Int64
}

// Indexes of the records that are not the batch's (produce).
const (
	indexCheckpoint = -1
	indexLetter     = -2
)

// ackKey names a record of the batch by its position, and whether it is
// the tombstone after a delete.
func ackKey(pos cdc.Position, tombstone bool) string {
	if tombstone {
		return "t" + string(pos)
	}
	return "v" + string(pos)
}

// letterAckKey names a dead letter's record by its key, the letter's id.
func letterAckKey(id []byte) string { return "l" + string(id) }

// acked is a record the cluster acknowledged, without a transaction.
type acked struct {
	pos       cdc.Position // the batch's, still held when Commit reads it
	tombstone bool
	letter    bool
	key       []byte // a letter's id
}

func (a acked) name() string {
	if a.letter {
		return letterAckKey(a.key)
	}
	return ackKey(a.pos, a.tombstone)
}

// kept is a record of the open transaction, with where it came from.
type kept struct {
	*kgo.Record
	index     int
	pos       cdc.Position
	tombstone bool
}

// New returns a Sink for cfg. It does no I/O; Open connects.
func New(cfg Config) *Sink {
	cfg = cfg.withDefaults()
	return &Sink{cfg: cfg, log: cfg.Logger.With("sink", "kafka")}
}

var _ cdc.Sink = (*Sink)(nil)

// KeepCheckpoints is Checkpoints as a cdc.CheckpointKeeper.
func (s *Sink) KeepCheckpoints() cdc.CheckpointStore { return s.Checkpoints() }

// Checkpoints switches the sink to keep the pipeline's checkpoint
// (checkpoint: sink) and returns the store to give the pipeline: from
// then on the sink writes every batch, with its checkpoint, in one
// transaction. Call it before Open.
func (s *Sink) Checkpoints() *Checkpoints {
	if s.ckpts == nil {
		s.ckpts = &Checkpoints{s: s}
	}
	return s.ckpts
}

func (s *Sink) keepsCheckpoint() bool { return s.ckpts != nil }

// Stats returns the sink's counters. It may be called from any goroutine.
func (s *Sink) Stats() Stats {
	return Stats{Records: s.records.Load(), Transactions: s.txns.Load(), Resolved: s.resolved.Load(), Replayed: s.replayed.Load(), Created: s.created.Load()}
}

func (s *Sink) check() error {
	if err := s.cfg.Validate(); err != nil {
		return fmt.Errorf("kafka sink: %w", err)
	}
	if s.cfg.Pipeline == "" {
		return errors.New("kafka sink: pipeline: required")
	}
	return nil
}

// newProducer makes the sink's client: acks from all in-sync replicas,
// idempotent (so at most five requests in flight per broker, which keeps
// a partition's order across retries), Java's murmur2 partitioning of
// keys, records failing after max_outage; transactional when the sink
// keeps the checkpoint.
func (s *Sink) newProducer() (*kgo.Client, error) {
	opts, err := connOpts(s.cfg)
	if err != nil {
		return nil, fmt.Errorf("kafka sink: %w", err)
	}
	c, err := codec(s.cfg.Compression)
	if err != nil {
		return nil, fmt.Errorf("kafka sink: compression: %w", err)
	}
	opts = append(opts,
		kgo.RequiredAcks(kgo.AllISRAcks()),
		kgo.ProducerBatchCompression(c),
		kgo.RecordPartitioner(kgo.StickyKeyPartitioner(nil)),
		kgo.RecordDeliveryTimeout(s.cfg.MaxOutage),
		kgo.WithHooks(connectHook{s}),
		kgo.ProducerBatchMaxBytesFn(s.batchMax),
	)
	if s.keepsCheckpoint() {
		opts = append(opts, kgo.TransactionalID(TransactionalID(s.cfg.Pipeline)), kgo.TransactionTimeout(transactionTimeout(s.cfg.MaxOutage)))
	}
	cl, err := kgo.NewClient(opts...)
	if err != nil {
		return nil, fmt.Errorf("kafka sink: %w", err)
	}
	return cl, nil
}

// Open connects and waits, for up to max_outage, for the cluster to
// answer.
func (s *Sink) Open(ctx context.Context, _ *cdc.Checkpoint) error {
	if err := s.check(); err != nil {
		return err
	}
	parts, err := parseTopic(s.cfg.Topic)
	if err != nil {
		return fmt.Errorf("kafka sink: topic: %w", err)
	}
	s.topic = parts
	// A topic that depends on more than the namespace is rendered anew
	// for each record.
	s.rendered, s.byOp = map[string]string{}, strings.Contains(s.cfg.Topic, "{op}") || strings.Contains(s.cfg.Topic, "{route}")
	if s.keepsCheckpoint() && s.client == nil {
		return errors.New("kafka sink: the sink keeps the checkpoint, and Open was called before its Checkpoints().Load")
	}
	if s.client == nil {
		cl, err := s.newProducer()
		if err != nil {
			return err
		}
		pctx, cancel := context.WithTimeout(ctx, s.cfg.MaxOutage)
		defer cancel()
		if err := ping(pctx, cl); err != nil {
			cl.Close()
			return fmt.Errorf("kafka sink: brokers %v unreachable for max_outage (%s): %w", s.cfg.Brokers, s.cfg.MaxOutage, err)
		}
		s.client = cl
	}
	if s.topics == nil {
		s.topics = map[string]bool{}
	}
	if s.cfg.Format == "avro" && s.avro == nil {
		if s.cfg.SchemaRegistry == nil {
			return fmt.Errorf("kafka sink: %w", errNoRegistry)
		}
		r, err := newRegistry(s.cfg.SchemaRegistry.URL)
		if err != nil {
			return fmt.Errorf("kafka sink: %w", err)
		}
		s.avro = r
	}
	s.opened = true
	return nil
}

// ping asks for metadata until the cluster answers or ctx is done.
func ping(ctx context.Context, cl *kgo.Client) error {
	for {
		err := cl.Ping(ctx)
		var ke *kerr.Error
		if err == nil || ctx.Err() != nil || errors.As(err, &ke) && !ke.Retriable {
			return err // success, or a refusal (authentication) no wait can fix
		}
		select {
		case <-time.After(200 * time.Millisecond):
		case <-ctx.Done():
			return err
		}
	}
}

// Put produces batch. In a transaction (checkpoint: sink) nothing becomes
// visible to read_committed consumers before Commit; otherwise the
// records go out at once and Commit waits for their acknowledgements.
// A record refused for what it holds (its key or Avro value does not
// encode) is not produced: Commit returns its *RecordError, a
// cdc.ErrRefused.
func (s *Sink) Put(ctx context.Context, batch []cdc.Record) error {
	if !s.opened {
		return errors.New("kafka sink: Put before Open")
	}
	if s.keepsCheckpoint() && !s.inTxn {
		if err := s.begin(); err != nil {
			return err
		}
	}
	// One allocation holds every key and value of the batch: the client
	// keeps them until they are acknowledged, and the runtime reuses
	// batch once Put returns.
	size := 0
	for i := range batch {
		size += len(batch[i].Data) + 64
	}
	arena := make([]byte, 0, size)
	tombstones := (s.cfg.Format == "debezium" || s.cfg.Format == "avro") && *s.cfg.Tombstones
	for i := range batch {
		r := &batch[i]
		if len(r.Data) == 0 {
			continue // an event the format has no record for (Debezium: DDL)
		}
		topic := s.render(r)
		if !s.topics[topic] {
			if err := s.ensureTopic(ctx, topic, nil); err != nil {
				if errors.Is(err, errTopicMissing) || permanent(err) {
					return &RecordError{Index: i, Topic: topic, Pos: r.Pos, Err: err}
				}
				return fmt.Errorf("kafka sink: %w", err)
			}
		}
		var ids schemaIDs
		if s.avro != nil {
			var err error
			if ids, err = s.avro.register(ctx, topic); err != nil {
				return fmt.Errorf("kafka sink: %w", err)
			}
		}
		var key []byte
		if s.cfg.Key == KeyDocumentKey && len(r.DocumentKey) > 0 {
			k := len(arena)
			var err error
			if arena, err = encode.DebeziumKey(arena, r.DocumentKey); err != nil {
				s.refuse(&RecordError{Index: i, Topic: topic, Pos: bytes.Clone(r.Pos), Err: fmt.Errorf("key: %w", err)})
				continue
			}
			key = arena[k:len(arena):len(arena)]
			if s.avro != nil {
				k = len(arena)
				if arena, err = avroKeyOf(arena, ids.key, key); err != nil {
					s.refuse(&RecordError{Index: i, Topic: topic, Pos: bytes.Clone(r.Pos), Err: err})
					continue
				}
				key = arena[k:len(arena):len(arena)]
			}
		}
		v := len(arena)
		if s.avro != nil {
			var err error
			if arena, err = avroValue(arena, ids.value, r.Data); err != nil {
				s.refuse(&RecordError{Index: i, Topic: topic, Key: bytes.Clone(key), Pos: bytes.Clone(r.Pos), Err: err})
				continue
			}
		} else {
			arena = append(arena, r.Data...)
		}
		rec := &kgo.Record{Topic: topic, Key: key, Value: arena[v:len(arena):len(arena)]}
		if *s.cfg.Headers {
			rec.Headers = headers(r)
		}
		if len(s.skip) == 0 || !s.skipped(ackKey(r.Pos, false)) { // the key only when a split batch is put again
			s.produce(ctx, rec, i, r.Pos, false)
		}
		if tombstones && r.Op == cdc.OpDelete && key != nil && (len(s.skip) == 0 || !s.skipped(ackKey(r.Pos, true))) {
			s.produce(ctx, &kgo.Record{Topic: topic, Key: key}, i, r.Pos, true)
		}
	}
	return nil
}

// headers are a record's tide-* headers.
func headers(r *cdc.Record) []kgo.RecordHeader {
	h := []kgo.RecordHeader{
		{Key: "tide-op", Value: []byte(r.Op)},
		{Key: "tide-namespace", Value: []byte(r.Namespace)},
		{Key: "tide-position", Value: bytes.Clone(r.Pos)},
	}
	if r.ClusterTime.T != 0 {
		ct := strconv.FormatUint(uint64(r.ClusterTime.T), 10) + "." + strconv.FormatUint(uint64(r.ClusterTime.I), 10)
		h = append(h, kgo.RecordHeader{Key: "tide-cluster-time", Value: []byte(ct)})
	}
	return h
}

// skipped reports whether the record k (ackKey, letterAckKey) was
// acknowledged already by a Commit the sink refused for another record:
// the runtime puts it again as it splits the batch, until the part that
// holds it commits.
func (s *Sink) skipped(k string) bool {
	if len(s.skip) == 0 {
		return false
	}
	if !s.skip[k] {
		return false
	}
	s.skipping = append(s.skipping, k)
	return true
}

// refuse keeps e, a record refused for what it holds, for Commit to
// return: the first of the batch wins.
func (s *Sink) refuse(e *RecordError) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.refused == nil || e.Index < s.refused.Index {
		s.refused = e
	}
}

// produce hands rec to the client; its result is kept for Commit. In a
// transaction the record is kept too, to be written again if the
// transaction aborts (but for the checkpoint record, written anew).
func (s *Sink) produce(ctx context.Context, rec *kgo.Record, index int, pos cdc.Position, tombstone bool) {
	if s.keepsCheckpoint() && index != indexCheckpoint {
		s.txnRecords = append(s.txnRecords, kept{Record: rec, index: index, pos: pos, tombstone: tombstone})
	}
	s.client.Produce(ctx, rec, func(r *kgo.Record, err error) {
		if err == nil {
			s.records.Add(1)
			s.retries.succeed(s.report)
			if index != indexCheckpoint && !s.keepsCheckpoint() {
				s.mu.Lock()
				s.acked = append(s.acked, acked{pos: pos, tombstone: tombstone, letter: index == indexLetter, key: r.Key})
				s.mu.Unlock()
			}
			return
		}
		re := &RecordError{Index: index, Topic: r.Topic, Key: bytes.Clone(r.Key), Pos: bytes.Clone(pos), Err: err}
		if index >= 0 && permanent(err) && refusedForContent(err) {
			s.refuse(re)
			return
		}
		s.mu.Lock()
		defer s.mu.Unlock()
		if s.produced == nil || index < s.produced.Index {
			s.produced = re
		}
	})
}

// ensureTopic creates topic, with configs (nil: the brokers' defaults),
// or with create_topics off checks that it exists.
func (s *Sink) ensureTopic(ctx context.Context, topic string, configs map[string]*string) error {
	ctx, cancel := context.WithTimeout(ctx, s.cfg.MaxOutage)
	defer cancel()
	if *s.cfg.CreateTopics {
		made, err := createTopic(ctx, s.client, s.cfg.Partitions, s.cfg.ReplicationFactor, configs, topic)
		if err != nil {
			return err
		}
		if made {
			s.created.Add(1)
			s.log.Info("created topic", "topic", topic, "partitions", s.cfg.Partitions, "replication_factor", s.cfg.ReplicationFactor)
		}
	} else {
		md, err := kadm.NewClient(s.client).ListTopics(ctx, topic)
		if err != nil {
			return fmt.Errorf("look up topic %q: %w", topic, err)
		}
		d, ok := md[topic]
		switch {
		case !ok || errors.Is(d.Err, kerr.UnknownTopicOrPartition):
			return fmt.Errorf("topic %q %w", topic, errTopicMissing)
		case d.Err != nil:
			return fmt.Errorf("look up topic %q: %w", topic, d.Err)
		}
	}
	s.learnLimit(ctx, topic)
	s.topics[topic] = true
	return nil
}

// defaultBatchMax is the client's own bound on a record batch, where the
// topic's is not known.
const defaultBatchMax = 1_000_012

// batchMax is the client's bound on a record batch of topic: the most the
// topic takes. A record larger than that fails alone, in the client,
// with MESSAGE_TOO_LARGE, instead of being sent in a batch the broker
// refuses whole: a refused batch fails its other records with it, and
// the partition's later batches, written meanwhile, would then come
// before them when the pipeline puts them again (at least once).
func (s *Sink) batchMax(topic string) int32 {
	if v, ok := s.limits.Load(topic); ok {
		return v.(int32)
	}
	return defaultBatchMax
}

// learnLimit looks up the most a record batch of topic may hold: the
// topic's max.message.bytes where it is set, the brokers'
// message.max.bytes otherwise. Where it cannot be read (no permission to
// describe configs), the broker's refusal stays the only bound.
func (s *Sink) learnLimit(ctx context.Context, topic string) {
	adm := kadm.NewClient(s.client)
	limit := int32(0)
	if rc, err := adm.DescribeTopicConfigs(ctx, topic); err == nil {
		if c, err := rc.On(topic, nil); err == nil {
			for _, kv := range c.Configs {
				if kv.Key == "max.message.bytes" && kv.Value != nil && kv.Source == kmsg.ConfigSourceDynamicTopicConfig {
					limit = parseLimit(*kv.Value)
				}
			}
		}
	}
	if limit == 0 {
		if s.brokerMax == 0 {
			if rc, err := adm.DescribeBrokerConfigs(ctx); err == nil {
				for _, r := range rc {
					for _, kv := range r.Configs {
						if kv.Key == "message.max.bytes" && kv.Value != nil {
							s.brokerMax = parseLimit(*kv.Value)
						}
					}
				}
			}
		}
		limit = s.brokerMax
	}
	if limit == 0 {
		s.log.Debug("the largest record batch of the topic is not known; the broker's refusal is the bound", "topic", topic)
		return
	}
	s.limits.Store(topic, limit)
}

// parseLimit reads a byte limit as the client can take it: 0 if it is not
// a number, clamped to [512, 1 GiB].
func parseLimit(v string) int32 {
	n, err := strconv.ParseInt(v, 10, 64)
	if err != nil {
		return 0
	}
	return int32(min(max(n, 512), 1<<30))
}

// render fills the topic template for r. Characters a topic name cannot
// hold become '_'. Without {op} or {route} a namespace's topic is made
// once.
func (s *Sink) render(r *cdc.Record) string {
	if !s.byOp {
		if t, ok := s.rendered[r.Namespace]; ok {
			return t
		}
	}
	t := s.renderNew(r)
	if !s.byOp && len(s.rendered) < 10000 {
		s.rendered[r.Namespace] = t
	}
	return t
}

func (s *Sink) renderNew(r *cdc.Record) string {
	var b strings.Builder
	db, coll, _ := strings.Cut(r.Namespace, ".")
	for _, p := range s.topic {
		switch p.Field {
		case "":
			b.WriteString(p.Lit)
		case "pipeline":
			writeTopic(&b, s.cfg.Pipeline)
		case "db":
			writeTopic(&b, db)
		case "coll":
			writeTopic(&b, coll)
		case "namespace":
			writeTopic(&b, r.Namespace)
		case "op":
			writeTopic(&b, string(r.Op))
		case "route": // a route transform's
			writeTopic(&b, r.Route)
		}
	}
	t := b.String()
	if len(t) > 249 {
		t = t[:249]
	}
	return t
}

func writeTopic(b *strings.Builder, s string) {
	if s == "" {
		b.WriteByte('_')
		return
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '.' || c == '_' || c == '-' {
			b.WriteByte(c)
		} else {
			b.WriteByte('_')
		}
	}
}

func (s *Sink) begin() error {
	if err := s.client.BeginTransaction(); err != nil {
		return fmt.Errorf("kafka sink: begin transaction: %w", err)
	}
	s.inTxn = true
	return nil
}

// Commit waits until the cluster has acknowledged every record put since
// the last Commit. When the sink keeps the checkpoint, it adds the
// checkpoint record to the transaction and commits it. The dead letters
// put since (PutDeadLetters) go with the batch. A Commit that fails drops
// the batch: the pipeline stops, and the batch is read again after a
// restart; but one refused for a record (a *RecordError that is a
// cdc.ErrRefused) leaves the sink ready for the parts of the batch the
// pipeline puts again, its transaction aborted.
func (s *Sink) Commit(ctx context.Context, next cdc.Checkpoint) error {
	if !s.opened {
		return errors.New("kafka sink: Commit before Open")
	}
	if !s.keepsCheckpoint() {
		if err := s.produceLetters(ctx); err != nil {
			return err
		}
		err := s.flush(ctx)
		skipping := s.skipping
		s.skipping = nil
		if err == nil {
			for _, k := range skipping {
				delete(s.skip, k)
			}
		}
		s.mu.Lock()
		if errors.Is(err, cdc.ErrRefused) {
			// The records acknowledged are in their topics: the
			// runtime puts them again as it splits the batch to find
			// the refused one, and they are not written twice.
			if s.skip == nil {
				s.skip = map[string]bool{}
			}
			for _, a := range s.acked {
				s.skip[a.name()] = true
			}
		}
		clear(s.acked) // the batch's memory, for the collector
		s.acked = s.acked[:0]
		s.mu.Unlock()
		return err
	}
	value, err := sinkcheckpoint.Marshal(next)
	if err != nil {
		return fmt.Errorf("kafka sink: %w", err)
	}
	if !s.inTxn {
		if err := s.begin(); err != nil {
			return err
		}
	}
	if err := s.produceLetters(ctx); err != nil {
		s.abort(ctx)
		return err
	}
	s.produce(ctx, &kgo.Record{Topic: s.cfg.CheckpointTopic, Key: []byte(s.cfg.Pipeline), Value: value}, indexCheckpoint, next.Source, false)
	since := time.Now()
	pause := retry.Backoff{Policy: cdc.RetryPolicy{Max: 2 * time.Second}} // between writes of an aborted batch; max_outage bounds them
	for {
		err := s.finish(ctx)
		var aborted *abortedError
		switch {
		case err == nil:
		case errors.As(err, &aborted):
			// Nothing of the transaction is visible; its records are
			// kept, to be written again below.
		case s.inTxn:
			s.abort(ctx)
			return err
		case fenced(err):
			return fmt.Errorf("%w: commit: %v", ErrFenced, err)
		default:
			committed, rerr := s.resolve(ctx, value, err)
			if rerr != nil {
				return rerr
			}
			if committed {
				err = nil
			}
		}
		if err == nil {
			break
		}
		if time.Since(since) >= s.cfg.MaxOutage {
			s.dropTxnRecords()
			return fmt.Errorf("kafka sink: batch not committed for max_outage (%s); its last transaction aborted: %w", s.cfg.MaxOutage, err)
		}
		// The transaction aborted (the coordinator lost it, ended it when
		// the id was taken over to read the checkpoint, or a broker
		// refused its sequence): the batch is written again, whole, in a
		// new one.
		s.replayed.Add(1)
		s.log.Warn("transaction aborted; writing the batch again", "records", len(s.txnRecords), "err", err)
		if err := pause.Fail(ctx, err); err != nil {
			s.dropTxnRecords()
			return fmt.Errorf("kafka sink: %w", err)
		}
		if err := s.rewrite(ctx, value); err != nil {
			s.dropTxnRecords()
			return err
		}
	}
	s.noteEpoch(ctx)
	s.dropTxnRecords()
	s.txns.Add(1)
	s.ckpts.ledger.Committed(value)
	return nil
}

// rewrite writes the records of an aborted transaction, and the
// checkpoint record value, in a new transaction.
func (s *Sink) rewrite(ctx context.Context, value []byte) error {
	if err := s.begin(); err != nil {
		return err
	}
	recs := s.txnRecords
	s.txnRecords = nil
	for _, r := range recs {
		s.produce(ctx, &kgo.Record{Topic: r.Topic, Key: r.Key, Value: r.Value, Headers: r.Headers}, r.index, r.pos, r.tombstone)
	}
	s.produce(ctx, &kgo.Record{Topic: s.cfg.CheckpointTopic, Key: []byte(s.cfg.Pipeline), Value: value}, indexCheckpoint, nil, false)
	return nil
}

// An abortedError is a transaction that failed before its commit was
// asked for, for a reason that writing it again in a new transaction
// can clear (a broker that lost the producer's sequence, or asked for
// the abort). It is aborted; its records are kept.
type abortedError struct{ err error }

func (e *abortedError) Error() string { return e.err.Error() }
func (e *abortedError) Unwrap() error { return e.err }

// finish waits for the open transaction's records and commits it. A
// failure before the commit leaves the transaction open (s.inTxn), but for
// an *abortedError; a failure of the commit itself is of unknown outcome.
func (s *Sink) finish(ctx context.Context) error {
	if err := s.flush(ctx); err != nil {
		if !abortable(err) {
			return err
		}
		s.abortTxn(ctx) // the records are kept
		return &abortedError{err}
	}
	s.inTxn = false
	return s.client.EndTransaction(ctx, kgo.TryCommit)
}

// dropTxnRecords forgets the records of a transaction that will not be
// written again.
func (s *Sink) dropTxnRecords() {
	clear(s.txnRecords) // the records' memory, for the collector
	s.txnRecords = s.txnRecords[:0]
}

// flush waits for the acknowledgements of what was produced, and returns
// the first refused record's error.
func (s *Sink) flush(ctx context.Context) error {
	// The client retries on its own; an outage is a max_outage without
	// a single acknowledgement.
	for {
		before := s.records.Load()
		fctx, cancel := context.WithTimeout(ctx, s.cfg.MaxOutage)
		err := s.client.Flush(fctx)
		cancel()
		if err == nil {
			break
		}
		if ctx.Err() != nil {
			return fmt.Errorf("kafka sink: flush: %w", ctx.Err())
		}
		if s.records.Load() == before {
			return fmt.Errorf("kafka sink: brokers %v acknowledged nothing for max_outage (%s): %w", s.cfg.Brokers, s.cfg.MaxOutage, err)
		}
	}
	s.mu.Lock()
	re, refused := s.produced, s.refused
	s.produced, s.refused = nil, nil
	s.mu.Unlock()
	switch {
	case re != nil && fenced(re.Err):
		return fmt.Errorf("%w: %v", ErrFenced, re.Err)
	case refused != nil:
		// A record refused for what it holds comes first: the others
		// that failed may have failed with it (in its produce request,
		// or its transaction).
		return refused
	case re == nil:
		return nil
	case re.Index == indexCheckpoint:
		return fmt.Errorf("kafka sink: write checkpoint to topic %s: %w", s.cfg.CheckpointTopic, explain(re.Err, s.cfg.MaxOutage.String()))
	case re.Index == indexLetter:
		return fmt.Errorf("kafka sink: write dead letter to topic %s: %w", re.Topic, explain(re.Err, s.cfg.MaxOutage.String()))
	case permanent(re.Err):
		return re
	}
	return fmt.Errorf("kafka sink: record at %s (topic %q): %w", re.Pos, re.Topic, explain(re.Err, s.cfg.MaxOutage.String()))
}

// abort ends the open transaction and forgets its records.
func (s *Sink) abort(ctx context.Context) {
	if !s.inTxn {
		return
	}
	s.dropTxnRecords()
	clear(s.letters)
	s.letters = s.letters[:0]
	s.abortTxn(ctx)
}

// abortTxn ends the open transaction in the client, keeping the sink's
// copy of its records.
func (s *Sink) abortTxn(ctx context.Context) {
	s.inTxn = false
	ctx = context.WithoutCancel(ctx)
	if err := s.client.AbortBufferedRecords(ctx); err != nil {
		s.log.Warn("abort buffered records", "err", err)
	}
	if err := s.client.EndTransaction(ctx, kgo.TryAbort); err != nil {
		s.log.Warn("abort transaction", "err", err)
	}
	// The records aborted report their failure: none is the next
	// batch's.
	s.mu.Lock()
	s.produced, s.refused = nil, nil
	s.mu.Unlock()
}

// resolve settles a commit whose outcome is unknown: a new producer of
// the transactional id makes the coordinator finish the transaction
// (committing it if the commit was recorded), then the checkpoint is
// read back. If it is the one the transaction wrote, the batch is
// committed, and it is not written again; otherwise the transaction
// aborted, and nothing of it is visible.
func (s *Sink) resolve(ctx context.Context, value []byte, cause error) (committed bool, err error) {
	s.log.Warn("commit outcome unknown; reading the checkpoint back", "err", cause)
	owned, committed, err := s.owner(ctx, value)
	switch {
	case err != nil:
		return false, fmt.Errorf("kafka sink: commit outcome unknown (%v), and %w", cause, err)
	case !owned:
		return false, fmt.Errorf("%w: commit: %v", ErrFenced, cause)
	}
	// Nobody else took the id over: taking it over again ends the
	// transaction, or starts the client afresh after a commit that did.
	s.client.Close()
	s.client = nil
	cl, err := s.newProducer()
	if err != nil {
		return false, err
	}
	s.client = cl
	if err := s.takeOver(ctx); err != nil {
		return false, fmt.Errorf("kafka sink: commit outcome unknown (%v), and %w", cause, err)
	}
	if !committed {
		got, err := readCheckpoint(ctx, s.cfg, s.cfg.Pipeline)
		if err != nil {
			return false, fmt.Errorf("kafka sink: commit outcome unknown (%v), and %w", cause, err)
		}
		committed = bytes.Equal(got, value)
	}
	if committed {
		s.resolved.Add(1)
		s.log.Info("commit of unknown outcome had succeeded", "checkpoint", string(value))
		return true, nil
	}
	return false, nil
}

// Close drops what was put and not committed, and disconnects.
func (s *Sink) Close() error {
	s.opened = false
	if s.client == nil {
		return nil
	}
	if s.inTxn {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		s.abort(ctx)
		cancel()
	}
	s.client.Close()
	s.client = nil
	return nil
}
