package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/spf13/cobra"

	"github.com/tide-cdc/tide"
	"github.com/tide-cdc/tide/cdc"
	"github.com/tide-cdc/tide/checkpoint"
	"github.com/tide-cdc/tide/internal/redact"
)

func newValidateCmd(secrets *redact.Set) *cobra.Command {
	var file string
	cmd := &cobra.Command{
		Use:   "validate -f FILE",
		Short: "Check a pipeline file: syntax, keys, values and references",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			spec, err := readPipeline(file, secrets)
			if err != nil {
				return err
			}
			for _, w := range spec.Warnings() {
				fmt.Fprintf(cmd.ErrOrStderr(), "%s: warning: %s\n", file, secrets.String(w))
			}
			fmt.Fprintf(cmd.OutOrStdout(), "%s: pipeline %q is valid\n", file, spec.Name)
			showLayout(cmd, file, spec, secrets)
			return nil
		},
	}
	cmd.Flags().StringVarP(&file, "file", "f", "", "pipeline YAML file (required)")
	_ = cmd.MarkFlagRequired("file")
	return cmd
}

// layouter is a sink Config that can say how it would write what it
// finds at the destination (sink.postgres: each table's columns).
type layouter interface {
	Layout(ctx context.Context) (string, error)
}

// showLayout prints the sink's layout of what exists, if it has one to
// show. The file is valid without it: a destination that cannot be
// reached now is noted, not an error.
func showLayout(cmd *cobra.Command, file string, spec *tide.Spec, secrets *redact.Set) {
	l, ok := spec.Sink.Config.(layouter)
	if !ok {
		return
	}
	ctx, cancel := context.WithTimeout(cmd.Context(), 5*time.Second)
	defer cancel()
	text, err := l.Layout(ctx)
	if err != nil {
		fmt.Fprintf(cmd.ErrOrStderr(), "%s: sink.%s layout not shown: %s\n", file, spec.Sink.Key, secrets.String(err.Error()))
		return
	}
	fmt.Fprint(cmd.OutOrStdout(), secrets.String(text))
}

// withCheckpoints runs f with the store of the pipeline file's checkpoint.
func withCheckpoints(cmd *cobra.Command, file string, secrets *redact.Set, f func(*tide.Spec, tide.Checkpoints) error) error {
	spec, err := readPipeline(file, secrets)
	if err != nil {
		return err
	}
	store, err := spec.Checkpoints(cmd.Context())
	if err != nil {
		return err
	}
	defer store.Close()
	return f(spec, store)
}

func newCheckpointCmd(secrets *redact.Set) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "checkpoint",
		Short: "Inspect, reset or set a pipeline's checkpoint",
	}
	var file string
	show := &cobra.Command{
		Use:   "show -f FILE",
		Short: "Print the pipeline's checkpoint as JSON",
		Long: `Print the pipeline's checkpoint as JSON, from wherever it lives: the data
directory, NATS KV, or the sink's own table. It takes no lock, so it works
while the pipeline runs; the next commit may overtake what it prints. (A
checkpoint in the embedded server of sink.mongo with uri: embedded is read
by starting that server, so that pipeline must be stopped.)`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return withCheckpoints(cmd, file, secrets, func(spec *tide.Spec, store tide.Checkpoints) error {
				cp, err := store.Load(cmd.Context())
				var corrupt *checkpoint.CorruptError
				if errors.As(err, &corrupt) {
					raw, rerr := store.Raw(cmd.Context())
					if rerr == nil && raw != nil {
						fmt.Fprintf(cmd.OutOrStdout(), "%s\n", secrets.String(string(raw)))
					}
					return err
				}
				if err != nil {
					return err
				}
				if cp == nil {
					fmt.Fprintf(cmd.OutOrStdout(), "pipeline %q has no checkpoint: the next run starts fresh\n", spec.Name)
					return nil
				}
				out, err := json.MarshalIndent(showable(spec.Name, cp), "", "  ")
				if err != nil {
					return err
				}
				fmt.Fprintf(cmd.OutOrStdout(), "%s\n", secrets.String(string(out)))
				return nil
			})
		},
	}
	show.Flags().StringVarP(&file, "file", "f", "", "pipeline YAML file (required)")
	_ = show.MarkFlagRequired("file")

	var resetFile string
	var yes bool
	reset := &cobra.Command{
		Use:   "reset -f FILE --yes",
		Short: "Delete the pipeline's checkpoint, so that the next run starts fresh",
		Long: `Delete the pipeline's checkpoint, wherever it lives. The next run starts as a
fresh pipeline: from the source's configured start, not from where the last
run stopped. A file sink's output should be moved away first, or the fresh
run refuses to append to it. With checkpoint: sink the rows or documents
already written stay: a mirror converges again as the next run replays,
an append table gets those events a second time.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if !yes {
				return errors.New("checkpoint reset deletes the pipeline's progress; run it again with --yes to confirm")
			}
			return withCheckpoints(cmd, resetFile, secrets, func(spec *tide.Spec, store tide.Checkpoints) error {
				if err := store.Reset(cmd.Context()); err != nil {
					return err
				}
				fmt.Fprintf(cmd.OutOrStdout(), "checkpoint of pipeline %q reset in %s\n", spec.Name, store.Where())
				return nil
			})
		},
	}
	reset.Flags().StringVarP(&resetFile, "file", "f", "", "pipeline YAML file (required)")
	reset.Flags().BoolVar(&yes, "yes", false, "confirm the reset")
	_ = reset.MarkFlagRequired("file")

	var setFile, clusterTime, resumeToken string
	var setYes bool
	set := &cobra.Command{
		Use:   "set -f FILE (--cluster-time T | --resume-token JSON) [--yes]",
		Short: "Move a stopped MongoDB pipeline's checkpoint to a chosen point",
		Long: `Write a checkpoint at an operator-chosen point of the change history, keeping
the checkpoint's identity and the sink's state: the next run resumes there.

--cluster-time T resumes with the first change after T (clusterTime > T).
T is Timestamp(sec, inc) or sec.inc for an exact cluster time, or an RFC 3339
time in whole seconds (2026-12-02T01:20:00Z), which stands for
Timestamp(sec, 0): the run then starts with the first change of that second.
--resume-token JSON resumes after the change event whose _id is JSON.

The next run checks the point against the server: a cluster time older than
the oldest oplog entry fails with 286 (history lost), a time in the future is
refused. Changes between the old checkpoint and the new point are skipped,
or delivered again if the point is earlier. The checkpoint is written where it
lives: the data directory, NATS KV, or the sink's own table (checkpoint:
sink). The pipeline must be stopped; it asks for confirmation on a terminal,
--yes skips it.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			var next func(tide.Repositioner, cdc.Position) (cdc.Position, error)
			switch {
			case clusterTime != "" && resumeToken != "":
				return errors.New("checkpoint set: give --cluster-time or --resume-token, not both")
			case clusterTime != "":
				next = func(r tide.Repositioner, prev cdc.Position) (cdc.Position, error) {
					p, err := r.PositionAfterClusterTime(prev, clusterTime)
					if err != nil {
						return nil, fmt.Errorf("--cluster-time: %w", err)
					}
					return p, nil
				}
			case resumeToken != "":
				next = func(r tide.Repositioner, prev cdc.Position) (cdc.Position, error) {
					p, err := r.PositionAfterEvent(prev, resumeToken)
					if err != nil {
						return nil, fmt.Errorf("--resume-token: %w", err)
					}
					return p, nil
				}
			default:
				return errors.New("checkpoint set: give --cluster-time T or --resume-token JSON")
			}
			return rewritePosition(cmd, secrets, setFile, setYes, "checkpoint set", next)
		},
	}
	set.Flags().StringVarP(&setFile, "file", "f", "", "pipeline YAML file (required)")
	set.Flags().StringVar(&clusterTime, "cluster-time", "", "resume after this cluster time: Timestamp(sec, inc), sec.inc, or RFC 3339 in whole seconds")
	set.Flags().StringVar(&resumeToken, "resume-token", "", `resume after the event with this resume token, e.g. {"_data": "8265..."}`)
	set.Flags().BoolVar(&setYes, "yes", false, "do not ask for confirmation")
	_ = set.MarkFlagRequired("file")

	cmd.AddCommand(show, reset, set)
	return cmd
}

// showable renders a checkpoint for people: positions and sink state are
// JSON text, so they are embedded as JSON rather than as byte strings.
func showable(name string, cp *cdc.Checkpoint) map[string]any {
	raw := func(b []byte) any {
		if b == nil {
			return nil
		}
		if json.Valid(b) {
			return json.RawMessage(b)
		}
		return string(b)
	}
	return map[string]any{
		"pipeline": name,
		"source":   raw(cp.Source),
		"meta":     cp.Meta,
		"sink":     raw(cp.Sink),
	}
}
