package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"github.com/tide-cdc/tide/internal/cdc"
	"github.com/tide-cdc/tide/internal/checkpoint"
	"github.com/tide-cdc/tide/internal/encode"
	"github.com/tide-cdc/tide/internal/runtime"
	"github.com/tide-cdc/tide/internal/sink/file"
	"github.com/tide-cdc/tide/internal/source/generate"
)

type demoFlags struct {
	dir      string
	events   int64
	rate     float64
	progress string
}

func newDemoCmd() *cobra.Command {
	var f demoFlags
	cmd := &cobra.Command{
		Use:   "demo",
		Short: "Run a self-contained pipeline on embedded defaults",
		Long: `Run a pipeline that needs nothing installed: the generate source streams
insert events into ./tide-demo/events.jsonl through the full runtime
(ordered parallel encode, fsync on commit, durable checkpoint). It prints a
live status line, then checks the file against what the source produced.
Running it again resumes from the checkpoint and appends the next events.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return runDemo(cmd.Context(), f, cmd.OutOrStdout(), cmd.ErrOrStderr())
		},
	}
	cmd.Flags().StringVar(&f.dir, "dir", "tide-demo", "directory for the output file and the checkpoint")
	cmd.Flags().Int64Var(&f.events, "events", 100000, "events to stream in this run")
	cmd.Flags().Float64Var(&f.rate, "rate", 50000, "events per second (0 = as fast as possible)")
	cmd.Flags().StringVar(&f.progress, "progress", "auto", "live status line: auto (on a terminal), always, never")
	return cmd
}

func runDemo(ctx context.Context, f demoFlags, stdout, stderr io.Writer) error {
	if f.events <= 0 {
		return fmt.Errorf("--events %d: want a positive number", f.events)
	}
	log := slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	const name = "demo"
	store, err := checkpoint.Open(filepath.Join(f.dir, ".tide"), log)
	if err != nil {
		return err
	}
	defer store.Close()

	// Resume where the last demo stopped: the source continues after the
	// checkpointed sequence number and produces f.events more.
	var start int64
	cp, err := store.Load(ctx, name)
	if err != nil {
		return err
	}
	if cp != nil {
		var pos struct {
			Seq int64 `json:"seq"`
		}
		if err := json.Unmarshal(cp.Source, &pos); err != nil {
			return fmt.Errorf("demo checkpoint %s: %w", cp.Source, err)
		}
		start = pos.Seq
	}
	out := filepath.Join(f.dir, "events.jsonl")
	fmt.Fprintf(stdout, "tide demo: streaming %d generated events into %s", f.events, out)
	if start > 0 {
		fmt.Fprintf(stdout, " (resuming after event %d)", start)
	}
	fmt.Fprintln(stdout)

	src := generate.New(generate.Config{Count: start + f.events, Rate: f.rate, PayloadBytes: 100, Logger: log})
	sink := file.New(file.Config{Path: out, Logger: log})
	p := runtime.New(runtime.Config{Name: name, Logger: log}, src, encode.Envelope, sink, store)

	runCtx, stop := signal.NotifyContext(ctx, os.Interrupt, syscall.SIGTERM)
	defer stop()
	began := time.Now()
	done := make(chan struct{})
	var runErr error
	go func() {
		defer close(done)
		runErr = p.Run(runCtx)
	}()
	if showProgress(f.progress, stderr) {
		progressLoop(ctx, done, stderr, p)
	}
	<-done
	took := time.Since(began)
	interrupted := runCtx.Err() != nil && ctx.Err() == nil
	if runErr != nil && !(interrupted && errors.Is(runErr, context.Canceled)) {
		return runErr
	}

	st := p.Stats()
	fmt.Fprintf(stdout, "streamed %d events in %s (%.0f events/s)\n", st.EventsOut, took.Round(time.Millisecond), float64(st.EventsOut)/took.Seconds())
	final, err := store.Load(ctx, name)
	if err != nil {
		return err
	}
	want := int64(0)
	if final != nil {
		var pos struct {
			Seq int64 `json:"seq"`
		}
		if err := json.Unmarshal(final.Source, &pos); err != nil {
			return fmt.Errorf("demo checkpoint %s: %w", final.Source, err)
		}
		want = pos.Seq
	}
	if err := verifyDemoFile(out, want); err != nil {
		return fmt.Errorf("demo output check failed: %w", err)
	}
	fmt.Fprintf(stdout, "checked %s: exactly %d events, seq 1..%d in order, each line valid JSON\n", out, want, want)
	if interrupted {
		fmt.Fprintln(stdout, "interrupted: run tide demo again to resume from the checkpoint")
	}
	return nil
}

// verifyDemoFile checks the demo's output the way a user would: every line
// is a JSON object for the next sequence number, and the file holds exactly
// the committed events.
func verifyDemoFile(path string, want int64) error {
	fh, err := os.Open(path)
	if err != nil {
		return err
	}
	defer fh.Close()
	sc := bufio.NewScanner(fh)
	sc.Buffer(make([]byte, 1<<20), 1<<24)
	var n int64
	for sc.Scan() {
		n++
		var line struct {
			Op  string `json:"_op"`
			Doc struct {
				Seq int64 `json:"seq"`
			} `json:"_full_document"`
		}
		if err := json.Unmarshal(sc.Bytes(), &line); err != nil {
			return fmt.Errorf("line %d: %w", n, err)
		}
		if line.Op != string(cdc.OpInsert) || line.Doc.Seq != n {
			return fmt.Errorf("line %d: got op %q seq %d, want insert seq %d", n, line.Op, line.Doc.Seq, n)
		}
	}
	if err := sc.Err(); err != nil {
		return err
	}
	if n != want {
		return fmt.Errorf("%d lines, but the checkpoint says %d events were committed", n, want)
	}
	return nil
}
