package status

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/tide-cdc/tide"
	"github.com/tide-cdc/tide/cdc"
	"github.com/tide-cdc/tide/checkpoint"
	"github.com/tide-cdc/tide/encode"
	"github.com/tide-cdc/tide/internal/metrics"
	"github.com/tide-cdc/tide/pipeline"
	"github.com/tide-cdc/tide/source/generate"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// brokenSink is a sink whose Put fails, as a full disk would.
type brokenSink struct{}

var errBroken = errors.New("disk full: no space left for the batch")

func (brokenSink) Open(context.Context, *cdc.Checkpoint) error  { return nil }
func (brokenSink) Put(context.Context, []cdc.Record) error      { return errBroken }
func (brokenSink) Commit(context.Context, cdc.Checkpoint) error { return nil }
func (brokenSink) Close() error                                 { return nil }

// detailed is a source with status details, as the MongoDB source has its
// oplog headroom.
type detailed struct{ cdc.Source }

func (detailed) StatusDetails() map[string]any {
	return map[string]any{"headroom_warning": true, "checkpoint_headroom_seconds": 1800.0, "headroom_warn_seconds": 3600.0}
}

func serve(t *testing.T, cfg Config) (*Server, func()) {
	t.Helper()
	srv, err := Listen(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- srv.Run(ctx) }()
	return srv, func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("status server: %v", err)
		}
	}
}

func getStatus(t *testing.T, url string) Report {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Fatalf("GET %s: %s", url, resp.Status)
	}
	var rep Report
	if err := json.NewDecoder(resp.Body).Decode(&rep); err != nil {
		t.Fatalf("GET %s: %v", url, err)
	}
	return rep
}

// TestAPIStatus runs two pipelines behind one status server: generate →
// file through package tide, as tide run builds it, and generate → a sink
// that fails. /api/status shows the first one's progress, checkpoint and
// history, and the second one's failure with its error, by stage.
func TestAPIStatus(t *testing.T) {
	dir := t.TempDir()
	reg := metrics.NewRegistry()
	srv, stop := serve(t, Config{Addr: "127.0.0.1:0", Metrics: reg})
	defer stop()

	good := NewTracker()
	yaml := fmt.Sprintf("name: good\ndata_dir: %s\nsource: {generate: {rate: 400}}\nsink: {file: {path: %s}}\nbatch: {commit_interval: 20ms}\n",
		filepath.Join(dir, "data"), filepath.Join(dir, "out.jsonl"))
	p, err := buildSpec(context.Background(), []byte(yaml), tide.Options{Observer: good, Metrics: reg})
	if err != nil {
		t.Fatal(err)
	}
	good.Attach(p.Name, p, p.Source, p.Redact)
	srv.Add(good)

	bad := NewTracker()
	bp := pipeline.New(pipeline.Config{Name: "bad", Observer: bad},
		detailed{generate.New(generate.Config{Count: 10})}, encode.Envelope, brokenSink{}, &checkpoint.Mem{})
	bad.Attach("bad", bp, detailed{}, nil)
	srv.Add(bad)

	ctx, cancel := context.WithCancel(context.Background())
	runs := make(chan error, 2)
	go func() { runs <- p.Run(ctx) }()
	go func() { runs <- bp.Run(ctx) }()
	defer func() {
		cancel()
		<-runs
		<-runs
	}()

	base := "http://" + srv.Addr()
	var rep Report
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(100 * time.Millisecond) {
		rep = getStatus(t, base+"/api/status?since=0")
		if len(rep.Pipelines) == 2 && len(rep.Pipelines[0].History.T) >= 3 && rep.Pipelines[1].State == "failed" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("no progress in /api/status: %+v", rep)
		}
	}
	g, b := rep.Pipelines[0], rep.Pipelines[1]
	if g.Name != "good" || g.State != "running" || g.Error != "" {
		t.Errorf("good: name %q state %q error %q, want good running with no error", g.Name, g.State, g.Error)
	}
	if g.EventsOut <= 0 || g.EventsIn < g.EventsOut || g.BytesOut <= 0 || g.Batches <= 0 {
		t.Errorf("good: events in %d out %d, bytes out %d, batches %d: want progress", g.EventsIn, g.EventsOut, g.BytesOut, g.Batches)
	}
	if g.EventsPerSecond < 100 || g.EventsPerSecond > 1000 || g.BytesPerSecond <= 0 {
		t.Errorf("good: %v events/s, %v bytes/s; the generator makes 400/s", g.EventsPerSecond, g.BytesPerSecond)
	}
	if g.Checkpoint == nil || !strings.Contains(string(g.Checkpoint.Position), `"seq"`) || g.Checkpoint.AgeSeconds < 0 || g.Checkpoint.AgeSeconds > 5 {
		t.Errorf("good: checkpoint %+v, want the generator's position, saved within seconds", g.Checkpoint)
	}
	// The pipeline measures the lag of any source: the age of the
	// oldest change not yet committed, here under a second.
	if g.LagSeconds == nil || *g.LagSeconds < 0 || *g.LagSeconds > 2 {
		t.Errorf("good: lag %v s, want the pipeline's, under a second or two", g.LagSeconds)
	}
	if g.LagEvents != nil || g.Source != nil {
		t.Errorf("good: lag %v events, source %v: a generator knows neither", g.LagEvents, g.Source)
	}
	h := g.History
	if len(h.EventsPerSecond) != len(h.T) || len(h.LagSeconds) != len(h.T) || len(h.BytesPerSecond) != len(h.T) {
		t.Errorf("good: history columns differ in length: %+v", h)
	}
	if last := h.EventsPerSecond[len(h.EventsPerSecond)-1]; last < 100 {
		t.Errorf("good: last sampled rate %v events/s, want about 400", last)
	}

	if b.State != "failed" || !strings.Contains(b.Error, errBroken.Error()) || !strings.Contains(b.Error, "put") {
		t.Errorf("bad: state %q error %q, want failed with the put's error", b.State, b.Error)
	}
	if e := b.Errors["put"]; e.Count != 1 || len(e.Last) != 1 || !strings.Contains(e.Last[0].Message, errBroken.Error()) {
		t.Errorf("bad: errors by stage %+v, want one put error saying %q", b.Errors, errBroken)
	}
	if b.EventsOut != 0 || b.Checkpoint != nil {
		t.Errorf("bad: %d events out, checkpoint %+v; nothing was committed", b.EventsOut, b.Checkpoint)
	}
	if b.Source["headroom_warning"] != true || b.Source["checkpoint_headroom_seconds"] != 1800.0 {
		t.Errorf("bad: source details %v, want the StatusDetailer's map", b.Source)
	}

	// Later polls ask only for what is new.
	newest := h.T[len(h.T)-1]
	next := getStatus(t, fmt.Sprintf("%s/api/status?since=%f", base, newest))
	for _, x := range next.Pipelines[0].History.T {
		if x <= newest {
			t.Errorf("since=%f returned the sample at %f", newest, x)
		}
	}
	if plain := getStatus(t, base+"/api/status"); plain.Pipelines[0].History != nil {
		t.Error("/api/status without since carries the history")
	}

	for path, want := range map[string]string{
		"/":                               "/assets/uplot/uPlot.iife.min.js",
		"/assets/status.js":               "/api/status?since=",
		"/assets/uplot/uPlot.iife.min.js": "uPlot",
		"/metrics":                        `tide_events_out_total{namespace="gen.events",pipeline="good"}`,
	} {
		resp, err := http.Get(base + path)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 200 || !strings.Contains(string(body), want) {
			t.Errorf("GET %s: %s, want 200 with %q", path, resp.Status, want)
		}
		if got := resp.Header.Get("Content-Security-Policy"); !strings.HasPrefix(got, "default-src 'self'") {
			t.Errorf("GET %s: Content-Security-Policy %q", path, got)
		}
	}
	resp, err := http.Get(base + "/api/status?since=yesterday")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 400 || !strings.Contains(string(body), `since="yesterday"`) {
		t.Errorf("since=yesterday: %s %q, want 400 naming the parameter", resp.Status, body)
	}
}

// TestStatusNoPipelineYet: a tracker not attached yet, and a server with
// none, still answer.
func TestStatusNoPipelineYet(t *testing.T) {
	srv, stop := serve(t, Config{Addr: "127.0.0.1:0"})
	defer stop()
	base := "http://" + srv.Addr()
	if rep := getStatus(t, base+"/api/status"); len(rep.Pipelines) != 0 {
		t.Errorf("pipelines %+v, want none", rep.Pipelines)
	}
	srv.Add(NewTracker())
	rep := getStatus(t, base+"/api/status?since=0")
	if len(rep.Pipelines) != 1 || rep.Pipelines[0].State != "starting" || rep.Pipelines[0].History == nil {
		t.Errorf("pipelines %+v, want one starting", rep.Pipelines)
	}
	srv.Remove(srv.snapshot()[0])
	if rep := getStatus(t, base+"/api/status"); len(rep.Pipelines) != 0 {
		t.Errorf("after Remove: pipelines %+v, want none", rep.Pipelines)
	}
	resp, err := http.Get(base + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 404 {
		t.Errorf("/metrics without a registry: %s, want 404", resp.Status)
	}
}

// TestHistoryBounded: the history keeps the last HistoryLen samples,
// oldest first, and errors keep their last few by stage.
func TestHistoryBounded(t *testing.T) {
	tr := NewTracker()
	p := pipeline.New(pipeline.Config{Name: "x"}, generate.New(generate.Config{}), encode.Envelope, brokenSink{}, nil)
	tr.Attach("x", p, nil, func(s string) string { return strings.ReplaceAll(s, "hunter2", "***") })
	start := time.Unix(1_700_000_000, 0)
	for i := range HistoryLen + 100 {
		tr.sample(start.Add(time.Duration(i) * time.Second))
	}
	h := tr.Status(start, true, 0).History
	if len(h.T) != HistoryLen {
		t.Fatalf("%d samples kept, want %d", len(h.T), HistoryLen)
	}
	if h.T[0] != float64(start.Unix()+100) || h.T[HistoryLen-1] != float64(start.Unix()+HistoryLen+99) {
		t.Errorf("history spans %v..%v, want the last %d seconds", h.T[0], h.T[HistoryLen-1], HistoryLen)
	}
	for i := 1; i < len(h.T); i++ {
		if h.T[i] <= h.T[i-1] {
			t.Fatalf("history out of order at %d: %v after %v", i, h.T[i], h.T[i-1])
		}
	}
	if got := tr.Status(start, true, h.T[HistoryLen-3]).History.T; len(got) != 2 {
		t.Errorf("since the third newest: %d samples, want 2", len(got))
	}
	for i := range 2 * maxStageErrors {
		tr.Failed("ack", fmt.Errorf("ack %d refused for password hunter2", i))
	}
	e := tr.Status(start, false, 0).Errors["ack"]
	if e.Count != 2*maxStageErrors || len(e.Last) != maxStageErrors || !strings.HasPrefix(e.Last[maxStageErrors-1].Message, fmt.Sprintf("ack %d ", 2*maxStageErrors-1)) {
		t.Errorf("ack errors %+v, want %d counted and the last %d kept", e, 2*maxStageErrors, maxStageErrors)
	}
	if strings.Contains(e.Last[0].Message, "hunter2") {
		t.Errorf("error message not redacted: %q", e.Last[0].Message)
	}
}

// buildSpec parses text and builds its pipeline, as tide run does.
func buildSpec(ctx context.Context, text []byte, opts tide.Options) (*tide.Pipeline, error) {
	spec, err := tide.Parse(text, opts)
	if err != nil {
		return nil, err
	}
	return spec.Build(ctx)
}
