package status

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/tide-cdc/tide/cdc"
	"github.com/tide-cdc/tide/checkpoint"
	"github.com/tide-cdc/tide/encode"
	"github.com/tide-cdc/tide/internal/metrics"
	"github.com/tide-cdc/tide/pipeline"
	"github.com/tide-cdc/tide/source/generate"
)

// errSecretDown is the error of a sink that cannot reach its server; its
// text must reach /api/status (behind auth) and never the probes.
var errSecretDown = errors.New("dial tcp 10.0.0.7:5432: connect: connection refused (password hunter2)")

// downSink is a sink and a cdc.Retrier that, while down, retries its
// Commit every 20 ms, reporting each failure as a real one does.
type downSink struct {
	down   atomic.Bool
	report cdc.RetryFunc
}

func (s *downSink) SetRetry(_ cdc.RetryPolicy, report cdc.RetryFunc) { s.report = report }
func (s *downSink) Open(context.Context, *cdc.Checkpoint) error      { return nil }
func (s *downSink) Put(context.Context, []cdc.Record) error          { return nil }
func (s *downSink) Close() error                                     { return nil }
func (s *downSink) Commit(ctx context.Context, _ cdc.Checkpoint) error {
	for attempt := 1; s.down.Load(); attempt++ {
		s.report(attempt, errSecretDown)
		select {
		case <-time.After(20 * time.Millisecond):
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	return nil
}

type probeReply struct {
	code int
	body probeAnswer
	raw  string
}

func probe(t *testing.T, url string) probeReply {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	var a probeAnswer
	if err := json.Unmarshal(raw, &a); err != nil {
		t.Fatalf("GET %s: %s: %v", url, raw, err)
	}
	return probeReply{resp.StatusCode, a, string(raw)}
}

func get(t *testing.T, url, user, pass string) (int, string) {
	t.Helper()
	req, _ := http.NewRequest(http.MethodGet, url, nil)
	if user != "" {
		req.SetBasicAuth(user, pass)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// TestProbesAndDegraded serves a pipeline behind basic auth. /healthz and
// /readyz answer without credentials, and say only the state: not ready
// before the pipeline exists, ready while it runs, 503 "degraded" while
// its sink retries; meanwhile /api/status (with credentials) shows the
// degraded object with the error, and /metrics the state, the retries
// and the last error's time. Once the sink is back, all say running.
func TestProbesAndDegraded(t *testing.T) {
	reg := metrics.NewRegistry()
	srv, stop := serve(t, Config{Addr: "0.0.0.0:0", AuthFile: writeFile(t, "ops:s3cret\n"), Metrics: reg})
	defer stop()
	_, port, _ := net.SplitHostPort(srv.Addr())
	base := "http://127.0.0.1:" + port

	if r := probe(t, base+"/healthz"); r.code != 200 || r.body.Status != "ok" {
		t.Errorf("/healthz = %d %s, want 200 ok", r.code, r.raw)
	}
	if r := probe(t, base+"/readyz"); r.code != 503 || r.body.Status != "starting" {
		t.Errorf("/readyz with no pipeline = %d %s, want 503 starting", r.code, r.raw)
	}
	if code, _ := get(t, base+"/api/status", "", ""); code != http.StatusUnauthorized {
		t.Errorf("/api/status without credentials = %d, want 401: only the probes are open", code)
	}

	sink := &downSink{}
	m := metrics.New(reg, "orders")
	tr := NewTracker()
	p := pipeline.New(pipeline.Config{Name: "orders", Observer: pipeline.Observers{tr, m}},
		generate.New(generate.Config{Rate: 200}), encode.Envelope, sink, &checkpoint.Mem{})
	m.Watch(p)
	tr.Attach("orders", p, nil, func(s string) string { return strings.ReplaceAll(s, "hunter2", "xxxxx") })
	srv.Add(tr)
	ctx, cancel := context.WithCancel(context.Background())
	errc := make(chan error, 1)
	go func() { errc <- p.Run(ctx) }()
	defer func() { cancel(); <-errc }()

	waitFor := func(what string, ok func() bool) {
		t.Helper()
		for deadline := time.Now().Add(10 * time.Second); !ok(); time.Sleep(50 * time.Millisecond) {
			if time.Now().After(deadline) {
				t.Fatalf("not within 10 s: %s", what)
			}
		}
	}
	waitFor("/readyz 200 while running", func() bool { return probe(t, base+"/readyz").code == 200 })
	waitFor("a commit", func() bool { return p.Stats().EventsOut > 0 })

	sink.down.Store(true)
	var r probeReply
	waitFor("/readyz 503 degraded", func() bool { r = probe(t, base+"/readyz"); return r.body.Status == "degraded" })
	if r.code != 503 || r.body.Reason != "the sink is retrying" {
		t.Errorf("/readyz degraded = %d %s, want 503 and the retrying end", r.code, r.raw)
	}
	if strings.Contains(r.raw, "10.0.0.7") || strings.Contains(r.raw, "orders") {
		t.Errorf("/readyz reveals more than the state: %s", r.raw)
	}
	if h := probe(t, base+"/healthz"); h.code != 200 {
		t.Errorf("/healthz while degraded = %d, want 200: the process is alive", h.code)
	}
	time.Sleep(1100 * time.Millisecond) // a second without success
	code, body := get(t, base+"/api/status", "ops", "s3cret")
	var rep Report
	if err := json.Unmarshal([]byte(body), &rep); code != 200 || err != nil || len(rep.Pipelines) != 1 {
		t.Fatalf("/api/status = %d %s (%v)", code, body, err)
	}
	st := rep.Pipelines[0]
	d := st.Degraded
	if st.State != "degraded" || d == nil || d.Component != "sink" || d.Attempts < 2 ||
		!strings.Contains(d.Error, "connection refused") || strings.Contains(d.Error, "hunter2") || d.SecondsSinceLastSuccess < 1 {
		t.Errorf("/api/status: state %q, degraded %+v; want the sink's redacted error, attempts, a second since success", st.State, d)
	}
	if len(st.Namespaces) != 1 || st.Namespaces[0].Namespace != "gen.events" || st.Namespaces[0].Events <= 0 || st.Namespaces[0].LastChange == nil {
		t.Errorf("/api/status namespaces %+v, want gen.events with its committed events", st.Namespaces)
	}
	if st.LagSeconds == nil || *st.LagSeconds < 1 {
		t.Errorf("/api/status lag while the sink is down = %v, want over a second and growing", st.LagSeconds)
	}
	_, text := get(t, base+"/metrics", "ops", "s3cret")
	for _, want := range []string{
		`tide_pipeline_state{pipeline="orders",state="degraded"} 1`,
		`tide_pipeline_state{pipeline="orders",state="running"} 0`,
		`tide_retries_total{component="sink",pipeline="orders"}`,
		`tide_last_error_timestamp_seconds{pipeline="orders"} 1.`,
		`tide_last_success_timestamp_seconds{pipeline="orders"} 1.`,
		`tide_lag_seconds{pipeline="orders"} `,
	} {
		if !strings.Contains(text, want) {
			t.Errorf("/metrics lacks %s", want)
		}
	}
	if strings.Contains(text, `tide_lag_seconds{pipeline="orders"} 0`+"\n") {
		t.Error("/metrics lag is 0 while the sink is down")
	}

	sink.down.Store(false)
	waitFor("/readyz 200 after the sink returned", func() bool { return probe(t, base+"/readyz").code == 200 })
	_, body = get(t, base+"/api/status", "ops", "s3cret")
	rep = Report{}
	_ = json.Unmarshal([]byte(body), &rep)
	if st := rep.Pipelines[0]; st.State != "running" || st.Degraded != nil {
		t.Errorf("after recovery: state %q, degraded %+v; want running, no degraded object", st.State, st.Degraded)
	}
	_, text = get(t, base+"/metrics", "ops", "s3cret")
	if !strings.Contains(text, `tide_pipeline_state{pipeline="orders",state="running"} 1`) {
		t.Error("/metrics state not running after recovery")
	}
}

// A POST to a probe is not a probe: it meets the same checks as any
// other request.
func TestProbesOnlyGET(t *testing.T) {
	srv, stop := serve(t, Config{Addr: "0.0.0.0:0", AuthFile: writeFile(t, "ops:s3cret\n")})
	defer stop()
	_, port, _ := net.SplitHostPort(srv.Addr())
	resp, err := http.Post("http://127.0.0.1:"+port+"/healthz", "text/plain", nil)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusUnauthorized {
		t.Errorf("POST /healthz = %s, want 401", resp.Status)
	}
}
