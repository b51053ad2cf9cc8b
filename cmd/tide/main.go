// Command tide streams changes from MongoDB change streams and NATS into
// JSON-lines files, NATS JetStream, PostgreSQL and stdout, and serves an
// embedded MongoDB-compatible server.
//
// main parses flags, handles signals and exit codes, and prints; package
// tide (the module root) builds pipelines from their files.
package main

import (
	"errors"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/spf13/cobra"

	"github.com/tide-cdc/tide"
	"github.com/tide-cdc/tide/internal/redact"
)

// What `tide version` prints about a release build; `make release` sets
// them with -ldflags "-X main.Version=... -X main.Commit=... -X main.Date=...".
// A build that leaves them empty (or Version "dev") answers from the
// module version and VCS stamp that go build records (see versionOf).
var (
	Version = "dev"
	Commit  string
	Date    string
)

func main() {
	os.Exit(Main(os.Args[1:], os.Stdout, os.Stderr))
}

// Exit codes: 0 success, 1 an error (a drain that timed out included), 3
// the source's collection was dropped or renamed under a running
// pipeline, 130 a second signal stopped a drain.
const (
	exitInvalidated  = 3
	exitSecondSignal = 130
)

// exitError carries a specific exit code out of a command.
type exitError struct {
	code int
	err  error
}

func (e *exitError) Error() string { return e.err.Error() }
func (e *exitError) Unwrap() error { return e.err }

// Main runs the tide command line and returns the process exit code. It is
// main without os.Exit, so that its defers run and tests can call it.
func Main(args []string, stdout, stderr io.Writer) int {
	// The secrets of the pipeline file a command loads are registered
	// here, so that neither its logs nor its error print them.
	secrets := &redact.Set{}
	root := newRootCmd(stdout, stderr, secrets)
	root.SetArgs(args)
	if err := root.Execute(); err != nil {
		fmt.Fprintln(stderr, "tide:", secrets.String(err.Error()))
		var ee *exitError
		if errors.As(err, &ee) {
			return ee.code
		}
		return 1
	}
	return 0
}

func newRootCmd(stdout, stderr io.Writer, secrets *redact.Set) *cobra.Command {
	root := &cobra.Command{
		Use:   "tide",
		Short: "Stream changes from MongoDB and NATS into files, JetStream, PostgreSQL, MongoDB and stdout",
		Long: `Tide streams changes, reliably and fast, from MongoDB change streams and NATS
into JSON-lines files, NATS JetStream, PostgreSQL, MongoDB and stdout. It never
records progress that a sink has not made durable.

Sources a pipeline file can name: ` + strings.Join(tide.Sources(), ", ") + `.
Sinks: ` + strings.Join(tide.Sinks(), ", ") + `.`,
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	root.SetOut(stdout)
	root.SetErr(stderr)
	root.AddCommand(
		newRunCmd(secrets),
		newValidateCmd(secrets),
		newCheckpointCmd(secrets),
		newSnapshotCmd(secrets),
		newDemoCmd(),
		newServeCmd(),
		newVersionCmd(),
		newHealthcheckCmd(),
		newWorkerCmd(secrets),
		newClusterCmd(),
		newPipelineCmd(secrets),
		newDeadLettersCmd(secrets),
		newConfigCmd(),
	)
	return root
}

func newVersionCmd() *cobra.Command {
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "version",
		Short: "Print the version, commit, build date and Go release",
		Long: `Print the release version, the commit and its date, and the Go release
the binary was built with. What the build did not record is "unknown"; a
build from a checkout that is not a release is version "dev".

--json prints one object: {"version", "commit", "date", "go"}.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return writeVersion(cmd.OutOrStdout(), currentVersion(), asJSON)
		},
	}
	cmd.Flags().BoolVar(&asJSON, "json", false, "print JSON: version, commit, date, go")
	return cmd
}

// readPipeline reads and parses a pipeline file, and adds its secrets to
// those every output of the command hides.
func readPipeline(file string, secrets *redact.Set) (*tide.Spec, error) {
	spec, err := tide.ParseFile(file, tide.Options{})
	if err != nil {
		return nil, err
	}
	secrets.Add(spec.Secrets()...)
	return spec, nil
}
