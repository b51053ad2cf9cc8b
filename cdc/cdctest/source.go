package cdctest

import (
	"bytes"
	"errors"
	"fmt"
	"maps"
	"testing"
	"time"

	"github.com/tide-cdc/tide/cdc"
)

// DefaultTimeout bounds each wait of TestSource for events.
const DefaultTimeout = 20 * time.Second

// SourceHarness tells TestSource how to make the source under test and
// how to make events upstream.
type SourceHarness struct {
	// New returns a new, unopened source. It is called with the
	// *testing.T of a subtest, several times in one subtest (a restart is
	// a new source): every source made with the same t reads the same
	// upstream (the same collection, stream and durable consumer), and
	// each t gets a fresh one of its own.
	New func(t *testing.T) cdc.Source

	// Produce makes n more events at t's upstream, after those made
	// before, each with a content distinct from every other. The suite
	// calls it after the first Open, so a source that starts from "now"
	// sees them. Leave it nil for a source whose events already exist
	// (a generator): the suite then only reads.
	Produce func(t *testing.T, n int)

	// Payload returns what identifies an event's content; events are
	// compared by it. By default it is the event's FullDocument, or its
	// Payload if it has none.
	Payload func(ev cdc.Event) []byte

	// Foreign, if set, returns a checkpoint that is well formed but
	// belongs to another upstream (another collection, stream or
	// generator): Open must refuse it. For a source that is a
	// cdc.Identifier, the suite also refuses, by itself, a checkpoint
	// whose identity was changed.
	Foreign func(t *testing.T) *cdc.Checkpoint

	// Timeout bounds each wait for events; default DefaultTimeout.
	Timeout time.Duration
}

// TestSource checks the source contract of package cdc; see the package
// documentation for what it checks. Call it from a test of the source's
// package.
func TestSource(t *testing.T, h SourceHarness) {
	t.Helper()
	if h.New == nil {
		t.Fatal("cdctest: SourceHarness needs New")
	}
	t.Run("ResumesAfterRestoredPosition", func(t *testing.T) {
		r := &sourceRun{t: t, h: &h}
		r.open(nil)
		r.produce(8)
		first := r.read(8)
		r.distinct(first)
		cp := r.checkpoint(first[2])
		r.ack(first[2])
		r.close()

		// Events 3-7 were read and not acknowledged: a restart from the
		// checkpoint of event 2 reads them again, exactly, and then the
		// events made since (one more than it reads, so that a source that
		// skips one still has seven to hand out, and the gap shows).
		r.open(cp)
		r.produce(3)
		again := r.read(7)
		r.distinct(append(append([]cdc.Event{}, first[:3]...), again...))
		r.same("after a restart from the position of event 2", again[:5], first[3:])
		more := again[5:]
		r.distinct(append(append([]cdc.Event{}, first...), more...))
		cp = r.checkpoint(more[1])
		r.ack(more[1])
		r.close()

		// Resuming from the position of the last event read: nothing
		// read before comes again, and the event left unread comes first.
		r.open(cp)
		r.produce(2)
		last := r.read(1)
		r.distinct(append(append(append([]cdc.Event{}, first...), more...), last...))
		r.close()
	})
	t.Run("RefusesPositionItCannotSeekTo", func(t *testing.T) {
		r := &sourceRun{t: t, h: &h}
		r.open(nil)
		r.produce(1)
		ev := r.read(1)[0]
		meta := r.identity()
		r.close()
		garbage := map[string]cdc.Position{
			"bytes that are not JSON": cdc.Position("\x00garbage, not a position"),
			"JSON of another shape":   cdc.Position(`{"cdctest":"not a position of this source"}`),
			"a truncated position":    ev.Pos[:len(ev.Pos)/2],
		}
		for what, pos := range garbage {
			r.refuse(what, &cdc.Checkpoint{Source: pos, Meta: maps.Clone(meta)})
		}
	})
	t.Run("RefusesAnotherIdentity", func(t *testing.T) {
		r := &sourceRun{t: t, h: &h}
		checked := false
		if h.Foreign != nil {
			r.refuse("the harness's foreign checkpoint", h.Foreign(t))
			checked = true
		}
		r.open(nil)
		r.produce(1)
		ev := r.read(1)[0]
		meta := r.identity()
		r.close()
		if len(meta) > 0 {
			other := map[string]string{}
			for k, v := range meta {
				other[k] = v + "-other"
			}
			r.refuse("a checkpoint of another identity", &cdc.Checkpoint{Source: ev.Pos, Meta: other})
			checked = true
		}
		if !checked {
			t.Skip("cdctest: the source is not a cdc.Identifier and the harness has no Foreign checkpoint: nothing to refuse")
		}
	})
	t.Run("CloseIsIdempotent", func(t *testing.T) {
		closeTwice(t, h.New(t), "a source that was never opened")
		r := &sourceRun{t: t, h: &h}
		r.open(nil)
		closeTwice(t, r.src, "an opened source")
	})
}

// sourceRun drives one subtest's sources as the pipeline does.
type sourceRun struct {
	t   *testing.T
	h   *SourceHarness
	src cdc.Source
}

func (r *sourceRun) open(cp *cdc.Checkpoint) {
	r.t.Helper()
	r.src = r.h.New(r.t)
	s := r.src
	r.t.Cleanup(func() { _ = s.Close() }) // after a failure; Close is idempotent
	if err := s.Open(r.t.Context(), cp); err != nil {
		r.t.Fatalf("cdctest: open source from checkpoint %v: %v", describe(cp), err)
	}
}

func (r *sourceRun) close() {
	r.t.Helper()
	if err := r.src.Close(); err != nil {
		r.t.Fatalf("cdctest: close source: %v", err)
	}
}

func (r *sourceRun) produce(n int) {
	r.t.Helper()
	if r.h.Produce != nil {
		r.h.Produce(r.t, n)
	}
}

func (r *sourceRun) identity() map[string]string {
	if id, ok := r.src.(cdc.Identifier); ok {
		return id.Identity()
	}
	return nil
}

// checkpoint returns the checkpoint the pipeline would save after
// committing up to ev.
func (r *sourceRun) checkpoint(ev cdc.Event) *cdc.Checkpoint {
	return &cdc.Checkpoint{Source: bytes.Clone(ev.Pos), Meta: r.identity()}
}

// ack acknowledges an Acker source up to ev, as the pipeline does once
// the checkpoint naming ev is saved.
func (r *sourceRun) ack(ev cdc.Event) {
	r.t.Helper()
	if a, ok := r.src.(cdc.Acker); ok {
		if err := a.Ack(r.t.Context(), ev.Pos); err != nil {
			r.t.Fatalf("cdctest: ack up to %s: %v", ev.Pos, err)
		}
	}
}

// read polls until it has n events that are not markers and returns
// them; markers are the pipeline's business.
func (r *sourceRun) read(n int) []cdc.Event {
	r.t.Helper()
	timeout := r.h.Timeout
	if timeout <= 0 {
		timeout = DefaultTimeout
	}
	deadline := time.NewTimer(timeout)
	defer deadline.Stop()
	var got []cdc.Event
	var buf []cdc.Event
	for len(got) < n {
		var err error
		buf, err = r.src.Poll(r.t.Context(), buf[:0], n-len(got))
		for _, ev := range buf {
			if ev.Op != cdc.OpMarker {
				got = append(got, ev)
			}
		}
		clear(buf)
		if errors.Is(err, cdc.ErrEnd) && len(got) < n {
			r.t.Fatalf("cdctest: source ended after %d of %d events: %v", len(got), n, err)
		}
		if err != nil && !errors.Is(err, cdc.ErrEnd) {
			r.t.Fatalf("cdctest: poll: %v", err)
		}
		if len(got) >= n {
			break
		}
		select {
		case <-r.src.Ready():
		case <-deadline.C:
			r.t.Fatalf("cdctest: read %d of %d events in %s: events lost, or the source sent no more (Ready never fired, or Poll returned nothing)", len(got), n, timeout)
		}
	}
	if len(got) > n {
		r.t.Fatalf("cdctest: Poll returned %d events, more than the %d asked for", len(got), n)
	}
	return got
}

func (r *sourceRun) payload(ev cdc.Event) []byte {
	if r.h.Payload != nil {
		return r.h.Payload(ev)
	}
	if ev.FullDocument != nil {
		return ev.FullDocument
	}
	return ev.Payload
}

// distinct checks that no two events have the same content or position:
// an event read twice.
func (r *sourceRun) distinct(evs []cdc.Event) {
	r.t.Helper()
	seen := map[string]int{}
	pos := map[string]int{}
	for i, ev := range evs {
		p := r.payload(ev)
		if len(p) == 0 {
			r.t.Fatalf("cdctest: event %d at %s has no content to compare; set SourceHarness.Payload", i, ev.Pos)
		}
		if j, ok := seen[string(p)]; ok {
			r.t.Errorf("cdctest: event %d duplicates event %d: %s", i, j, short(p))
		}
		if j, ok := pos[string(ev.Pos)]; ok {
			r.t.Errorf("cdctest: event %d has the position of event %d: %s", i, j, ev.Pos)
		}
		seen[string(p)], pos[string(ev.Pos)] = i, i
	}
}

// same checks that got are the events of want, in order.
func (r *sourceRun) same(when string, got, want []cdc.Event) {
	r.t.Helper()
	g := make([][]byte, len(got))
	for i := range got {
		g[i] = r.payload(got[i])
	}
	w := make([][]byte, len(want))
	for i := range want {
		w[i] = r.payload(want[i])
	}
	if err := Compare(g, w); err != nil {
		r.t.Errorf("cdctest: %s: %v", when, fmt.Errorf("events: %w", err))
	}
}

// refuse checks that a new source refuses to open from cp, and that it
// can then be closed, twice.
func (r *sourceRun) refuse(what string, cp *cdc.Checkpoint) {
	r.t.Helper()
	s := r.h.New(r.t)
	err := s.Open(r.t.Context(), cp)
	if err == nil {
		r.t.Errorf("cdctest: Open from %s (%s) succeeded; want an error, never a silent start elsewhere", what, cp.Source)
	}
	closeTwice(r.t, s, "a source whose Open failed")
}
