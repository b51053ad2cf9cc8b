package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"time"

	"golang.org/x/term"

	"github.com/tide-cdc/tide/internal/runtime"
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
	Stats() runtime.Stats
}

// progressLoop rewrites one status line every second until done or ctx ends.
func progressLoop(ctx context.Context, done <-chan struct{}, w io.Writer, p statser) {
	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	var lastN uint64
	last := time.Now()
	for {
		select {
		case <-ctx.Done():
			fmt.Fprintln(w)
			return
		case <-done:
			fmt.Fprintln(w)
			return
		case now := <-tick.C:
			st := p.Stats()
			n := uint64(st.EventsOut)
			rate := float64(n-lastN) / now.Sub(last).Seconds()
			lastN, last = n, now
			fmt.Fprintf(w, "\r\033[K%d events  %.0f events/s  %s", n, rate, describeCheckpoint(st))
		}
	}
}

func describeCheckpoint(st runtime.Stats) string {
	if st.LastCheckpoint.Source == nil {
		return "checkpoint: none yet"
	}
	pos := string(st.LastCheckpoint.Source)
	if len(pos) > 60 {
		pos = pos[:57] + "..."
	}
	return fmt.Sprintf("checkpoint %s (%s ago)", pos, time.Since(st.LastCommit).Round(100*time.Millisecond))
}
