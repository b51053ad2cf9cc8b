package main

import (
	"fmt"
	"slices"
	"strings"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"github.com/tide-cdc/tide/deadletter"
	"github.com/tide-cdc/tide/internal/redact"
)

func newDeadLettersCmd(secrets *redact.Set) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "dead-letters",
		Short: "List or replay the changes a pipeline set aside (on_error: dead_letter)",
	}
	var listFile string
	list := &cobra.Command{
		Use:   "list -f FILE",
		Short: "Print the pipeline's dead letters, oldest first",
		Long: `Print the dead letters in the pipeline file's dead_letter store (a file, or
a JetStream subject), or in the sink's own (PostgreSQL's and MongoDB's
tide_dead_letters, Kafka's topic <pipeline>.dlq), one a line: id, time,
stage, namespace, position and error.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			spec, err := readPipeline(listFile, secrets)
			if err != nil {
				return err
			}
			letters, err := spec.DeadLetters(cmd.Context())
			if err != nil {
				return secrets.Error(err)
			}
			if len(letters) == 0 {
				fmt.Fprintf(cmd.OutOrStdout(), "pipeline %q has no dead letters\n", spec.Name)
				return nil
			}
			w := tabwriter.NewWriter(cmd.OutOrStdout(), 0, 4, 2, ' ', 0)
			fmt.Fprintln(w, "ID\tTIME\tSTAGE\tNAMESPACE\tPOSITION\tERROR")
			for _, l := range letters {
				fmt.Fprintf(w, "%s\t%s\t%s\t%s\t%s\t%s\n", l.ID, l.Time.Format("2006-01-02T15:04:05.000Z"), l.Stage, l.Namespace,
					l.Position, secrets.String(strings.ReplaceAll(l.Error, "\n", " ")))
			}
			return w.Flush()
		},
	}
	list.Flags().StringVarP(&listFile, "file", "f", "", "pipeline YAML file (required)")
	_ = list.MarkFlagRequired("file")

	var replayFile string
	var ids []string
	replay := &cobra.Command{
		Use:   "replay -f FILE [--id ID ...]",
		Short: "Send dead letters through the pipeline's transforms and sink again",
		Long: `Send the pipeline's dead letters (all, or those named with --id) through its
transforms, encoding and sink again, after a fix: in one batch, stopping at
the first that fails again. The pipeline must be stopped and have a
checkpoint, which stays where it is. The letters stay in the store.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			spec, err := readPipeline(replayFile, secrets)
			if err != nil {
				return err
			}
			letters, err := spec.DeadLetters(cmd.Context())
			if err != nil {
				return secrets.Error(err)
			}
			if len(ids) > 0 {
				var picked []deadletter.Letter
				for _, id := range ids {
					i := slices.IndexFunc(letters, func(l deadletter.Letter) bool { return l.ID == id })
					if i < 0 {
						return fmt.Errorf("no dead letter with id %s", id)
					}
					picked = append(picked, letters[i])
				}
				letters = picked
			}
			p, err := spec.BuildReplay(cmd.Context(), letters)
			if err != nil {
				return err
			}
			if err := p.Run(cmd.Context()); err != nil {
				return err
			}
			fmt.Fprintf(cmd.OutOrStdout(), "replayed %d dead letters into sink.%s\n", len(letters), spec.Sink.Key)
			return nil
		},
	}
	replay.Flags().StringVarP(&replayFile, "file", "f", "", "pipeline YAML file (required)")
	replay.Flags().StringSliceVar(&ids, "id", nil, "replay only the dead letters with these ids (repeatable)")
	_ = replay.MarkFlagRequired("file")

	cmd.AddCommand(list, replay)
	return cmd
}
