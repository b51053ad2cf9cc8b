package main

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"golang.org/x/term"

	"github.com/tide-cdc/tide/cdc"
	"github.com/tide-cdc/tide/checkpoint"
	"github.com/tide-cdc/tide/internal/config"
	"github.com/tide-cdc/tide/internal/redact"
	mongosink "github.com/tide-cdc/tide/sink/mongo"
	"github.com/tide-cdc/tide/sink/postgres"
	mongosource "github.com/tide-cdc/tide/source/mongo"
)

func newSnapshotCmd(secrets *redact.Set) *cobra.Command {
	var file string
	var yes bool
	cmd := &cobra.Command{
		Use:   "snapshot -f FILE",
		Short: "Make the next run copy the MongoDB collection(s) again and stream on from there",
		Long: `Re-snapshot: after the change history a pipeline needs was lost (its
checkpoint fell out of the oplog window, error 286), write a checkpoint that
makes the next tide run take a fresh start token, copy the collection(s)
again into the same output, and continue streaming from that token.

The output records the re-copy: a line of op "snapshot" without a document,
whose _extra is {"resnapshot": "begin", "gap_after": <cluster time where the
gap began>}, comes before the copied documents, and one with
{"resnapshot": "end"} after them. A file sink appends: the copy follows what
it already holds; a reader that treats the documents between begin and end as
the whole collection (what was not copied again was deleted during the gap)
gets the collection as it is. A PostgreSQL mirror upserts the copied rows and,
at the end line, deletes (or marks deleted) the rows the copy did not find.
With checkpoint: sink the checkpoint row in PostgreSQL is rewritten.

The pipeline must be stopped. It asks for confirmation on a terminal; --yes
skips it.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return rewritePosition(cmd, secrets, file, yes, "re-snapshot", func(prev cdc.Position) (cdc.Position, error) {
				return mongosource.ResnapshotPosition(prev, time.Now())
			})
		},
	}
	cmd.Flags().StringVarP(&file, "file", "f", "", "pipeline YAML file (required)")
	cmd.Flags().BoolVar(&yes, "yes", false, "do not ask for confirmation")
	_ = cmd.MarkFlagRequired("file")
	return cmd
}

// rewritePosition replaces the source position of a stopped MongoDB
// pipeline's checkpoint, keeping its identity and its sink's state, after
// showing the change and, unless yes, asking on the terminal. It writes
// where the pipeline keeps its checkpoint: the data directory, or the
// PostgreSQL sink's table (checkpoint: sink).
func rewritePosition(cmd *cobra.Command, secrets *redact.Set, file string, yes bool, what string, next func(cdc.Position) (cdc.Position, error)) error {
	cfg, err := config.Load(file)
	if err != nil {
		return err
	}
	secrets.Add(cfg.Secrets()...)
	if cfg.Source.Mongo == nil {
		return fmt.Errorf("pipeline %q: %s needs a MongoDB source", cfg.Name, what)
	}
	if cfg.Checkpoint == "sink" && cfg.Sink.Postgres == nil && cfg.Sink.Mongo == nil {
		return fmt.Errorf("checkpoint: sink: the sink of pipeline %q does not keep checkpoints", cfg.Name)
	}
	if !yes {
		in, ok := cmd.InOrStdin().(*os.File)
		if !ok || !term.IsTerminal(int(in.Fd())) {
			return fmt.Errorf("%s rewrites the checkpoint of pipeline %q and needs confirmation, but standard input is not a terminal: run it again with --yes to confirm", what, cfg.Name)
		}
	}
	out := cmd.OutOrStdout()
	change := func(cp *cdc.Checkpoint) (*cdc.Checkpoint, error) {
		if cp == nil || len(cp.Meta) == 0 {
			return nil, fmt.Errorf("pipeline %q has no checkpoint: its first run starts from the source's configured start "+
				"(with a snapshot if snapshot is initial); %s needs a checkpoint written by a run, which records the deployment and collections it belongs to", cfg.Name, what)
		}
		pos, err := next(cp.Source)
		if err != nil {
			return nil, fmt.Errorf("pipeline %q: %w", cfg.Name, err)
		}
		fmt.Fprintf(out, "pipeline %q: %s\n  from: %s\n  to:   %s\n", cfg.Name, what,
			secrets.String(mongosource.DescribePosition(cp.Source)), secrets.String(mongosource.DescribePosition(pos)))
		if !yes {
			ok, err := confirm(cmd.InOrStdin(), out)
			if err != nil {
				return nil, err
			}
			if !ok {
				return nil, errors.New("not confirmed: the checkpoint is unchanged")
			}
		}
		cp.Source = pos
		return cp, nil
	}
	if cfg.Checkpoint == "sink" && cfg.Sink.Mongo != nil {
		c := cfg.Sink.Mongo.Config
		if c.URI == "embedded" {
			return fmt.Errorf("pipeline %q keeps its checkpoint in the embedded server of sink.mongo (uri: embedded), which runs only inside tide run", cfg.Name)
		}
		c.Pipeline = cfg.Name
		if err := mongosink.RewriteCheckpoint(cmd.Context(), c, change); err != nil {
			return err
		}
	} else if cfg.Checkpoint == "sink" {
		c := cfg.Sink.Postgres.Config
		c.Table, c.Pipeline = cfg.PostgresTable(), cfg.Name
		if err := postgres.RewriteCheckpoint(cmd.Context(), c, change); err != nil {
			return err
		}
	} else if err := rewriteDir(cmd, cfg, what, change); err != nil {
		return err
	}
	fmt.Fprintf(out, "checkpoint of pipeline %q written: the next tide run -f %s resumes from it\n", cfg.Name, file)
	return nil
}

// rewriteDir is rewritePosition's change in the data directory's store,
// under its lock.
func rewriteDir(cmd *cobra.Command, cfg *config.Pipeline, what string, change func(*cdc.Checkpoint) (*cdc.Checkpoint, error)) error {
	store, err := checkpoint.Open(cfg.DataDir, slog.New(slog.DiscardHandler))
	if err != nil {
		var inUse *checkpoint.InUseError
		if errors.As(err, &inUse) {
			return fmt.Errorf("%w: stop the pipeline before %s", err, what)
		}
		return err
	}
	defer store.Close()
	cp, err := store.Load(cmd.Context(), cfg.Name)
	if err != nil {
		return err
	}
	next, err := change(cp)
	if err != nil {
		return err
	}
	return store.Save(cmd.Context(), cfg.Name, *next)
}

// confirm asks for "yes".
func confirm(in io.Reader, out io.Writer) (bool, error) {
	fmt.Fprint(out, "Write this checkpoint? Type yes to confirm: ")
	line, err := bufio.NewReader(in).ReadString('\n')
	if err != nil && line == "" {
		return false, fmt.Errorf("read the confirmation: %w", err)
	}
	a := strings.ToLower(strings.TrimSpace(line))
	return a == "yes" || a == "y", nil
}
