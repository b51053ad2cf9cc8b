package main

import (
	"bufio"
	"encoding/json"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

const statusPipeline = `
name: gen
source:
  generate: {count: 0, rate: 100}
sink:
  file: {path: ./out.jsonl}
batch: {commit_interval: 20ms}
`

// TestRunHTTPAddrOffLoopback: tide run refuses a status page open to the
// network without --http-auth-file, before it starts the pipeline; with
// one, a request without credentials gets 401.
func TestRunHTTPAddrOffLoopback(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	cfg := writePipeline(t, dir, statusPipeline)
	out, err := runTide(t, dir, "run", "-f", cfg, "--http-addr", "0.0.0.0:0")
	if err == nil || !strings.Contains(out, "--http-addr 0.0.0.0:0 is not a loopback address") || !strings.Contains(out, "set --http-auth-file") {
		t.Fatalf("tide run --http-addr 0.0.0.0:0: %v\n%s", err, out)
	}
	if strings.Contains(out, "pipeline started") {
		t.Errorf("the pipeline started before the refusal:\n%s", out)
	}
	if out, err := runTide(t, dir, "run", "-f", cfg, "--http-auth-file", "x"); err == nil || !strings.Contains(out, "--http-auth-file needs --http-addr") {
		t.Errorf("--http-auth-file alone: %v\n%s", err, out)
	}
	if out, err := runTide(t, dir, "run", "-f", cfg, "--http-addr", "127.0.0.1:1", "--metrics-addr", "127.0.0.1:2"); err == nil || !strings.Contains(out, "--metrics-addr is the former name of --http-addr") {
		t.Errorf("--http-addr and a different --metrics-addr: %v\n%s", err, out)
	}

	auth := filepath.Join(dir, "auth")
	if err := os.WriteFile(auth, []byte("ops:s3cret\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	_, logs := startTide(t, dir, "serving metrics", "run", "-f", cfg, "--http-addr", "0.0.0.0:0", "--http-auth-file", auth)
	_, port, err := net.SplitHostPort(strings.TrimSuffix(strings.TrimPrefix(logField(t, logs.String(), "serving metrics", "page"), "http://"), "/"))
	if err != nil {
		t.Fatal(err)
	}
	for _, withAuth := range []bool{false, true} {
		req, _ := http.NewRequest("GET", "http://127.0.0.1:"+port+"/api/status", nil)
		if withAuth {
			req.SetBasicAuth("ops", "s3cret")
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if want := map[bool]int{false: 401, true: 200}[withAuth]; resp.StatusCode != want {
			t.Errorf("GET /api/status (credentials: %v): %s, want %d", withAuth, resp.Status, want)
		}
	}
}

// TestRunMetricsAddrAlias: --metrics-addr, the former name of --http-addr,
// serves the status page and /api/status too.
func TestRunMetricsAddrAlias(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	cfg := writePipeline(t, dir, statusPipeline)
	_, logs := startTide(t, dir, "serving metrics", "run", "-f", cfg, "--metrics-addr", "127.0.0.1:0")
	page := logField(t, logs.String(), "serving metrics", "page")
	for _, path := range []string{"", "api/status", "metrics"} {
		resp, err := http.Get(page + path)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != 200 {
			t.Errorf("GET /%s with --metrics-addr: %s", path, resp.Status)
		}
	}
}

// TestDemoStatusPage: tide demo serves its status page on a free loopback
// port and prints its URL; /api/status shows the MongoDB source's lag and
// the checkpoint's cluster time.
func TestDemoStatusPage(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	cmd := tideCmd(t, dir, "demo", "--events", "1000000", "--rate", "1000", "--progress", "never")
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() {
		cmd.Process.Signal(os.Interrupt)
		cmd.Wait()
	}()
	guard := time.AfterFunc(30*time.Second, func() { cmd.Process.Kill() })
	defer guard.Stop()
	sc := bufio.NewScanner(stdout)
	var page string
	for page == "" && sc.Scan() {
		if u, ok := strings.CutPrefix(sc.Text(), "status page: "); ok {
			page = u
		}
	}
	if !strings.HasPrefix(page, "http://127.0.0.1:") {
		t.Fatalf("tide demo printed no status page on loopback (got %q)", page)
	}
	go func() { // drain the summary, so that the demo never blocks on it
		for sc.Scan() {
		}
	}()
	type pipeline struct {
		Name       string   `json:"name"`
		State      string   `json:"state"`
		EventsOut  int64    `json:"events_out"`
		LagSeconds *float64 `json:"lag_seconds"`
		Checkpoint *struct {
			ClusterTime *struct {
				T    uint32 `json:"t"`
				Time string `json:"time"`
			} `json:"cluster_time"`
		} `json:"checkpoint"`
	}
	var got pipeline
	for deadline := time.Now().Add(20 * time.Second); time.Now().Before(deadline); time.Sleep(200 * time.Millisecond) {
		resp, err := http.Get(page + "api/status")
		if err != nil {
			t.Fatal(err)
		}
		var rep struct{ Pipelines []pipeline }
		err = json.NewDecoder(resp.Body).Decode(&rep)
		resp.Body.Close()
		if err != nil || len(rep.Pipelines) != 1 {
			t.Fatalf("/api/status: %v %+v", err, rep)
		}
		if got = rep.Pipelines[0]; got.EventsOut > 0 && got.Checkpoint != nil && got.Checkpoint.ClusterTime != nil {
			break
		}
	}
	if got.Name != "demo" || got.State != "running" || got.LagSeconds == nil || *got.LagSeconds < 0 || *got.LagSeconds > 10 {
		t.Errorf("demo status %+v: want demo running with a lag of seconds", got)
	}
	if got.Checkpoint == nil || got.Checkpoint.ClusterTime == nil {
		t.Fatalf("demo checkpoint %+v: want its cluster time", got.Checkpoint)
	}
	if ct, err := time.Parse(time.RFC3339, got.Checkpoint.ClusterTime.Time); err != nil || time.Since(ct) > time.Minute || ct.Unix() != int64(got.Checkpoint.ClusterTime.T) {
		t.Errorf("checkpoint cluster time %+v (%v): want a recent RFC 3339 time", got.Checkpoint.ClusterTime, err)
	}
}
