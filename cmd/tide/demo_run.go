package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"sync"
	"syscall"
	"time"

	"github.com/tide-cdc/tide"
	"github.com/tide-cdc/tide/cdc"
	"github.com/tide-cdc/tide/pipeline"
)

// This file is what the two demos share: running the pipeline next to the
// producer of changes with a live status line, the drain on a signal, and
// the summary. demo.go and demo_nats.go keep what differs: the server, the
// producer, and how the output is checked.

// checkDemoFlags refuses flags no demo can run with, and makes the demo's
// directory.
func checkDemoFlags(f demoFlags) error {
	if f.events <= 0 {
		return fmt.Errorf("--events %d: want a positive number", f.events)
	}
	return os.MkdirAll(f.dir, 0o755)
}

// demoLogger logs only warnings and errors: the demo's own output is the
// status line and the summary.
func demoLogger(stderr io.Writer) *slog.Logger {
	return slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
}

// A demoProducer makes a demo's changes: the MongoDB writer, the NATS
// publisher.
type demoProducer interface {
	// produce makes the changes, and returns early, with ctx's error, when
	// ctx ends.
	produce(ctx context.Context) error
	// caughtUp reports whether st shows everything produce made committed.
	// It is called after produce returned.
	caughtUp(st pipeline.Stats) bool
}

// demoRun is one run of a demo's pipeline.
type demoRun struct {
	pipeline *tide.Pipeline
	// committed receives a value after each commit (demoSignal), so
	// that the wait for the producer's changes wakes when one lands.
	committed <-chan struct{}
	// start is called once the source is open, so that the producer's
	// first change comes after the source's start point; it returns the
	// producer. An error stops the pipeline and ends the run.
	start func() (demoProducer, error)
	// The status line, shown by --progress: unit names what it counts
	// ("changes"), and status says how the source is doing.
	progress string
	stderr   io.Writer
	unit     string
	status   func(now time.Time) string
}

// demoOutcome is how a demo's run ended.
type demoOutcome struct {
	took        time.Duration // from the opening of the source to the end of the drain
	interrupted bool          // by a signal, or by the pipeline's end, before it caught up
}

// run runs the pipeline and the producer until the producer has made its
// changes and the pipeline has committed them all, then drains. A signal
// stops the producer and drains at once; a second signal during the drain
// stops the demo by the default action, and the checkpoint stays at the
// last commit. The pipeline has returned when run returns.
func (d demoRun) run(ctx context.Context) (demoOutcome, error) {
	sigCtx, stopSignals := signal.NotifyContext(ctx, os.Interrupt, syscall.SIGTERM)
	defer stopSignals()
	runCtx, hardStop := context.WithCancel(ctx)
	done := make(chan struct{})
	var runErr error
	go func() {
		defer close(done)
		runErr = d.pipeline.Run(runCtx)
	}()
	// Every return waits for the pipeline: the demo's servers shut down
	// after the source and the sink have closed.
	defer func() { hardStop(); <-done }()

	select {
	case <-d.pipeline.Opened():
	case <-done:
		return demoOutcome{}, runErr
	}
	producer, err := d.start()
	if err != nil {
		return demoOutcome{}, err
	}

	began := time.Now() // once the source is open: the throughput is the pipeline's, not its start-up
	prodCtx, stopProducer := context.WithCancel(sigCtx)
	defer stopProducer()
	prodDone := make(chan error, 1)
	go func() { prodDone <- producer.produce(prodCtx) }()
	// Runs before the pipeline's wait: no return leaves the producer
	// running.
	defer func() {
		if prodDone != nil {
			stopProducer()
			<-prodDone
		}
	}()

	statusCtx, stopStatus := context.WithCancel(ctx)
	statusDone := make(chan struct{})
	go func() {
		defer close(statusDone)
		if showProgress(d.progress, d.stderr) {
			statusLoop(statusCtx, d.stderr, 500*time.Millisecond, d.pipeline, d.unit, d.status)
		}
	}()
	defer func() { stopStatus(); <-statusDone }()

	// Wait for the producer (stopping it if the pipeline ends), then for
	// the pipeline to commit everything it made (or for a signal).
	var prodErr error
	select {
	case prodErr = <-prodDone:
	case <-done:
		stopProducer()
		prodErr = <-prodDone
	}
	prodDone = nil
	interrupted := sigCtx.Err() != nil
	for !interrupted && !producer.caughtUp(d.pipeline.Stats()) {
		select {
		case <-done:
			interrupted = true
		case <-sigCtx.Done():
			interrupted = true
		case <-d.committed:
		}
	}
	if sigCtx.Err() != nil {
		stopSignals() // a second signal stops the demo at once
	}
	dctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	drainErr := d.pipeline.Drain(dctx)
	cancel()
	<-done
	stopStatus()
	<-statusDone
	out := demoOutcome{took: time.Since(began), interrupted: interrupted}
	if prodErr != nil && !errors.Is(prodErr, context.Canceled) {
		return out, prodErr
	}
	if runErr != nil {
		return out, runErr
	}
	return out, drainErr
}

// demoSignal is a demo's pipeline.Observer: it wakes the wait for the
// producer's changes after each commit, and counts what was committed by
// namespace (a NATS message's subject).
type demoSignal struct {
	committed chan struct{}
	mu        sync.Mutex // guards the field below
	byNS      map[string]int64
}

func newDemoSignal() *demoSignal {
	return &demoSignal{committed: make(chan struct{}, 1), byNS: map[string]int64{}}
}

func (s *demoSignal) Polled(int, int)      {}
func (s *demoSignal) Failed(string, error) {}

// Committed implements pipeline.Observer; it never blocks.
func (s *demoSignal) Committed(int, int, time.Duration, cdc.Checkpoint) {
	select {
	case s.committed <- struct{}{}:
	default: // a wake-up is pending already
	}
}

// CommittedNamespaces implements pipeline.NamespaceObserver.
func (s *demoSignal) CommittedNamespaces(counts []pipeline.NamespaceCount) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, c := range counts {
		s.byNS[c.Namespace] += int64(c.Records)
	}
}

// committedIn returns what was committed in namespace ns.
func (s *demoSignal) committedIn(ns string) int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.byNS[ns]
}

// demoCount is one entry of the summary's events by kind.
type demoCount struct {
	kind string
	n    int64
}

// printDemoStreamed prints the summary's first line: after lead (what the
// producer did), how many events the pipeline streamed and how fast, and
// counts, the events by kind.
func printDemoStreamed(w io.Writer, lead, unit string, st pipeline.Stats, took time.Duration, counts []demoCount) {
	fmt.Fprintf(w, "\n%sstreamed %d %s in %s (%.0f %s/s)", lead, st.EventsOut, unit, took.Round(time.Millisecond), float64(st.EventsOut)/took.Seconds(), unit)
	for i, c := range counts {
		sep := " "
		if i == 0 {
			sep = ": "
		}
		fmt.Fprintf(w, "%s%s %d", sep, c.kind, c.n)
	}
	fmt.Fprintln(w)
}

// demoCheck is what a demo's check of its output file found, in the words
// the summary uses.
type demoCheck struct {
	file    string
	held    int64  // how many of the changes the file holds, in order
	made    int64  // how many changes the producer made, over every run
	what    string // the changes, with a %d for made: "the writer's %d changes"
	order   string // the order checked: "in order", "in stream order"
	exact   string // said after order when the file holds them all
	command string // the command that runs the demo again
}

// printDemoCheck prints the check's result, and that the run was
// interrupted if it was.
//
// A run that was not interrupted waited for everything to be committed,
// so a file that holds less is a failed check, not a pause.
func printDemoCheck(w io.Writer, c demoCheck, interrupted bool) error {
	what := fmt.Sprintf(c.what, c.made)
	if c.held == c.made {
		fmt.Fprintf(w, "checked %s: it holds exactly %s, %s%s, each line valid JSON\n", c.file, what, c.order, c.exact)
	} else {
		fmt.Fprintf(w, "checked %s: it holds the first %d of %s, %s; run %s again to resume from the checkpoint\n", c.file, c.held, what, c.order, c.command)
	}
	if interrupted {
		fmt.Fprintf(w, "interrupted: run %s again to resume\n", c.command)
		return nil
	}
	if c.held != c.made {
		return fmt.Errorf("demo output check failed: %s holds %d of %s after a run that was not interrupted", c.file, c.held, what)
	}
	return nil
}
