package main

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/spf13/cobra"

	"github.com/tide-cdc/tide"
	"github.com/tide-cdc/tide/internal/redact"
	"github.com/tide-cdc/tide/internal/worker"
)

func newPipelineCmd(secrets *redact.Set) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "pipeline",
		Short: "Store pipeline files in NATS for a group of workers",
	}
	var natsURL, file string
	var replicas int
	withKV := func(cmd *cobra.Command, fn func(context.Context, jetstream.KeyValue) error) error {
		ctx, cancel := context.WithTimeout(cmd.Context(), 10*time.Second)
		defer cancel()
		nc, js, err := connectNATS(natsURL, "tide pipeline")
		if err != nil {
			return err
		}
		defer nc.Close()
		kv, err := worker.OpenPipelines(ctx, js, replicas)
		if err != nil {
			return err
		}
		return fn(ctx, kv)
	}
	put := &cobra.Command{
		Use:   "put -f FILE --nats URL",
		Short: "Validate a pipeline file and store it in the tide_pipelines bucket, replacing one of the same name",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			text, err := tide.ReadFile(file)
			if err != nil {
				return err
			}
			spec, err := tide.Parse(text, tide.Options{File: file})
			if err != nil {
				return err
			}
			secrets.Add(spec.Secrets()...)
			if !worker.ValidKey(spec.Name) {
				return fmt.Errorf("%s: name %q: a pipeline run by workers needs a name of letters, digits, '-', '_', '=' and inner '.'", file, spec.Name)
			}
			return withKV(cmd, func(ctx context.Context, kv jetstream.KeyValue) error {
				rev, err := kv.Put(ctx, spec.Name, text)
				if err != nil {
					return fmt.Errorf("store pipeline %q: %w", spec.Name, err)
				}
				fmt.Fprintf(cmd.OutOrStdout(), "stored pipeline %s (revision %d)\n", spec.Name, rev)
				return nil
			})
		},
	}
	put.Flags().StringVarP(&file, "file", "f", "", "pipeline YAML file (required)")
	_ = put.MarkFlagRequired("file")
	list := &cobra.Command{
		Use:   "list --nats URL",
		Short: "List the pipelines stored in the tide_pipelines bucket",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return withKV(cmd, func(ctx context.Context, kv jetstream.KeyValue) error {
				keys, err := kv.Keys(ctx)
				if errors.Is(err, jetstream.ErrNoKeysFound) {
					return nil
				}
				if err != nil {
					return fmt.Errorf("list pipelines: %w", err)
				}
				for _, k := range keys {
					fmt.Fprintln(cmd.OutOrStdout(), k)
				}
				return nil
			})
		},
	}
	rm := &cobra.Command{
		Use:   "rm NAME --nats URL",
		Short: "Remove a stored pipeline; the worker running it drains it and stops",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return withKV(cmd, func(ctx context.Context, kv jetstream.KeyValue) error {
				if _, err := kv.Get(ctx, args[0]); errors.Is(err, jetstream.ErrKeyNotFound) {
					return fmt.Errorf("pipeline %q is not stored in %s", args[0], worker.PipelinesBucket)
				}
				if err := kv.Delete(ctx, args[0]); err != nil {
					return fmt.Errorf("remove pipeline %q: %w", args[0], err)
				}
				return nil
			})
		},
	}
	for _, c := range []*cobra.Command{put, list, rm} {
		c.Flags().StringVar(&natsURL, "nats", "", "NATS server URL(s), comma-separated (required)")
		c.Flags().IntVar(&replicas, "replicas", 1, "replicas of the tide_pipelines bucket, if this command creates it")
		_ = c.MarkFlagRequired("nats")
		cmd.AddCommand(c)
	}
	return cmd
}
