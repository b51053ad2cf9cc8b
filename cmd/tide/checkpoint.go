package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"

	"github.com/spf13/cobra"

	"github.com/tide-cdc/tide"
	"github.com/tide-cdc/tide/cdc"
	"github.com/tide-cdc/tide/checkpoint"
	"github.com/tide-cdc/tide/internal/config"
	"github.com/tide-cdc/tide/internal/redact"
)

func newValidateCmd(secrets *redact.Set) *cobra.Command {
	var file string
	cmd := &cobra.Command{
		Use:   "validate -f FILE",
		Short: "Check a pipeline file: syntax, keys, values and references",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			cfg, err := config.Load(file)
			if err != nil {
				return err
			}
			secrets.Add(cfg.Secrets()...)
			for _, w := range cfg.Warnings() {
				fmt.Fprintf(cmd.ErrOrStderr(), "%s: warning: %s\n", file, secrets.String(w))
			}
			fmt.Fprintf(cmd.OutOrStdout(), "%s: pipeline %q is valid\n", file, cfg.Name)
			return nil
		},
	}
	cmd.Flags().StringVarP(&file, "file", "f", "", "pipeline YAML file (required)")
	_ = cmd.MarkFlagRequired("file")
	return cmd
}

func newCheckpointCmd(secrets *redact.Set) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "checkpoint",
		Short: "Inspect or reset a pipeline's checkpoint",
	}
	var file string
	show := &cobra.Command{
		Use:   "show -f FILE",
		Short: "Print the pipeline's checkpoint as JSON",
		Long: `Print the pipeline's checkpoint as JSON. It takes no lock, so it works while
the pipeline runs; the next commit may overtake what it prints.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			text, err := config.ReadFile(file)
			if err != nil {
				return err
			}
			cfg, err := config.ParseNamed(file, text, os.LookupEnv)
			if err != nil {
				return err
			}
			secrets.Add(cfg.Secrets()...)
			cp, err := tide.LoadCheckpoint(cmd.Context(), text, tide.Options{File: file})
			var corrupt *checkpoint.CorruptError
			if errors.As(err, &corrupt) {
				raw, rerr := tide.RawCheckpoint(cmd.Context(), text, tide.Options{File: file})
				if rerr == nil && raw != nil {
					fmt.Fprintf(cmd.OutOrStdout(), "%s\n", secrets.String(string(raw)))
				}
				return err
			}
			if err != nil {
				return err
			}
			if cp == nil {
				fmt.Fprintf(cmd.OutOrStdout(), "pipeline %q has no checkpoint: the next run starts fresh\n", cfg.Name)
				return nil
			}
			out, err := json.MarshalIndent(showable(cfg.Name, cp), "", "  ")
			if err != nil {
				return err
			}
			fmt.Fprintf(cmd.OutOrStdout(), "%s\n", secrets.String(string(out)))
			return nil
		},
	}
	show.Flags().StringVarP(&file, "file", "f", "", "pipeline YAML file (required)")
	_ = show.MarkFlagRequired("file")

	var resetFile string
	var yes bool
	reset := &cobra.Command{
		Use:   "reset -f FILE --yes",
		Short: "Delete the pipeline's checkpoint, so that the next run starts fresh",
		Long: `Delete the pipeline's checkpoint. The next run starts as a fresh pipeline:
from the source's configured start, not from where the last run stopped.
A file sink's output should be moved away first, or the fresh run refuses
to append to it.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if !yes {
				return errors.New("checkpoint reset deletes the pipeline's progress; run it again with --yes to confirm")
			}
			cfg, err := config.Load(resetFile)
			if err != nil {
				return err
			}
			secrets.Add(cfg.Secrets()...)
			if cfg.Checkpoint == "sink" {
				return fmt.Errorf("pipeline %q keeps its checkpoint in the sink's own table, in the same transaction as its rows; "+
					"to start over, delete the row yourself (DELETE FROM tide_checkpoints WHERE pipeline = '%s') together with the rows it covers", cfg.Name, cfg.Name)
			}
			if cfg.Checkpoint == "nats_kv" {
				text, err := config.ReadFile(resetFile)
				if err != nil {
					return err
				}
				if err := tide.ResetCheckpoint(cmd.Context(), text, tide.Options{File: resetFile}); err != nil {
					return err
				}
				fmt.Fprintf(cmd.OutOrStdout(), "checkpoint of pipeline %q reset in NATS KV bucket %q\n", cfg.Name, cfg.CheckpointStore.NATSKV.Bucket)
				return nil
			}
			store, err := checkpoint.Open(cfg.DataDir, slog.New(slog.DiscardHandler))
			if err != nil {
				return err
			}
			defer store.Close()
			if err := store.Reset(cmd.Context(), cfg.Name); err != nil {
				return err
			}
			fmt.Fprintf(cmd.OutOrStdout(), "checkpoint of pipeline %q reset\n", cfg.Name)
			return nil
		},
	}
	reset.Flags().StringVarP(&resetFile, "file", "f", "", "pipeline YAML file (required)")
	reset.Flags().BoolVar(&yes, "yes", false, "confirm the reset")
	_ = reset.MarkFlagRequired("file")

	cmd.AddCommand(show, reset)
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
