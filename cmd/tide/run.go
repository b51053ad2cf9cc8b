package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/spf13/cobra"
	"golang.org/x/sync/errgroup"
	"golang.org/x/term"

	"github.com/tide-cdc/tide"
	"github.com/tide-cdc/tide/internal/metrics"
	"github.com/tide-cdc/tide/internal/redact"
	"github.com/tide-cdc/tide/internal/status"
)

type runFlags struct {
	file        string
	httpAddr    string
	metricsAddr string // the old name of httpAddr
	authFile    string
	insecure    bool // --http-insecure
	logLevel    string
	logFormat   string
	drainGrace  time.Duration
	progress    string
}

func newRunCmd(secrets *redact.Set) *cobra.Command {
	var f runFlags
	cmd := &cobra.Command{
		Use:   "run FILE | run -f FILE",
		Short: "Run a pipeline until its source ends or a signal arrives",
		Long: `Run the pipeline described by a YAML file. With a finite source (generate with
a count) it exits 0 once every event is committed; otherwise it runs until
SIGINT or SIGTERM, then drains: the batch in flight is committed and
checkpointed, and both ends are closed. A second signal exits at once; the
checkpoint stays at the last commit.

Exit codes: 0 done, 1 an error (a drain that outlived --drain-timeout
included), 3 the collection was dropped or renamed under the pipeline,
130 a second signal.`,
		Args: cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			switch {
			case len(args) == 1 && f.file != "" && args[0] != f.file:
				return fmt.Errorf("run: the pipeline file is given twice, as %s and as -f %s: give one", args[0], f.file)
			case len(args) == 1:
				f.file = args[0]
			case f.file == "":
				return errors.New("run: name the pipeline file: tide run FILE (or -f FILE)")
			}
			return runPipeline(cmd.Context(), f, cmd.ErrOrStderr(), secrets)
		},
	}
	cmd.Flags().StringVarP(&f.file, "file", "f", "", "pipeline YAML file (or give it as the argument)")
	cmd.Flags().StringVar(&f.httpAddr, "http-addr", "", "serve the status page (/), /api/status and /metrics on this address (for example 127.0.0.1:9464)")
	cmd.Flags().StringVar(&f.metricsAddr, "metrics-addr", "", "the same as --http-addr (its former name)")
	cmd.Flags().StringVar(&f.authFile, "http-auth-file", "", "require basic auth on --http-addr: a file of one user:password (or user:bcrypt-hash) line; needed off loopback")
	cmd.Flags().BoolVar(&f.insecure, "http-insecure", false, "allow --http-addr off loopback without --http-auth-file, open to anyone who reaches it")
	cmd.Flags().StringVar(&f.logLevel, "log-level", "info", "log level: debug, info, warn, error")
	cmd.Flags().StringVar(&f.logFormat, "log-format", "text", "log format: text or json")
	cmd.Flags().DurationVar(&f.drainGrace, "drain-timeout", 30*time.Second, "how long a drain may take before tide stops hard")
	cmd.Flags().StringVar(&f.progress, "progress", "auto", "one-line progress summary: auto (on a terminal), always, never")
	return cmd
}

func newLogger(w io.Writer, level, format string) (*slog.Logger, error) {
	var lv slog.Level
	if err := lv.UnmarshalText([]byte(level)); err != nil {
		return nil, fmt.Errorf("--log-level %q: want debug, info, warn or error", level)
	}
	opts := &slog.HandlerOptions{Level: lv}
	switch format {
	case "text":
		return slog.New(slog.NewTextHandler(w, opts)), nil
	case "json":
		return slog.New(slog.NewJSONHandler(w, opts)), nil
	}
	return nil, fmt.Errorf("--log-format %q: want text or json", format)
}

func runPipeline(ctx context.Context, f runFlags, stderr io.Writer, secrets *redact.Set) error {
	log, err := newLogger(stderr, f.logLevel, f.logFormat)
	if err != nil {
		return err
	}
	log = redact.Logger(log, secrets)
	reg := metrics.NewRegistry()
	bars := terminal(os.Stderr)
	if showProgress(f.progress, stderr) {
		bars = nil // the status line draws the snapshot's bars itself
	}
	tracker := status.NewTracker()
	spec, err := tide.ParseFile(f.file, tide.Options{Logger: log, Metrics: reg, Observer: tracker, Progress: bars})
	if err != nil {
		return err
	}
	secrets.Add(spec.Secrets()...)
	for _, w := range spec.Warnings() {
		log.Warn("pipeline file: "+w, "file", f.file)
	}
	addr, err := f.statusAddr()
	if err != nil {
		return err
	}
	// The status server is bound before the pipeline is built, so that a
	// refused address (off loopback without --http-auth-file or
	// --http-insecure) or a port in use stops tide before it takes the
	// data directory.
	if err := status.CheckBind(addr, f.authFile, f.insecure); err != nil {
		return err
	}
	var srv *status.Server
	if addr != "" {
		if srv, err = status.Listen(status.Config{Addr: addr, AuthFile: f.authFile, Insecure: f.insecure, Metrics: reg, Logger: log}); err != nil {
			return err
		}
		defer srv.Close() // after Run, a no-op
	}
	p, err := spec.Build(ctx)
	if err != nil {
		return err
	}
	defer p.Close() // a no-op once Run has returned: Run releases the data directory and the embedded server
	if srv == nil {
		// An address a killed run left behind names no pipeline now.
		removeHTTPAddr(spec.DataDir, "")
	} else {
		// tide snapshot --collection finds the running pipeline here.
		if err := writeHTTPAddr(spec.DataDir, srv.Addr()); err != nil {
			log.Warn("cannot record the HTTP address in the data directory: tide snapshot needs --http-addr to reach this pipeline", "err", err)
		} else {
			defer removeHTTPAddr(spec.DataDir, srv.Addr())
		}
	}
	log = log.With("pipeline", p.Name)
	tracker.Attach(p.Name, p, p.Source, p.Redact)

	// First signal: drain. Second signal: stop at once; the checkpoint
	// already names only committed events, so nothing is lost.
	sigs := make(chan os.Signal, 2)
	signal.Notify(sigs, os.Interrupt, syscall.SIGTERM)
	defer signal.Stop(sigs)

	runCtx, abort := context.WithCancel(ctx)
	defer abort()

	g, gctx := errgroup.WithContext(runCtx)
	done := make(chan struct{})
	g.Go(func() error {
		defer close(done)
		return p.Run(runCtx)
	})
	if srv != nil {
		srv.Add(tracker)
		log.Info("serving metrics and the status page", "addr", srv.URL()+"metrics", "page", srv.URL(), "api", srv.URL()+"api/status")
		g.Go(func() error {
			mctx, cancel := context.WithCancel(gctx)
			defer cancel()
			go func() { // ends when the pipeline does or the group fails
				select {
				case <-done:
				case <-mctx.Done():
				}
				cancel()
			}()
			return srv.Run(mctx)
		})
	}
	if showProgress(f.progress, stderr) {
		g.Go(func() error {
			progressLoop(gctx, done, stderr, p)
			return nil
		})
	}
	// The group is waited for here, or, after a second signal, for at
	// most hardStopWait: waited is closed once g.Wait has returned.
	var groupErr error
	waited := make(chan struct{})
	go func() {
		defer close(waited)
		groupErr = g.Wait()
	}()

	drainTimedOut := false
	select {
	case <-waited:
	case sig := <-sigs:
		log.Info("draining", "signal", sig.String(), "timeout", f.drainGrace.String())
		dctx, cancel := context.WithTimeout(context.Background(), f.drainGrace)
		defer cancel()
		drainErr := make(chan error, 1)
		go func() { drainErr <- p.Drain(dctx) }() // returns when Run does or dctx ends
		select {
		case err := <-drainErr:
			if err != nil && !errors.Is(err, context.Canceled) {
				log.Warn("drain did not finish; stopping", "err", err)
				drainTimedOut = dctx.Err() != nil
				abort()
			}
			<-waited
		case <-waited:
		case sig := <-sigs:
			// A hard stop, returned through Main so that its defers run.
			// Cancelling makes Run close both ends and release the data
			// directory; a sink stuck past hardStopWait is left to the
			// exit. Nothing is lost either way: every commit was durable
			// when it was checkpointed, a file sink truncates what follows
			// its checkpoint on the next run, and the kernel drops the
			// data directory's lock with the process.
			log.Warn("second signal: stopping at once; the checkpoint stays at the last commit", "signal", sig.String())
			abort()
			select {
			case <-waited:
			case <-time.After(hardStopWait):
			}
			return &exitError{code: exitSecondSignal, err: errors.New("stopped by a second signal; the checkpoint stays at the last commit")}
		}
	}
	err = groupErr
	st := p.Stats()
	log.Info("pipeline stopped", "state", p.State().String(), "events", st.EventsOut, "batches", st.Batches)
	switch {
	case errors.Is(err, tide.ErrInvalidated):
		return &exitError{code: exitInvalidated, err: err}
	case drainTimedOut:
		timedOut := fmt.Errorf("drain did not finish within --drain-timeout %s: stopped hard; "+
			"the checkpoint stays at the last commit, so what was in flight is read again on the next run", f.drainGrace)
		if err != nil && !errors.Is(err, context.Canceled) {
			return fmt.Errorf("%w: %w", timedOut, err)
		}
		return timedOut
	case err != nil && !errors.Is(err, context.Canceled):
		return err
	}
	return nil
}

// statusAddr is --http-addr, or its former name --metrics-addr.
func (f runFlags) statusAddr() (string, error) {
	if f.httpAddr != "" && f.metricsAddr != "" && f.httpAddr != f.metricsAddr {
		return "", fmt.Errorf("--http-addr %s and --metrics-addr %s: --metrics-addr is the former name of --http-addr; give one", f.httpAddr, f.metricsAddr)
	}
	if f.httpAddr != "" {
		return f.httpAddr, nil
	}
	return f.metricsAddr, nil
}

// hardStopWait bounds how long a second signal waits for the pipeline to
// close its ends before tide exits anyway.
const hardStopWait = time.Second

// terminal returns f if it is a terminal, for progress bars, else nil.
func terminal(f *os.File) io.Writer {
	if term.IsTerminal(int(f.Fd())) {
		return f
	}
	return nil
}
