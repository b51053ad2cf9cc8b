package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"golang.org/x/term"

	"github.com/tide-cdc/tide"
	"github.com/tide-cdc/tide/cdc"
	"github.com/tide-cdc/tide/internal/status"
	"github.com/tide-cdc/tide/pipeline"
)

// showProgress decides whether tide run prints its one-line summary: by
// default only when stderr is a terminal, so logs in files stay clean.
func showProgress(mode string, w io.Writer) bool {
	switch mode {
	case "always":
		return true
	case "never":
		return false
	}
	f, ok := w.(*os.File)
	return ok && term.IsTerminal(int(f.Fd()))
}

// statser is the part of a pipeline the progress line reads.
type statser interface {
	Stats() pipeline.Stats
}

// progressLoop rewrites one status line every second until done or ctx
// ends, then ends the line.
func progressLoop(ctx context.Context, done <-chan struct{}, w io.Writer, p statser) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	go func() { // ends with progressLoop at the latest
		select {
		case <-done:
			cancel()
		case <-ctx.Done():
		}
	}()
	statusLoop(ctx, w, time.Second, p, "events", nil)
	fmt.Fprintln(w)
}

// sourceView is what the status line knows of the source beyond the
// pipeline's counts, read from the source's own statistics each tick.
type sourceView struct {
	clusterTime cdc.Timestamp // MongoDB: the cluster time of the committed checkpoint
	lag         time.Duration // the pipeline's lag (status.ViewSource), when lagKnown
	lagKnown    bool
	jetStream   bool      // a JetStream consumer: the checkpoint is a stream sequence
	pending     uint64    // JetStream: the consumer's pending count
	snapshot    []snapBar // the snapshot's collections, in name order; nil without one
	copying     bool      // the snapshot is still running
}

// snapBar is one collection's snapshot progress.
type snapBar struct {
	ns          string
	done, total int64
}

// viewOf reads the source's view (status.ViewSource): what any source
// tells through its optional abilities; a source without them (the
// generator) has nothing to add.
func viewOf(src cdc.Source, st pipeline.Stats, now time.Time) sourceView {
	sv := status.ViewSource(src, st, now)
	v := sourceView{clusterTime: sv.Lag.At, lag: sv.Lag.Time, lagKnown: sv.Lag.TimeKnown,
		jetStream: sv.Lag.Sequenced && sv.Lag.MessagesKnown, pending: sv.Lag.Messages, copying: sv.Snapshot.Copying}
	for _, c := range sv.Snapshot.Collections {
		v.snapshot = append(v.snapshot, snapBar{c.Namespace, c.Done, c.Total})
	}
	return v
}

// describeCheckpoint says where the last checkpoint stands: a MongoDB
// position as its cluster time and how far behind now it is, a JetStream
// position as its stream sequence and the consumer's pending count, any
// other as its text (cut short), each with the checkpoint's age.
func describeCheckpoint(st pipeline.Stats, v sourceView, now time.Time) string {
	if st.LastCheckpoint.Source == nil {
		return "checkpoint: none yet"
	}
	age := "checkpoint " + humanDuration(now.Sub(st.LastCommit)) + " ago"
	if v.copying && len(v.snapshot) > 0 {
		return "checkpoint in the snapshot, " + humanDuration(now.Sub(st.LastCommit)) + " ago"
	}
	if ct := v.clusterTime; ct.T != 0 {
		at := time.Unix(int64(ct.T), 0).In(now.Location())
		layout := "15:04:05"
		if now.Sub(at) > 20*time.Hour {
			layout = "2006-01-02 15:04:05"
		}
		// Behind is the lag where it is known (0 for a caught-up
		// stream, whose position's cluster time may be seconds old).
		behind := now.Sub(at)
		if v.lagKnown {
			behind = v.lag
		}
		return fmt.Sprintf("at %s, %s behind  (%s)", at.Format(layout), humanDuration(behind), age)
	}
	if v.jetStream {
		var pos struct {
			StreamSeq uint64 `json:"stream_seq"`
		}
		if json.Unmarshal(st.LastCheckpoint.Source, &pos) == nil && pos.StreamSeq > 0 {
			return fmt.Sprintf("at stream seq %d, %d pending  (%s)", pos.StreamSeq, v.pending, age)
		}
	}
	pos := string(st.LastCheckpoint.Source)
	if len(pos) > 60 {
		pos = pos[:57] + "..."
	}
	return fmt.Sprintf("checkpoint %s (%s ago)", pos, humanDuration(now.Sub(st.LastCommit)))
}

// humanDuration writes d for a person: tenths of a second below 10 s,
// whole seconds below a minute, then minutes and seconds, then hours and
// minutes. A negative d (a clock behind the server's) is 0.
func humanDuration(d time.Duration) string {
	d = max(d, 0)
	switch {
	case d < 10*time.Second:
		return fmt.Sprintf("%.1f s", d.Seconds())
	case d < time.Minute:
		return fmt.Sprintf("%d s", int(d.Seconds()))
	case d < time.Hour:
		s := int(d.Round(time.Second).Seconds())
		return fmt.Sprintf("%d min %02d s", s/60, s%60)
	}
	m := int(d.Round(time.Minute).Minutes())
	return fmt.Sprintf("%d h %02d min", m/60, m%60)
}

// renderBar draws one collection's snapshot as the source's own bars do,
// with an ETA from rate (documents per second): "snapshot db.c
// [#####     ] 120/400 docs  30%  ETA 12 s". An estimate below what was
// copied counts as what was copied.
func renderBar(b snapBar, rate float64) string {
	const width = 30
	total := max(b.total, b.done)
	filled, pct := width, 100.0
	if total > 0 {
		filled = int(int64(width) * b.done / total)
		pct = 100 * float64(b.done) / float64(total)
	}
	eta := "ETA --"
	switch {
	case b.done >= total:
		eta = "done"
	case rate > 0:
		eta = "ETA " + humanDuration(time.Duration(float64(total-b.done)/rate*float64(time.Second)))
	}
	return fmt.Sprintf("snapshot %s [%s%s] %d/%d docs %3.0f%%  %s", b.ns,
		strings.Repeat("#", filled), strings.Repeat(" ", width-filled), b.done, total, pct, eta)
}

// snapRates measures each collection's copy rate since its bar first
// moved, for the ETA: an average over the whole copy, steadier than the
// last tick's.
type snapRates map[string]struct {
	at   time.Time
	done int64
}

func (r snapRates) rate(b snapBar, now time.Time) float64 {
	first, ok := r[b.ns]
	if !ok {
		r[b.ns] = struct {
			at   time.Time
			done int64
		}{now, b.done}
		return 0
	}
	secs := now.Sub(first.at).Seconds()
	if secs <= 0 {
		return 0
	}
	return float64(b.done-first.done) / secs
}

// statusLine is the last line: committed count, rate, what extra says
// about the source, and the checkpoint.
func statusLine(st pipeline.Stats, v sourceView, rate float64, unit, extra string, now time.Time) string {
	if extra != "" {
		extra += "  "
	}
	return fmt.Sprintf("%d %s  %.0f %s/s  %s%s", st.EventsOut, unit, rate, unit, extra, describeCheckpoint(st, v, now))
}

// screen redraws a block of lines in place: the snapshot bars, then the
// status line.
type screen struct {
	w     io.Writer
	lines int // lines drawn last time
}

func (s *screen) draw(lines []string) {
	var sb strings.Builder
	if s.lines > 1 {
		fmt.Fprintf(&sb, "\033[%dA", s.lines-1)
	}
	for i, l := range lines {
		if i > 0 {
			sb.WriteByte('\n')
		}
		sb.WriteString("\r\033[K")
		sb.WriteString(l)
	}
	// Lines left over from a longer block are cleared.
	for range s.lines - len(lines) {
		sb.WriteString("\n\r\033[K")
	}
	if extra := s.lines - len(lines); extra > 0 {
		fmt.Fprintf(&sb, "\033[%dA", extra)
	}
	s.lines = len(lines)
	io.WriteString(s.w, sb.String())
}

// statusLoop rewrites the status every interval until ctx ends: while a
// MongoDB source copies its collections, a bar per collection with
// percent and ETA; then the committed count, rate, what extra says about
// the source, and the checkpoint (see describeCheckpoint). unit names what
// is counted ("changes", "messages").
func statusLoop(ctx context.Context, w io.Writer, every time.Duration, p statser, unit string, extra func(now time.Time) string) {
	var src cdc.Source
	if tp, ok := p.(*tide.Pipeline); ok {
		src = tp.Source
	}
	tick := time.NewTicker(every)
	defer tick.Stop()
	var lastN int64
	last := time.Now()
	scr := &screen{w: w}
	rates := snapRates{}
	bars := false  // the snapshot bars are on screen
	final := false // the snapshot bars were drawn finished
	for {
		select {
		case <-ctx.Done():
			return
		case now := <-tick.C:
			st := p.Stats()
			rate := float64(st.EventsOut-lastN) / now.Sub(last).Seconds()
			lastN, last = st.EventsOut, now
			var v sourceView
			if st.EventsIn > 0 {
				// Only once the source has handed out an event: its
				// Open, which sets up what its Stats read, happened
				// before (through the pipeline's lock).
				v = viewOf(src, st, now)
			}
			var lines []string
			switch {
			case v.copying:
				bars = len(v.snapshot) > 0
				for _, b := range v.snapshot {
					lines = append(lines, renderBar(b, rates.rate(b, now)))
				}
			case !final && len(v.snapshot) > 0:
				// The copy is over: its bars stay above the status
				// line, finished, each at the count it copied.
				bars, final = true, true
				for _, b := range v.snapshot {
					b.total = b.done
					lines = append(lines, renderBar(b, 0))
				}
			}
			more := ""
			if extra != nil {
				more = extra(now)
			}
			if st.EventsIn > 0 {
				more = joinNonEmpty(more, incrementalProgress(src))
			}
			lines = append(lines, statusLine(st, v, rate, unit, more, now))
			scr.draw(lines)
			if bars && !v.copying {
				bars, scr.lines = false, 1
			}
		}
	}
}
