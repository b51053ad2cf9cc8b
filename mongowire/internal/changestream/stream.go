package changestream

import (
	"bytes"
	"context"
	"fmt"
	"sort"
	"sync"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/x/bsonx/bsoncore"

	"github.com/tide-cdc/tide/mongowire/internal/mongoerr"
	"github.com/tide-cdc/tide/mongowire/internal/mql"
	"github.com/tide-cdc/tide/mongowire/internal/store"
)

// Source is what a stream reads: the store's oplog. *store.Store
// satisfies it.
type Source interface {
	Oplog() *store.Oplog
}

// readChunk bounds the oplog entries one read takes, so that a stream far
// behind catches up in steps rather than copying the whole oplog at once.
const readChunk = 1024

// Stream is the source of one change-stream cursor: it reads the oplog
// after its position, turns entries into events, runs the stages that
// follow $changeStream on them, and hands them out in batches with a
// postBatchResumeToken. It starts no goroutines; a waiting Next blocks on
// the oplog's change channel, so a write wakes it at once.
type Stream struct {
	spec   *Spec
	oplog  *store.Oplog
	lookup Lookup
	// maxEvent is the largest event a reply may carry; tests lower it.
	maxEvent int

	mu       sync.Mutex     // guards the fields below; one Next at a time
	after    bson.Timestamp // every oplog entry up to here has been read
	pbrt     Token          // the postBatchResumeToken, never decreasing
	pbrtKey  []byte         // pbrt's KeyString
	pbrtDoc  bson.Raw       // pbrt as sent
	pending  []Event        // events ready to hand out, in order
	resume   *Token         // an event token to find before delivering anything
	skipFrag int            // when resuming from a fragment: fragments ≤ this are skipped
	done     bool           // invalidated: nothing more, ever
	closed   bool
	// failed holds an error met while reading ahead; it is returned once
	// the events before it have been handed out.
	failed error
}

// Open positions a new stream at the start point of spec (mongo-reference.md
// §3.2): after the newest write, at startAtOperationTime, or at a resume
// token. A start point older than the retained oplog fails with 286
// ChangeStreamHistoryLost.
func Open(spec *Spec, src Source, lookup Lookup) (*Stream, error) {
	s := &Stream{spec: spec, oplog: src.Oplog(), lookup: lookup, maxEvent: maxEventBytes, skipFrag: -1}
	var err error
	tok := spec.resumeToken()
	switch {
	case tok != nil:
		s.after = tickBefore(tok.ClusterTime)
		s.pbrt = *tok
		if tok.Type == EventToken {
			t := *tok
			s.resume = &t
			if t.Split {
				s.skipFrag = t.FragmentNum
			}
		}
	case spec.StartAtOperationTime != nil:
		s.after = tickBefore(*spec.StartAtOperationTime)
		s.pbrt = HWMToken(*spec.StartAtOperationTime)
	default:
		// Start after the newest write in the oplog: it is not returned
		// (the server's lastApplied + 1 tick). Not after the cluster
		// clock: a write in progress has taken its time from the clock
		// but is not in the oplog yet, and starting after the clock
		// would skip it, though it is acknowledged after the stream
		// opened.
		s.after = s.oplog.Newest()
		s.pbrt = HWMToken(tickAfter(s.after))
	}
	if tok != nil || spec.StartAtOperationTime != nil {
		if _, _, lost := s.oplog.ReadAfter(s.after, 1, 0); lost {
			return nil, historyLost()
		}
	}
	if s.pbrtKey, s.pbrtDoc, err = s.pbrt.encode(); err != nil {
		return nil, err
	}
	return s, nil
}

func historyLost() error {
	e := mongoerr.New(mongoerr.ChangeStreamHistoryLost,
		"Resume of change stream was not possible, as the resume point may no longer be in the oplog.")
	e.Labels = []string{labelNonResumable}
	return e
}

func fatal(format string, args ...any) *mongoerr.Error {
	e := mongoerr.New(mongoerr.ChangeStreamFatalError, format, args...)
	e.Labels = []string{labelNonResumable}
	return e
}

func tickBefore(ts bson.Timestamp) bson.Timestamp {
	switch {
	case ts.I > 0:
		return bson.Timestamp{T: ts.T, I: ts.I - 1}
	case ts.T > 0:
		return bson.Timestamp{T: ts.T - 1, I: ^uint32(0)}
	}
	return ts
}

func tickAfter(ts bson.Timestamp) bson.Timestamp {
	if ts.I == ^uint32(0) {
		return bson.Timestamp{T: ts.T + 1}
	}
	return bson.Timestamp{T: ts.T, I: ts.I + 1}
}

// Next returns up to n events within maxBytes (at least one event if any is
// ready, however large), waiting up to maxWait for the first one. It
// implements the server's cursor source: extra holds the
// postBatchResumeToken, and exhausted reports an invalidated stream.
func (s *Stream) Next(ctx context.Context, n, maxBytes int, maxWait time.Duration) (docs []bson.Raw, extra bson.D, exhausted bool, err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return nil, nil, true, fmt.Errorf("change stream is closed")
	}
	var timer *time.Timer
	defer func() {
		if timer != nil {
			timer.Stop()
		}
	}()
	size := 0
	for {
		if s.failed != nil && len(s.pending) == 0 {
			if len(docs) > 0 {
				return docs, s.extra(), false, nil
			}
			return nil, nil, false, s.failed
		}
		// Hand out what is ready.
		for len(s.pending) > 0 && !s.done {
			ev := s.pending[0]
			if ev.Doc != nil {
				if len(docs) >= n || len(docs) > 0 && size+len(ev.Doc) > maxBytes {
					return docs, s.extra(), false, nil
				}
				docs = append(docs, ev.Doc)
				size += len(ev.Doc)
			}
			s.pending = s.pending[1:]
			s.setPBRT(ev)
			if ev.Invalidate {
				s.done = true
			}
		}
		if s.done {
			return docs, s.extra(), true, nil
		}
		if len(docs) >= n {
			return docs, s.extra(), false, nil
		}
		// Read on. The change channel is taken before the read, so that a
		// write landing after the read still wakes the wait below.
		changed := s.oplog.Changed()
		// Read at most about a batch worth of entries, so that the events
		// held in pending stay bounded however far behind the stream is.
		entries, scanned, lost := s.oplog.ReadAfter(s.after, readChunk, maxEventBytes)
		if lost {
			return nil, nil, false, historyLost()
		}
		for i := range entries {
			if err := s.consume(&entries[i]); err != nil {
				// Deliver the events before the failure first.
				s.failed = err
				break
			}
		}
		if len(entries) > 0 {
			continue
		}
		// Caught up: everything up to scanned is read, so resuming at the
		// next tick misses nothing. The mark only ever moves forward.
		if s.resume == nil && len(s.pending) == 0 {
			s.setPBRT(Event{Token: HWMToken(tickAfter(scanned))})
		}
		if len(docs) > 0 || maxWait <= 0 {
			return docs, s.extra(), false, nil
		}
		if timer == nil {
			timer = time.NewTimer(maxWait)
		}
		select {
		case <-changed:
		case <-timer.C:
			return docs, s.extra(), false, nil
		case <-ctx.Done():
			return nil, nil, false, ctx.Err()
		}
	}
}

// setPBRT moves the postBatchResumeToken to ev's token if that is later.
func (s *Stream) setPBRT(ev Event) {
	key, doc := ev.key, ev.tokDoc
	if key == nil || doc == nil {
		var err error
		if key, doc, err = ev.Token.encode(); err != nil {
			return
		}
	}
	if bytes.Compare(key, s.pbrtKey) <= 0 {
		return
	}
	s.pbrt, s.pbrtKey, s.pbrtDoc = ev.Token, key, doc
}

func (s *Stream) extra() bson.D {
	return bson.D{{Key: "postBatchResumeToken", Value: s.pbrtDoc}}
}

// Close ends the stream; Next then fails.
func (s *Stream) Close() {
	s.mu.Lock()
	s.closed = true
	s.pending = nil
	s.mu.Unlock()
}

// consume turns one oplog entry into pending events.
func (s *Stream) consume(e *store.OplogEntry) error {
	s.after = e.TS
	if s.resume != nil && tsLess(s.resume.ClusterTime, e.TS) {
		return s.notFound()
	}
	if !s.spec.relevant(e) {
		return nil
	}
	evs, err := s.spec.build(e, s.lookup)
	if err != nil {
		return err
	}
	for _, ev := range evs {
		if s.resume != nil {
			want := *s.resume
			want.Split, want.FragmentNum = false, 0
			switch c := Compare(ev.Token, want); {
			case c < 0:
				continue // before the resume point
			case c > 0:
				return s.notFound()
			}
			s.resume = nil
			if s.skipFrag < 0 {
				// The resume point itself is not returned again. After
				// startAfter an invalidate, the stream goes on after the
				// command that invalidated it (its event sorts before).
				continue
			}
		}
		out, err := s.finish(ev)
		if err != nil {
			return err
		}
		s.pending = append(s.pending, out...)
	}
	return nil
}

func (s *Stream) notFound() error {
	return fatal("cannot resume stream; the resume token was not found. %s", s.pbrtDoc)
}

func tsLess(a, b bson.Timestamp) bool { return a.T < b.T || a.T == b.T && a.I < b.I }

// finish runs the user's stages on an event, checks that they kept its _id,
// and splits or refuses an event too large for a reply.
func (s *Stream) finish(ev Event) ([]Event, error) {
	docs := []bson.Raw{ev.Doc}
	if p := s.spec.pipeline; p != nil {
		var err error
		if docs, err = p.Run(noEnv{}, docs); err != nil {
			return nil, err
		}
	}
	if len(docs) == 0 {
		if ev.Invalidate {
			// Filtered out, but the stream ends all the same.
			return []Event{{Token: ev.Token, Invalidate: true, key: ev.key, tokDoc: ev.tokDoc}}, nil
		}
		return nil, nil
	}
	want := ev.Doc.Lookup("_id")
	var out []Event
	for _, d := range docs {
		got, err := d.LookupErr("_id")
		if err != nil || got.Type != want.Type || string(got.Value) != string(want.Value) {
			return nil, fatal("Encountered an event whose _id field, which contains the resume token, was modified by the pipeline. " +
				"Modifying the _id field of an event makes it impossible to resume the stream from that point. " +
				"Only transformations that retain the unmodified _id field are allowed.")
		}
		if len(d) <= s.maxEvent {
			if s.skipFrag >= 0 {
				// Resumed from a fragment, but the event now fits whole:
				// the stream goes on after it.
				s.skipFrag = -1
				continue
			}
			out = append(out, Event{Token: ev.Token, Doc: d, Invalidate: ev.Invalidate, key: ev.key, tokDoc: ev.tokDoc})
			continue
		}
		if !s.spec.SplitLargeEvents {
			return nil, mongoerr.New(mongoerr.BSONObjectTooLarge,
				"BSONObj size: %d (0x%X) is invalid. Size must be between 0 and %d(16MB) First element: _id: %s",
				len(d), len(d), s.maxEvent, bson.Raw(want.Value))
		}
		frags, err := split(ev.Token, d, s.maxEvent)
		if err != nil {
			return nil, err
		}
		for _, f := range frags {
			if f.Token.FragmentNum <= s.skipFrag {
				continue
			}
			out = append(out, f)
		}
		s.skipFrag = -1
	}
	return out, nil
}

// split cuts an oversized event into fragments (mongo-reference.md §3.11):
// each is {_id: <token with its fragment number>, splitEvent: {fragment,
// of}, ...fields}, the fields (all but _id) placed greedily, smallest first.
func split(tok Token, doc bson.Raw, limit int) ([]Event, error) {
	elems, err := doc.Elements()
	if err != nil {
		return nil, err
	}
	var fields []bson.RawElement
	for _, e := range elems {
		if e.Key() != "_id" {
			fields = append(fields, e)
		}
	}
	sort.SliceStable(fields, func(i, j int) bool { return len(fields[i]) < len(fields[j]) })

	// Room left in a fragment for fields: the largest fragment token, a
	// splitEvent of large numbers, and the document framing.
	probe := tok
	probe.Split, probe.FragmentNum = true, 1<<30
	probeDoc, err := probe.Doc()
	if err != nil {
		return nil, err
	}
	overhead := 5 + 1 + len("_id") + 1 + len(probeDoc) + 64
	room := limit - overhead
	var groups [][]bson.RawElement
	used := room + 1
	for _, f := range fields {
		if len(f) > room {
			return nil, mongoerr.New(mongoerr.BSONObjectTooLarge,
				"Cannot split event with _id %s: its field '%s' alone is %d bytes, over the %d-byte limit",
				bson.Raw(doc.Lookup("_id").Value), f.Key(), len(f), limit)
		}
		if used+len(f) > room {
			groups = append(groups, nil)
			used = 0
		}
		groups[len(groups)-1] = append(groups[len(groups)-1], f)
		used += len(f)
	}
	out := make([]Event, 0, len(groups))
	for i, g := range groups {
		ft := tok
		ft.Split, ft.FragmentNum = true, i
		key, tokDoc, err := ft.encode()
		if err != nil {
			return nil, err
		}
		bd := newBuilder(used)
		bd.doc("_id", tokDoc)
		bd.doc("splitEvent", bsoncore.NewDocumentBuilder().
			AppendInt32("fragment", int32(i+1)).AppendInt32("of", int32(len(groups))).Build())
		for _, f := range g {
			bd.b = append(bd.b, f...)
		}
		out = append(out, Event{Token: ft, Doc: bd.done(), key: key, tokDoc: tokDoc})
	}
	return out, nil
}

// noEnv is the pipeline environment of change-stream stages: $lookup is
// not among the stages allowed after $changeStream, so no other collection
// is ever read.
type noEnv struct{}

func (noEnv) Collection(string) ([]bson.Raw, error) { return nil, nil }

var _ mql.Env = noEnv{}
