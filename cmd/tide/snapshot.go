package main

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"golang.org/x/term"

	"github.com/tide-cdc/tide"
	"github.com/tide-cdc/tide/cdc"
	"github.com/tide-cdc/tide/internal/redact"
)

func newSnapshotCmd(secrets *redact.Set) *cobra.Command {
	var file string
	var yes bool
	var inc snapshotFlags
	cmd := &cobra.Command{
		Use:   "snapshot -f FILE [--collection db.coll ... [--filter JSON] [--chunk N]]",
		Short: "Copy MongoDB collections again: chosen ones while the pipeline runs, or all of them on the next run",
		Long: `With --collection: an incremental snapshot. The named collections (or the
documents of them that --filter matches, a query in relaxed Extended JSON) are
copied again, --chunk documents at a time in _id order, while the pipeline goes
on streaming: their documents reach the sink as events of op "snapshot", and no
snapshot row of a document ever follows a newer change of it. The request goes
to the running pipeline through its HTTP address (--http-addr, or the one tide
run --http-addr recorded in its data directory): POST /api/snapshots. With the
pipeline stopped, it is recorded in the checkpoint and the next tide run
carries it out. A collection that a snapshot not yet finished copies is
refused: cancel that one first (DELETE /api/snapshots/ID).

Without --collection: re-snapshot everything. After the change history a pipeline needs was lost (its
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
The checkpoint is rewritten where it lives, the sink's own table included.

The pipeline must be stopped. It asks for confirmation on a terminal; --yes
skips it.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if len(inc.collections) > 0 {
				return requestSnapshot(cmd, secrets, file, inc)
			}
			if inc.filter != "" || inc.chunk != 0 {
				return errors.New("--filter and --chunk need --collection: name the collections to copy (without --collection, tide snapshot re-copies everything on the next run)")
			}
			return rewritePosition(cmd, secrets, file, yes, "re-snapshot", func(r tide.Repositioner, prev cdc.Position) (cdc.Position, error) {
				return r.PositionForResnapshot(prev, time.Now())
			})
		},
	}
	cmd.Flags().StringVarP(&file, "file", "f", "", "pipeline YAML file (required)")
	cmd.Flags().BoolVar(&yes, "yes", false, "do not ask for confirmation")
	cmd.Flags().StringArrayVar(&inc.collections, "collection", nil, `copy this collection ("db.coll") while the pipeline runs; repeat for more`)
	cmd.Flags().StringVar(&inc.filter, "filter", "", `with --collection: copy only the documents this query matches (relaxed Extended JSON, such as '{"status": "open"}')`)
	cmd.Flags().IntVar(&inc.chunk, "chunk", 0, "with --collection: documents per chunk (default 1000)")
	cmd.Flags().StringVar(&inc.httpAddr, "http-addr", "", "with --collection: the running pipeline's --http-addr (default: the address it recorded in its data directory)")
	cmd.Flags().StringVar(&inc.authFile, "http-auth-file", "", "with --collection: a file of one user:password line, for a pipeline that serves HTTP with --http-auth-file")
	_ = cmd.MarkFlagRequired("file")
	return cmd
}

// rewritePosition replaces the source position of a stopped pipeline's
// checkpoint, keeping its identity and its sink's state, after showing the
// change and, unless yes, asking on the terminal. It writes where the
// pipeline keeps its checkpoint (Spec.Checkpoints), under that store's
// lock.
func rewritePosition(cmd *cobra.Command, secrets *redact.Set, file string, yes bool, what string, next func(tide.Repositioner, cdc.Position) (cdc.Position, error)) error {
	spec, err := readPipeline(file, secrets)
	if err != nil {
		return err
	}
	r, ok := spec.Source.Config.(tide.Repositioner)
	if !ok {
		return fmt.Errorf("pipeline %q: %s needs a source whose positions can be moved (source.mongo); source.%s has none", spec.Name, what, spec.Source.Key)
	}
	if !yes {
		in, ok := cmd.InOrStdin().(*os.File)
		if !ok || !term.IsTerminal(int(in.Fd())) {
			return fmt.Errorf("%s rewrites the checkpoint of pipeline %q and needs confirmation, but standard input is not a terminal: run it again with --yes to confirm", what, spec.Name)
		}
	}
	out := cmd.OutOrStdout()
	change := func(cp *cdc.Checkpoint) (*cdc.Checkpoint, error) {
		if cp == nil || len(cp.Meta) == 0 {
			return nil, fmt.Errorf("pipeline %q has no checkpoint: its first run starts from the source's configured start "+
				"(with a snapshot if snapshot is initial); %s needs a checkpoint written by a run, which records the deployment and collections it belongs to", spec.Name, what)
		}
		pos, err := next(r, cp.Source)
		if err != nil {
			return nil, fmt.Errorf("pipeline %q: %w", spec.Name, err)
		}
		fmt.Fprintf(out, "pipeline %q: %s\n  from: %s\n  to:   %s\n", spec.Name, what,
			secrets.String(r.DescribePosition(cp.Source)), secrets.String(r.DescribePosition(pos)))
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
	store, err := spec.Checkpoints(cmd.Context())
	if err != nil {
		return err
	}
	defer store.Close()
	if err := store.Rewrite(cmd.Context(), change); err != nil {
		return fmt.Errorf("%w (before %s, stop the pipeline)", err, what)
	}
	fmt.Fprintf(out, "checkpoint of pipeline %q written in %s: the next tide run %s resumes from it\n", spec.Name, store.Where(), file)
	return nil
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
