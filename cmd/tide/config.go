package main

import (
	"bytes"
	"fmt"
	"os"

	"github.com/spf13/cobra"

	"github.com/tide-cdc/tide"
)

// newConfigCmd is `tide config`: questions about pipeline files that need
// no pipeline file.
func newConfigCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "config",
		Short: "Questions about pipeline files: the reference of every key",
		Args:  cobra.NoArgs,
	}
	var out string
	ref := &cobra.Command{
		Use:   "reference [SECTION]",
		Short: "Print every key of a pipeline file, with its type, default and description (Markdown)",
		Long: `Print the configuration reference in Markdown: every key of a pipeline file
and of each registered source and sink, with its type, its default and its
description, taken from the connectors' Config types and doc comments. It is
what docs/config.md holds. With SECTION (pipeline, source.mongo,
sink.postgres, ...), only that section.`,
		Example: "  tide config reference sink.postgres\n  tide config reference -o docs/config.md",
		Args:    cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			section := ""
			if len(args) == 1 {
				section = args[0]
			}
			var b bytes.Buffer
			if err := tide.WriteConfigReference(&b, section); err != nil {
				return err
			}
			if out == "" {
				_, err := cmd.OutOrStdout().Write(b.Bytes())
				return err
			}
			if err := os.WriteFile(out, b.Bytes(), 0o644); err != nil {
				return fmt.Errorf("config reference: %w", err)
			}
			return nil
		},
	}
	ref.Flags().StringVarP(&out, "output", "o", "", "write to this file instead of the standard output")
	cmd.AddCommand(ref)
	return cmd
}
