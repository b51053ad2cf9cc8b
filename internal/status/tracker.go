// Package status serves a pipeline's status over HTTP for people and
// programs: an embedded page with live plots (/), a JSON document
// (/api/status) and the Prometheus metrics (/metrics). tide run and
// tide demo mount it; so can any command that runs pipelines.
package status

import (
	"encoding/json"
	"math"
	"sync"
	"time"

	"github.com/tide-cdc/tide/cdc"
	"github.com/tide-cdc/tide/pipeline"
)

// HistoryLen is how many one-second samples a Tracker keeps per series:
// the last 15 minutes, so that a freshly opened page shows them.
const HistoryLen = 900

// maxStageErrors bounds the last errors kept per stage.
const maxStageErrors = 5

// Pipeline is what a Tracker reads of a pipeline: *pipeline.Pipeline and
// *tide.Pipeline have these methods.
type Pipeline interface {
	State() pipeline.State
	Stats() pipeline.Stats
	Err() error
}

// Tracker follows one pipeline for the status server. It is a
// pipeline.Observer, to count errors by stage, so create it before the
// pipeline and Attach the pipeline once it exists. Its methods are safe
// for concurrent use.
type Tracker struct {
	mu     sync.Mutex // guards the fields below
	name   string
	p      Pipeline
	src    cdc.Source
	redact func(string) string
	errs   map[string]*stageErrors
	hist   []Sample // a ring of at most HistoryLen samples; next is where the next one goes
	next   int
	prev   pipeline.Stats // at the last sample, for the rates
	prevAt time.Time
	ns     map[string]*nsCount // records committed by namespace
}

// stageErrors is what a stage's errors left: how many, and the last few.
type stageErrors struct {
	count int64
	last  []StageError // oldest first, at most maxStageErrors
}

// StageError is one error of a stage.
type StageError struct {
	Time    time.Time `json:"time"`
	Message string    `json:"message"`
}

// Sample is one second of a pipeline's history. Lag is NaN where the
// source does not know it.
type Sample struct {
	T            float64 // Unix seconds
	EventsPerSec float64
	BytesPerSec  float64
	LagSeconds   float64
}

// NewTracker returns a tracker with nothing attached yet.
func NewTracker() *Tracker {
	return &Tracker{errs: map[string]*stageErrors{}}
}

// Attach names the pipeline to follow and its source (as built, for the
// source's own statistics and a cdc.StatusDetailer). redact, if not
// nil, hides secrets in the error messages shown.
func (t *Tracker) Attach(name string, p Pipeline, src cdc.Source, redact func(string) string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.name, t.p, t.src, t.redact = name, p, src, redact
}

// Polled implements pipeline.Observer.
func (t *Tracker) Polled(int, int) {}

// Committed implements pipeline.Observer.
func (t *Tracker) Committed(int, int, time.Duration, cdc.Checkpoint) {}

// Failed implements pipeline.Observer: it keeps the error for its stage.
func (t *Tracker) Failed(stage string, err error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	se := t.errs[stage]
	if se == nil {
		se = &stageErrors{}
		t.errs[stage] = se
	}
	se.count++
	if len(se.last) == maxStageErrors {
		se.last = append(se.last[:0], se.last[1:]...)
	}
	se.last = append(se.last, StageError{Time: time.Now().UTC(), Message: t.redactLocked(err.Error())})
}

func (t *Tracker) redactLocked(s string) string {
	if t.redact != nil {
		return t.redact(s)
	}
	return s
}

// sample appends one point to the history. The status server calls it
// every second.
func (t *Tracker) sample(now time.Time) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.p == nil {
		return
	}
	st := t.p.Stats()
	prev, prevAt := t.prev, t.prevAt
	t.prev, t.prevAt = st, now
	d := now.Sub(prevAt).Seconds()
	if prevAt.IsZero() || d <= 0 {
		return // the first sample only sets the start of the rates
	}
	s := Sample{T: float64(now.UnixMilli()) / 1000, LagSeconds: math.NaN(),
		EventsPerSec: float64(st.EventsOut-prev.EventsOut) / d,
		BytesPerSec:  float64(st.BytesOut-prev.BytesOut) / d}
	if v := ViewSource(t.src, st, now); v.Lag.TimeKnown {
		s.LagSeconds = round(v.Lag.Time.Seconds())
	}
	if len(t.hist) < HistoryLen {
		t.hist = append(t.hist, s)
	} else {
		t.hist[t.next] = s
	}
	t.next = (t.next + 1) % HistoryLen
}

// historyLocked returns the samples after since, oldest first.
func (t *Tracker) historyLocked(since float64) []Sample {
	var out []Sample
	start := 0 // the oldest sample
	if len(t.hist) == HistoryLen {
		start = t.next
	}
	for i := range t.hist {
		s := t.hist[(start+i)%len(t.hist)]
		if s.T > since {
			out = append(out, s)
		}
	}
	return out
}

// Status is one pipeline in /api/status.
type Status struct {
	Name            string                 `json:"name"`
	State           string                 `json:"state"`
	Error           string                 `json:"error,omitempty"` // why it failed
	EventsIn        int64                  `json:"events_in"`
	EventsOut       int64                  `json:"events_out"`
	BytesOut        int64                  `json:"bytes_out"`
	Batches         int64                  `json:"batches"`
	EventsPerSecond float64                `json:"events_per_second"`
	BytesPerSecond  float64                `json:"bytes_per_second"`
	LagSeconds      *float64               `json:"lag_seconds"`                 // null where the source does not know it
	LagEvents       *int64                 `json:"lag_events"`                  // null where the source does not know it
	Checkpoint      *Checkpoint            `json:"checkpoint"`                  // null before the first commit
	Errors          map[string]StageErrors `json:"errors"`                      // by stage: poll, encode, put, commit, save, ack, close
	Source          map[string]any         `json:"source"`                      // a cdc.StatusDetailer's details, or null
	DeadLetters     int64                  `json:"dead_letters"`                // changes set aside by on_error: dead_letter
	Skipped         int64                  `json:"skipped"`                     // changes skipped by on_error: skip
	DeadLetterError string                 `json:"dead_letter_error,omitempty"` // the error of the last change set aside or skipped
	History         *History               `json:"history,omitempty"`
	// Degraded says which end is retrying, while one is; null otherwise.
	Degraded *Degraded `json:"degraded"`
	// Namespaces are the records committed by namespace, in name order.
	Namespaces []NamespaceStatus `json:"namespaces"`
}

// Degraded is the retrying end of a degraded pipeline: the component
// (source or sink), its last error, its consecutive failed attempts, and
// the seconds since the last success (the last commit, or the start).
type Degraded struct {
	Component               string  `json:"component"`
	Error                   string  `json:"error"`
	Attempts                int     `json:"attempts"`
	SecondsSinceLastSuccess float64 `json:"seconds_since_last_success"`
}

// Checkpoint is the last saved checkpoint, as people read it.
type Checkpoint struct {
	Position       json.RawMessage `json:"position"`                  // the source's position, as stored
	ClusterTime    *ClusterTime    `json:"cluster_time,omitempty"`    // MongoDB
	StreamSequence *uint64         `json:"stream_sequence,omitempty"` // NATS: the stream (or core) sequence
	SavedAt        time.Time       `json:"saved_at"`
	AgeSeconds     float64         `json:"age_seconds"`
}

// ClusterTime is a MongoDB cluster time, with its seconds as RFC 3339.
type ClusterTime struct {
	T    uint32 `json:"t"`
	I    uint32 `json:"i"`
	Time string `json:"time"`
}

// StageErrors is a stage's error count and its last errors, oldest first.
type StageErrors struct {
	Count int64        `json:"count"`
	Last  []StageError `json:"last"`
}

// History is the plotted series, column by column; a lag the source does
// not know is null.
type History struct {
	T               []float64  `json:"t"`
	EventsPerSecond []float64  `json:"events_per_second"`
	BytesPerSecond  []float64  `json:"bytes_per_second"`
	LagSeconds      []*float64 `json:"lag_seconds"`
}

// Status returns the pipeline's status now, with the history after since
// (Unix seconds) if withHistory.
func (t *Tracker) Status(now time.Time, withHistory bool, since float64) Status {
	t.mu.Lock()
	defer t.mu.Unlock()
	s := Status{Name: t.name, State: pipeline.Starting.String(), Errors: map[string]StageErrors{}, Namespaces: t.namespacesLocked(nil)}
	for stage, se := range t.errs {
		s.Errors[stage] = StageErrors{Count: se.count, Last: append([]StageError(nil), se.last...)}
	}
	if withHistory {
		h := &History{T: []float64{}, EventsPerSecond: []float64{}, BytesPerSecond: []float64{}, LagSeconds: []*float64{}}
		for _, x := range t.historyLocked(since) {
			h.T = append(h.T, x.T)
			h.EventsPerSecond = append(h.EventsPerSecond, round(x.EventsPerSec))
			h.BytesPerSecond = append(h.BytesPerSecond, round(x.BytesPerSec))
			h.LagSeconds = append(h.LagSeconds, nanNull(x.LagSeconds))
		}
		s.History = h
	}
	if t.p == nil {
		return s
	}
	state := t.p.State()
	s.State = state.String()
	if err := t.p.Err(); err != nil {
		s.Error = t.redactLocked(err.Error())
	}
	if hr, ok := t.p.(healthReporter); ok && state == pipeline.Degraded {
		if h := hr.Health(); h.Degraded {
			d := &Degraded{Component: h.Component, Attempts: h.Attempts}
			if h.Err != nil {
				d.Error = t.redactLocked(h.Err.Error())
			}
			if !h.LastSuccess.IsZero() {
				d.SecondsSinceLastSuccess = round(now.Sub(h.LastSuccess).Seconds())
			}
			s.Degraded = d
		}
	}
	st := t.p.Stats()
	s.EventsIn, s.EventsOut, s.BytesOut, s.Batches = st.EventsIn, st.EventsOut, st.BytesOut, st.Batches
	s.DeadLetters, s.Skipped, s.DeadLetterError = st.DeadLetters, st.Skipped, t.redactLocked(st.LastError)
	if len(t.hist) > 0 && state != pipeline.Stopped && state != pipeline.Failed {
		last := t.hist[(t.next-1+len(t.hist))%len(t.hist)]
		s.EventsPerSecond, s.BytesPerSecond = round(last.EventsPerSec), round(last.BytesPerSec)
	}
	v := ViewSource(t.src, st, now)
	if v.Snapshots && len(v.Snapshot.Collections) > 0 {
		s.Namespaces = t.namespacesLocked(v.Snapshot.Collections)
	}
	if v.Lag.TimeKnown {
		secs := round(v.Lag.Time.Seconds())
		s.LagSeconds = &secs
	}
	if v.Lag.MessagesKnown {
		n := int64(v.Lag.Messages)
		s.LagEvents = &n
	}
	if st.LastCheckpoint.Source != nil {
		cp := &Checkpoint{Position: position(st.LastCheckpoint.Source), SavedAt: st.LastCommit.UTC(), AgeSeconds: round(now.Sub(st.LastCommit).Seconds())}
		if ct := v.Lag.At; ct.T != 0 {
			cp.ClusterTime = &ClusterTime{T: ct.T, I: ct.I, Time: time.Unix(int64(ct.T), 0).UTC().Format(time.RFC3339)}
		}
		if v.Lag.Sequenced {
			cp.StreamSequence = streamSequence(st.LastCheckpoint.Source)
		}
		s.Checkpoint = cp
	}
	s.Source = v.Details
	return s
}

// position returns p as JSON, or as a JSON string if it is not JSON.
func position(p cdc.Position) json.RawMessage {
	if json.Valid(p) {
		return json.RawMessage(p)
	}
	b, _ := json.Marshal(string(p))
	return b
}

// streamSequence reads a NATS position's sequence: {"stream_seq":N} for
// JetStream, {"seq":N} for a core subscription.
func streamSequence(p cdc.Position) *uint64 {
	var pos struct {
		StreamSeq *uint64 `json:"stream_seq"`
		Seq       *uint64 `json:"seq"`
	}
	if json.Unmarshal(p, &pos) != nil {
		return nil
	}
	if pos.StreamSeq != nil {
		return pos.StreamSeq
	}
	return pos.Seq
}

func round(x float64) float64 { return math.Round(x*1000) / 1000 }

func nanNull(x float64) *float64 {
	if math.IsNaN(x) {
		return nil
	}
	return &x
}
