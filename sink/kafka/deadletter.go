package kafka

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/tide-cdc/tide/cdc"
	"github.com/tide-cdc/tide/deadletter"
)

var _ cdc.DeadLetterSink = (*Sink)(nil)

// DeadLetterTopic is the topic of pipeline's dead letters: with
// checkpoint: sink they are written in the transaction of the batch they
// came from, so that exactly-once holds for them too.
func DeadLetterTopic(pipeline string) string {
	var b strings.Builder
	writeTopic(&b, pipeline)
	t := b.String()
	if len(t) > 249-len(".dlq") {
		t = t[:249-len(".dlq")]
	}
	return t + ".dlq"
}

// letterMaxBytes is the largest dead-letter record the sink writes, under
// the client's default batch limit (1,000,012 bytes); a letter larger
// keeps its change's document key, not its documents (letterRecord).
const letterMaxBytes = 900_000

// deadLetterTopicMaxBytes is the max.message.bytes the sink gives the
// dead-letter topic it creates, Kafka's default: a record refused as too
// large by a topic with a lower limit still fits in its letter.
const deadLetterTopicMaxBytes = "1048588"

// letterRecord makes the record of d in topic.
func letterRecord(pipeline, topic string, d cdc.DeadLetter) (*kgo.Record, error) {
	ev := &d.Event
	// The letter is the dead-letter file store's JSON, so both read alike.
	l, err := deadletter.New(pipeline, d)
	if err != nil {
		return nil, fmt.Errorf("dead letter at %s: %w", ev.Pos, err)
	}
	value, err := json.Marshal(l)
	if err != nil {
		return nil, fmt.Errorf("dead letter at %s: %w", ev.Pos, err)
	}
	if len(value) > letterMaxBytes {
		// A change too large for any record (the reason it was refused,
		// often): the letter says where it is and why it failed.
		c := &l.Change
		c.FullDocument, c.PreImage, c.UpdateDesc, c.Extra, c.Payload, c.Headers = nil, nil, nil, nil, nil, nil
		l.Dropped = fmt.Sprintf("the change's documents (%d bytes as JSON) are larger than a dead-letter record may be; read the change again from the source at its position", len(value))
		if value, err = json.Marshal(l); err != nil {
			return nil, fmt.Errorf("dead letter at %s: %w", ev.Pos, err)
		}
	}
	return &kgo.Record{Topic: topic, Key: []byte(l.ID), Value: value, Headers: []kgo.RecordHeader{
		{Key: "tide-stage", Value: []byte(d.Stage)},
		{Key: "tide-namespace", Value: []byte(ev.Namespace)},
	}}, nil
}

// PutDeadLetters stages the pipeline's dead letters (changes that failed
// to decode, transform or encode, or that the sink refused) for the
// batch's Commit, which produces them to the dead-letter topic
// (DeadLetterTopic): in the batch's transaction with checkpoint: sink,
// and acknowledged before Commit returns otherwise.
func (s *Sink) PutDeadLetters(ctx context.Context, letters []cdc.DeadLetter) error {
	if !s.opened {
		return errors.New("kafka sink: PutDeadLetters before Open")
	}
	topic := DeadLetterTopic(s.cfg.Pipeline)
	for _, d := range letters {
		rec, err := letterRecord(s.cfg.Pipeline, topic, d)
		if err != nil {
			return fmt.Errorf("kafka sink: %w", err)
		}
		s.letters = append(s.letters, rec)
	}
	return nil
}

// produceLetters produces the staged letters, creating the dead-letter
// topic first if it is missing.
func (s *Sink) produceLetters(ctx context.Context) error {
	if len(s.letters) == 0 {
		return nil
	}
	topic := DeadLetterTopic(s.cfg.Pipeline)
	if !s.topics[topic] {
		// Created, as other topics, but with Kafka's default
		// max.message.bytes whatever the brokers' default.
		maxBytes := deadLetterTopicMaxBytes
		if err := s.ensureTopic(ctx, topic, map[string]*string{"max.message.bytes": &maxBytes}); err != nil {
			return fmt.Errorf("kafka sink: dead-letter topic: %w", err)
		}
	}
	for _, r := range s.letters {
		if !s.skipped(letterAckKey(r.Key)) { // written by a refused Commit
			s.produce(ctx, r, indexLetter, nil, false)
		}
	}
	clear(s.letters)
	s.letters = s.letters[:0]
	return nil
}

// KeepDeadLetters is what on_error: dead_letter in a pipeline file
// switches on: the sink keeps them itself, in DeadLetterTopic.
func (c *Config) KeepDeadLetters() {}

// Is makes a record refused for what it holds (too large, invalid, a key
// or Avro value that does not encode) a cdc.ErrRefused, which the
// runtime answers, with on_error skip or dead_letter, by splitting the
// batch to set the refused record aside. A refusal that is not the
// record's (its topic not authorized, or missing with create_topics off)
// is not: every record of the topic would be set aside.
func (e *RecordError) Is(target error) bool {
	return target == cdc.ErrRefused && refusedForContent(e.Err)
}

// refusedForContent reports whether err refuses a record for what it
// holds.
func refusedForContent(err error) bool {
	var ke *kerr.Error
	if !errors.As(err, &ke) {
		return !isNetwork(err) && !errors.Is(err, errTopicMissing) && !errors.Is(err, context.Canceled) &&
			!errors.Is(err, context.DeadlineExceeded) && !errors.Is(err, kgo.ErrRecordTimeout) && !errors.Is(err, kgo.ErrRecordRetries) &&
			!errors.Is(err, kgo.ErrAborting) && !errors.Is(err, kgo.ErrClientClosed)
	}
	for _, p := range []error{kerr.MessageTooLarge, kerr.RecordListTooLarge, kerr.InvalidRecord, kerr.CorruptMessage} {
		if errors.Is(err, p) {
			return true
		}
	}
	return false
}

// ReadDeadLetters returns the dead letters of pipeline in its dead-letter
// topic, in the order they were written, each once (a letter written
// again, at-least-once after a crash, keeps its first copy), with
// read_committed: `tide dead-letters list` and `replay` read them through
// this ability of the Config.
func (c *Config) ReadDeadLetters(ctx context.Context, pipeline string) ([]cdc.DeadLetter, error) {
	cfg := *c
	cfg.Pipeline = pipeline
	cfg = cfg.withDefaults()
	topic := DeadLetterTopic(pipeline)
	recs, err := readTopic(ctx, cfg, topic)
	if err != nil {
		return nil, err
	}
	seen := map[string]bool{}
	var out []cdc.DeadLetter
	for _, r := range recs {
		if seen[string(r.Key)] {
			continue
		}
		seen[string(r.Key)] = true
		var l deadletter.Letter
		if err := json.Unmarshal(r.Value, &l); err != nil {
			return nil, fmt.Errorf("kafka sink: dead letter in topic %s at partition %d offset %d: %w", topic, r.Partition, r.Offset, err)
		}
		if l.Pipeline != pipeline {
			continue
		}
		d, err := l.DeadLetter()
		if err != nil {
			return nil, fmt.Errorf("kafka sink: dead letter in topic %s at partition %d offset %d: %w", topic, r.Partition, r.Offset, err)
		}
		out = append(out, d)
	}
	return out, nil
}

// readTopic returns the records of topic that a read_committed consumer
// sees, partition after partition, up to the last stable offsets as
// they were when the read began; none if the topic does not exist.
func readTopic(ctx context.Context, c Config, topic string) ([]*kgo.Record, error) {
	var out []*kgo.Record
	if err := eachCommitted(ctx, c, topic, func(r *kgo.Record) { out = append(out, r) }); err != nil {
		return nil, err
	}
	// Oldest first across partitions: by the time the client gave each
	// record when it produced it.
	slices.SortStableFunc(out, func(a, b *kgo.Record) int { return a.Timestamp.Compare(b.Timestamp) })
	return out, nil
}
