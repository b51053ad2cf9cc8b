// Package generate is a source of synthetic insert events, for benchmarks,
// demos and tests.
//
// Event seq (from 1) is an insert into gen.events whose full document is
// {_id: seq, seq: seq, payload: "xxx…"} with payload_bytes characters, and
// whose position is {"seq": seq}. A restart resumes after the last
// committed seq, so the output of a generate pipeline is the same however
// often it is interrupted.
//
// With collections: N (N > 1), event seq goes to gen.events_K instead,
// K = (seq-1) mod N: round robin over N namespaces, to exercise sinks that
// route by namespace.
//
// Without a rate, events are always ready. With one, the source hands out
// at most rate events per second on average, counted from Open, and wakes
// the runtime through Ready with a timer when the next event is due: an
// idle generator sleeps instead of spinning.
package generate

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"strconv"
	"strings"
	"sync"
	"time"

	"go.mongodb.org/mongo-driver/v2/x/bsonx/bsoncore"

	"github.com/tide-cdc/tide/cdc"
)

// Namespace is the namespace of every generated event.
const Namespace = "gen.events"

// Config configures a generator. The zero value generates events with an
// empty payload, forever, as fast as possible; the pipeline file's default
// payload of 100 bytes is applied by the config package.
//
// Its yaml tags are the source.generate section of a pipeline file.
type Config struct {
	Count        int64        `yaml:"count"`         // events to generate; 0 means forever
	Rate         float64      `yaml:"rate"`          // events per second; 0 means as fast as possible
	PayloadBytes int          `yaml:"payload_bytes"` // length of each document's payload string
	Collections  int          `yaml:"collections"`   // namespaces to spread the events over, round robin; 0 or 1: gen.events only
	Logger       *slog.Logger `yaml:"-"`
}

// DefaultPayloadBytes is the payload's length in DefaultConfig.
const DefaultPayloadBytes = 100

// DefaultConfig returns the defaults of a pipeline file's
// source.generate section: endless inserts of 100-byte payloads into
// gen.events, as fast as the pipeline takes them.
func DefaultConfig() Config { return Config{PayloadBytes: DefaultPayloadBytes} }

// Describe tells the sink's configuration what the records are: inserts
// of whole documents, into a collection named events.
func (c Config) Describe() cdc.SourceInfo {
	return cdc.SourceInfo{Section: "source.generate", Table: "events", Documents: true, FullUpdates: true}
}

// MaxCollections bounds Config.Collections.
const MaxCollections = 1 << 20

// MaxPayloadBytes keeps a generated document under MongoDB's 16MiB limit.
const MaxPayloadBytes = 16<<20 - 64

// Validate reports every problem of c, joined, or nil. Each error starts
// with the YAML key it is about; package config prefixes the section's
// path and line.
func (c Config) Validate() error {
	var errs []error
	if c.Count < 0 {
		errs = append(errs, fmt.Errorf("count: must not be negative (0 means forever), got %d", c.Count))
	}
	if c.Rate < 0 || math.IsNaN(c.Rate) || math.IsInf(c.Rate, 0) {
		errs = append(errs, fmt.Errorf("rate: must be a non-negative number of events per second (0 means as fast as possible), got %v", c.Rate))
	}
	if c.PayloadBytes < 0 || c.PayloadBytes > MaxPayloadBytes {
		errs = append(errs, fmt.Errorf("payload_bytes: must be between 0 and %d, got %d", MaxPayloadBytes, c.PayloadBytes))
	}
	if c.Collections < 0 || c.Collections > MaxCollections {
		errs = append(errs, fmt.Errorf("collections: must be between 0 and %d, got %d", MaxCollections, c.Collections))
	}
	return errors.Join(errs...)
}

// namespaces returns the namespaces c's events go to, in round-robin
// order.
func (c Config) namespaces() []string {
	if c.Collections <= 1 {
		return []string{Namespace}
	}
	nss := make([]string, c.Collections)
	for k := range nss {
		nss[k] = Namespace + "_" + strconv.Itoa(k)
	}
	return nss
}

// Source generates events. Poll is called from one goroutine, as
// cdc.Source requires.
type Source struct {
	cfg        Config
	log        *slog.Logger
	payload    string
	namespaces []string

	next  int64     // seq of the next event
	first int64     // seq of the first event of this run
	start time.Time // when Open ran, for the rate

	ready  chan struct{}
	timer  *time.Timer // wakes Ready when the next event is due; nil without a rate
	mu     sync.Mutex  // guards closed against the timer's callback
	closed bool
}

// New returns a source generating events as cfg says. It does no work
// until Open.
func New(cfg Config) *Source {
	log := cfg.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &Source{cfg: cfg, log: log}
}

// position is the JSON form of a generator's position.
type position struct {
	Seq *int64 `json:"seq"`
}

// Open starts after restored's position, or at seq 1.
func (s *Source) Open(_ context.Context, restored *cdc.Checkpoint) error {
	switch {
	case s.cfg.Count < 0:
		return fmt.Errorf("generate: count %d is negative", s.cfg.Count)
	case s.cfg.Rate < 0 || math.IsNaN(s.cfg.Rate) || math.IsInf(s.cfg.Rate, 0):
		return fmt.Errorf("generate: rate %v is not a non-negative number", s.cfg.Rate)
	case s.cfg.PayloadBytes < 0:
		return fmt.Errorf("generate: payload_bytes %d is negative", s.cfg.PayloadBytes)
	case s.cfg.Collections < 0 || s.cfg.Collections > MaxCollections:
		return fmt.Errorf("generate: collections %d is not between 0 and %d", s.cfg.Collections, MaxCollections)
	}
	s.namespaces = s.cfg.namespaces()
	last, err := restoredSeq(restored)
	if err != nil {
		return err
	}
	if s.cfg.Count > 0 && last > s.cfg.Count {
		return fmt.Errorf("generate: checkpoint position seq %d is beyond count %d: "+
			"the checkpoint is from a different generator; reset it to start over", last, s.cfg.Count)
	}
	s.payload = strings.Repeat("x", s.cfg.PayloadBytes)
	s.next, s.first = last+1, last+1
	s.start = time.Now()
	s.ready = make(chan struct{}, 1)
	if s.cfg.Rate == 0 {
		close(s.ready) // always ready
	} else {
		s.ready <- struct{}{} // the first event is due now
		s.timer = time.AfterFunc(time.Hour, s.wake)
		s.timer.Stop()
	}
	if last > 0 {
		s.log.Info("resuming generator", "after_seq", last)
	}
	return nil
}

// restoredSeq returns the last delivered seq from restored, 0 for none.
func restoredSeq(restored *cdc.Checkpoint) (int64, error) {
	if restored == nil || len(restored.Source) == 0 {
		return 0, nil
	}
	var p position
	dec := json.NewDecoder(bytes.NewReader(restored.Source))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&p); err != nil || p.Seq == nil || *p.Seq < 0 {
		return 0, fmt.Errorf(`generate: checkpoint position %.100q is not {"seq": N}: it was not written by a generate source`, restored.Source)
	}
	return *p.Seq, nil
}

// wake runs on the timer's goroutine.
func (s *Source) wake() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return
	}
	select {
	case s.ready <- struct{}{}:
	default: // a wake-up is already pending
	}
}

// Ready receives a value when events may be due. Without a rate it is
// always ready.
func (s *Source) Ready() <-chan struct{} { return s.ready }

// Poll appends up to max events that are due.
func (s *Source) Poll(ctx context.Context, buf []cdc.Event, max int) ([]cdc.Event, error) {
	if err := ctx.Err(); err != nil {
		return buf, err
	}
	if s.ready == nil {
		return buf, errors.New("generate: Poll before Open")
	}
	if s.cfg.Count > 0 && s.next > s.cfg.Count {
		return buf, cdc.ErrEnd
	}
	end := s.next + int64(max) // exclusive
	if s.cfg.Count > 0 {
		end = min(end, s.cfg.Count+1)
	}
	now := time.Now()
	if s.cfg.Rate > 0 {
		end = min(end, s.first+s.lastDue(now.Sub(s.start))+1)
	}
	if n := end - s.next; n > 0 {
		buf = s.appendEvents(buf, int(n), now)
	}
	if s.cfg.Count > 0 && s.next > s.cfg.Count {
		return buf, cdc.ErrEnd
	}
	if s.timer != nil {
		// Arm the timer for the next event not handed out. If it is due
		// already (max cut the batch), the timer fires at once.
		wait := s.start.Add(s.offset(s.next - s.first)).Sub(now)
		if wait < 0 {
			wait = 0
		}
		s.mu.Lock()
		if !s.closed { // a closed source's timer stays stopped
			s.timer.Reset(wait)
		}
		s.mu.Unlock()
	}
	return buf, nil
}

// offset returns when the k-th event of this run (from 0) is due, after
// Open. It alone defines the schedule, so that the timer never wakes the
// runtime for an event that lastDue does not count as due.
func (s *Source) offset(k int64) time.Duration {
	return time.Duration(math.Ceil(float64(k) * float64(time.Second) / s.cfg.Rate))
}

// lastDue returns the largest k whose offset has passed after elapsed.
func (s *Source) lastDue(elapsed time.Duration) int64 {
	est := elapsed.Seconds() * s.cfg.Rate
	if est > 1e15 { // so fast that everything is due
		return math.MaxInt64 / 2
	}
	k := int64(est)
	for s.offset(k+1) <= elapsed { // correct the estimate's rounding
		k++
	}
	for k > 0 && s.offset(k) > elapsed {
		k--
	}
	return k
}

// appendEvents appends events s.next to s.next+n-1. One allocation holds
// the bytes of all of them; each event gets its own capacity-limited
// slices, so no event's memory is shared with a writable neighbour.
func (s *Source) appendEvents(buf []cdc.Event, n int, now time.Time) []cdc.Event {
	const keySize = 4 + 1 + 4 + 8 + 1                             // {_id: int64}
	const posMax = len(`{"seq":}`) + 20                           // digits of an int64
	docSize := 4 + 2*(1+4+8) + 1 + 8 + 4 + len(s.payload) + 1 + 1 // {_id, seq, payload}
	slab := make([]byte, 0, n*(keySize+docSize+posMax))
	wallMS := now.UnixMilli()
	secs := uint32(now.Unix())
	buf = append(buf, make([]cdc.Event, n)...)
	evs := buf[len(buf)-n:]
	for i := range evs {
		seq := s.next
		s.next++

		at := len(slab)
		slab = bsoncore.AppendInt32(slab, keySize)
		slab = bsoncore.AppendInt64Element(slab, "_id", seq)
		slab = append(slab, 0)
		key := slab[at:len(slab):len(slab)]

		at = len(slab)
		idx, slab2 := bsoncore.AppendDocumentStart(slab)
		slab2 = bsoncore.AppendInt64Element(slab2, "_id", seq)
		slab2 = bsoncore.AppendInt64Element(slab2, "seq", seq)
		slab2 = bsoncore.AppendStringElement(slab2, "payload", s.payload)
		slab, _ = bsoncore.AppendDocumentEnd(slab2, idx) // cannot fail: idx is ours
		doc := slab[at:len(slab):len(slab)]

		at = len(slab)
		slab = append(slab, `{"seq":`...)
		slab = strconv.AppendInt(slab, seq, 10)
		slab = append(slab, '}')
		pos := slab[at:len(slab):len(slab)]

		ns := s.namespaces[(seq-1)%int64(len(s.namespaces))]
		evs[i] = cdc.Event{
			Pos:          cdc.Position(pos),
			Op:           cdc.OpInsert,
			Namespace:    ns,
			ClusterTime:  cdc.Timestamp{T: secs, I: uint32(seq)},
			WallTimeMS:   wallMS,
			DocumentKey:  key,
			FullDocument: doc,
			Size:         len(key) + len(doc) + len(pos) + len(ns) + 64,
		}
	}
	return buf
}

// Close stops the rate timer.
func (s *Source) Close() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.closed = true
	if s.timer != nil {
		s.timer.Stop()
	}
	return nil
}
