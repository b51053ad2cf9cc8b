package main

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"time"

	"github.com/spf13/cobra"
)

// defaultHealthURL is where the container image's HEALTHCHECK looks: the
// status server's port (--http-addr ...:9464) inside the container.
const defaultHealthURL = "http://127.0.0.1:9464/healthz"

// newHealthcheckCmd is `tide healthcheck`: one GET, exit 0 on a 2xx
// answer and 1 on anything else. It exists because the container image is
// FROM scratch, with no curl or wget for a HEALTHCHECK to run.
func newHealthcheckCmd() *cobra.Command {
	var (
		url     string
		timeout time.Duration
	)
	cmd := &cobra.Command{
		Use:   "healthcheck",
		Short: "GET a URL; exit 0 on a 2xx answer, 1 otherwise (for container health checks)",
		Long: `Send one GET to --url and exit 0 if the answer is 2xx, 1 if it is anything
else, if nothing answers, or if no answer came within --timeout. It prints
nothing on success and the reason on failure.

The container image runs it as its HEALTHCHECK against the status port,
` + defaultHealthURL + `; any URL works.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			ctx, cancel := context.WithTimeout(cmd.Context(), timeout)
			defer cancel()
			return healthcheck(ctx, url)
		},
	}
	cmd.Flags().StringVar(&url, "url", defaultHealthURL, "the URL to GET")
	cmd.Flags().DurationVar(&timeout, "timeout", 5*time.Second, "how long to wait for the answer")
	return cmd
}

// healthcheck sends one GET to url and returns nil if the answer is 2xx.
func healthcheck(ctx context.Context, url string) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return fmt.Errorf("healthcheck: %w", err)
	}
	// No proxy: a health check asks this machine or its neighbour
	// directly, whatever HTTP_PROXY the container was given.
	client := &http.Client{Transport: &http.Transport{Proxy: nil}}
	defer client.CloseIdleConnections()
	resp, err := client.Do(req)
	if err != nil {
		return fmt.Errorf("healthcheck: %w", err)
	}
	defer resp.Body.Close()
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		return fmt.Errorf("healthcheck: GET %s: %s", url, resp.Status)
	}
	return nil
}
