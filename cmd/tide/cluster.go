package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/spf13/cobra"

	"github.com/tide-cdc/tide/internal/worker"
)

func newClusterCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "cluster",
		Short: "Show a group of workers",
	}
	var natsURL string
	var asJSON bool
	status := &cobra.Command{
		Use:   "status --nats URL",
		Short: "List the live workers and the pipelines they run",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			ctx, cancel := context.WithTimeout(cmd.Context(), 10*time.Second)
			defer cancel()
			st, err := readClusterStatus(ctx, natsURL)
			if err != nil {
				return err
			}
			if asJSON {
				enc := json.NewEncoder(cmd.OutOrStdout())
				enc.SetIndent("", "  ")
				return enc.Encode(st)
			}
			printClusterStatus(cmd.OutOrStdout(), st, time.Now())
			return nil
		},
	}
	status.Flags().StringVar(&natsURL, "nats", "", "NATS server URL(s), comma-separated (required)")
	status.Flags().BoolVar(&asJSON, "json", false, "print JSON instead of tables")
	_ = status.MarkFlagRequired("nats")
	cmd.AddCommand(status)
	return cmd
}

// clusterStatus is what `tide cluster status` shows.
type clusterStatus struct {
	Workers   []worker.WorkerRecord `json:"workers"`
	Pipelines []pipelineStatus      `json:"pipelines"`
}

type pipelineStatus struct {
	worker.StatusRecord
	LeaseOwner string `json:"lease_owner"` // "" when no worker holds it
}

func readClusterStatus(ctx context.Context, urls string) (*clusterStatus, error) {
	nc, js, err := connectNATS(urls, "tide cluster status")
	if err != nil {
		return nil, err
	}
	defer nc.Close()
	open := func(name string) (jetstream.KeyValue, error) {
		kv, err := js.KeyValue(ctx, name)
		if errors.Is(err, jetstream.ErrBucketNotFound) {
			return nil, fmt.Errorf("no worker group at %s: bucket %s not found (start tide worker first)", urls, name)
		}
		if err != nil {
			return nil, fmt.Errorf("open bucket %s: %w", name, err)
		}
		return kv, nil
	}
	var st clusterStatus
	workers, err := open(worker.WorkersBucket)
	if err != nil {
		return nil, err
	}
	leases, err := open(worker.LeasesBucket)
	if err != nil {
		return nil, err
	}
	status, err := open(worker.StatusBucket)
	if err != nil {
		return nil, err
	}
	if err := eachValue(ctx, workers, func(_ string, v []byte) {
		var r worker.WorkerRecord
		if json.Unmarshal(v, &r) == nil {
			st.Workers = append(st.Workers, r)
		}
	}); err != nil {
		return nil, err
	}
	owners := map[string]string{}
	if err := eachValue(ctx, leases, func(k string, v []byte) {
		var r worker.LeaseRecord
		_ = json.Unmarshal(v, &r)
		owners[k] = r.Worker
	}); err != nil {
		return nil, err
	}
	seen := map[string]bool{}
	if err := eachValue(ctx, status, func(k string, v []byte) {
		var r worker.StatusRecord
		if json.Unmarshal(v, &r) == nil {
			seen[k] = true
			st.Pipelines = append(st.Pipelines, pipelineStatus{StatusRecord: r, LeaseOwner: owners[k]})
		}
	}); err != nil {
		return nil, err
	}
	for k, o := range owners { // leased, no status yet
		if !seen[k] {
			st.Pipelines = append(st.Pipelines, pipelineStatus{StatusRecord: worker.StatusRecord{Pipeline: k, Owner: o, State: "starting"}, LeaseOwner: o})
		}
	}
	slices.SortFunc(st.Workers, func(a, b worker.WorkerRecord) int { return strings.Compare(a.ID, b.ID) })
	slices.SortFunc(st.Pipelines, func(a, b pipelineStatus) int { return strings.Compare(a.Pipeline, b.Pipeline) })
	return &st, nil
}

// eachValue calls fn with every live key of kv and its value.
func eachValue(ctx context.Context, kv jetstream.KeyValue, fn func(key string, value []byte)) error {
	keys, err := kv.Keys(ctx)
	if errors.Is(err, jetstream.ErrNoKeysFound) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("list %s: %w", kv.Bucket(), err)
	}
	for _, k := range keys {
		e, err := kv.Get(ctx, k)
		if errors.Is(err, jetstream.ErrKeyNotFound) {
			continue // gone since the listing
		}
		if err != nil {
			return fmt.Errorf("read %s/%s: %w", kv.Bucket(), k, err)
		}
		fn(k, e.Value())
	}
	return nil
}

func printClusterStatus(w io.Writer, st *clusterStatus, now time.Time) {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "WORKER\tHOST\tSINCE\tPIPELINES")
	for _, r := range st.Workers {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\n", r.ID, r.Host, r.Since.Format(time.RFC3339), strings.Join(r.Pipelines, ","))
	}
	fmt.Fprintln(tw)
	fmt.Fprintln(tw, "PIPELINE\tOWNER\tSTATE\tEVENTS/S\tLAG\tCHECKPOINT AGE\tEVENTS OUT")
	for _, p := range st.Pipelines {
		owner := p.LeaseOwner
		if owner == "" {
			owner = "-"
		}
		age := "-"
		if !p.LastCheckpoint.IsZero() {
			age = now.Sub(p.LastCheckpoint).Round(100 * time.Millisecond).String()
		}
		lag := p.Lag
		if lag == "" {
			lag = "-"
		}
		state := p.State
		if p.Error != "" {
			state += ": " + p.Error
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%.0f\t%s\t%s\t%d\n", p.Pipeline, owner, state, p.EventsPerSec, lag, age, p.EventsOut)
	}
	_ = tw.Flush()
}
