package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"time"

	"golang.org/x/term"

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

func describeCheckpoint(st pipeline.Stats) string {
	if st.LastCheckpoint.Source == nil {
		return "checkpoint: none yet"
	}
	pos := string(st.LastCheckpoint.Source)
	if len(pos) > 60 {
		pos = pos[:57] + "..."
	}
	return fmt.Sprintf("checkpoint %s (%s ago)", pos, time.Since(st.LastCommit).Round(100*time.Millisecond))
}

// statusLoop rewrites one status line every interval until ctx ends:
// committed count, rate, what extra says about the source, and the
// checkpoint. unit names what is counted ("changes", "messages").
func statusLoop(ctx context.Context, w io.Writer, every time.Duration, p statser, unit string, extra func(now time.Time) string) {
	tick := time.NewTicker(every)
	defer tick.Stop()
	var lastN int64
	last := time.Now()
	for {
		select {
		case <-ctx.Done():
			return
		case now := <-tick.C:
			st := p.Stats()
			rate := float64(st.EventsOut-lastN) / now.Sub(last).Seconds()
			lastN, last = st.EventsOut, now
			more := ""
			if extra != nil {
				more = extra(now) + "  "
			}
			fmt.Fprintf(w, "\r\033[K%d %s  %.0f %s/s  %s%s", st.EventsOut, unit, rate, unit, more, describeCheckpoint(st))
		}
	}
}
