package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"regexp"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/jackc/pgx/v5"
	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/tide-cdc/tide/internal/testenv"
)

// outageDown is how long TestPostgresOutage keeps PostgreSQL away.
var outageDown = flag.Duration("outage.down", 75*time.Second, "how long TestPostgresOutage keeps PostgreSQL down (at least 31s)")

// apiPipeline is what the outage test reads of /api/status.
type apiPipeline struct {
	State      string   `json:"state"`
	EventsOut  int64    `json:"events_out"`
	LagSeconds *float64 `json:"lag_seconds"`
	Degraded   *struct {
		Component               string  `json:"component"`
		Error                   string  `json:"error"`
		Attempts                int     `json:"attempts"`
		SecondsSinceLastSuccess float64 `json:"seconds_since_last_success"`
	} `json:"degraded"`
}

func apiStatus(t *testing.T, base string) apiPipeline {
	t.Helper()
	resp, err := http.Get(base + "api/status")
	if err != nil {
		t.Fatalf("GET /api/status: %v", err)
	}
	defer resp.Body.Close()
	var rep struct{ Pipelines []apiPipeline }
	if err := json.NewDecoder(resp.Body).Decode(&rep); err != nil || len(rep.Pipelines) != 1 {
		t.Fatalf("GET /api/status: %v (%d pipelines)", err, len(rep.Pipelines))
	}
	return rep.Pipelines[0]
}

func httpCode(t *testing.T, u string) int {
	t.Helper()
	resp, err := http.Get(u)
	if err != nil {
		t.Fatalf("GET %s: %v", u, err)
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	return resp.StatusCode
}

var lagMetric = regexp.MustCompile(`(?m)^tide_lag_seconds\{pipeline="outage"\} (\S+)$`)

func metricLag(t *testing.T, base string) float64 {
	t.Helper()
	resp, err := http.Get(base + "metrics")
	if err != nil {
		t.Fatalf("GET /metrics: %v", err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	m := lagMetric.FindSubmatch(b)
	if m == nil {
		return -1
	}
	v, _ := strconv.ParseFloat(string(m[1]), 64)
	return v
}

// TestPostgresOutage runs tide run from a MongoDB collection, written 50
// times a second, into PostgreSQL, and takes PostgreSQL away for 75 s. Within 10 s
// the pipeline is degraded, on /api/status and on the page in Chromium,
// with the error; /readyz says 503 and /healthz 200; the lag grows past
// 25 s, on /api/status and in /metrics. Tide stays alive through the
// whole outage (retry: max_elapsed 0, the default), and once PostgreSQL
// is back the page says RUNNING again, the lag falls, and every change
// reaches the table once.
func TestPostgresOutage(t *testing.T) {
	if testing.Short() {
		t.Skip("a 75 s outage")
	}
	t.Parallel()
	b := testenv.Chromium(t)
	dsn := testenv.Postgres(t)
	u, err := url.Parse(dsn)
	if err != nil {
		t.Fatal(err)
	}
	proxy := testenv.StartProxy(t, u.Host)
	u.Host = proxy.Addr()
	srv := testenv.MongoWire(t)
	client := testenv.MongoClient(t, srv.URI())
	coll := client.Database("shop").Collection("orders")
	if err := client.Database("shop").CreateCollection(t.Context(), "orders"); err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	cfg := writePipeline(t, dir, fmt.Sprintf(`
name: outage
source:
  mongo: {uri: %q, database: shop, collection: orders, snapshot: never, max_await: 200ms, full_document: update_lookup}
sink:
  postgres: {dsn: %q, table: outage_orders}
batch: {commit_interval: 100ms}
retry: {initial: 100ms, max: 2s}
`, srv.URI(), u.String()))
	cmd, logs := startTide(t, dir, "serving metrics", "run", "-f", cfg, "--http-addr", "127.0.0.1:0")
	defer func() {
		if cmd.ProcessState == nil {
			cmd.Process.Kill()
			cmd.Wait()
		}
	}()
	base := logField(t, logs.String(), "serving metrics", "page")

	waitUntil := func(what string, within time.Duration, ok func() bool) {
		t.Helper()
		for deadline := time.Now().Add(within); !ok(); time.Sleep(200 * time.Millisecond) {
			if time.Now().After(deadline) {
				_, raw := getText(t, base+"api/status")
				_, metrics := getText(t, base+"metrics")
				t.Fatalf("not within %s: %s\nstatus: %s\nmetrics:\n%s\nlogs:\n%s", within, what, raw, grepLines(metrics, "tide_"), logs.String())
			}
		}
	}
	waitUntil("running", 30*time.Second, func() bool { return apiStatus(t, base).State == "running" })
	// The writer inserts 50 documents a second until stopped, from when
	// the change stream is open; inserted is how many it did.
	var inserted atomic.Int64
	stopWriter := make(chan struct{})
	writerDone := make(chan struct{})
	go func() {
		defer close(writerDone)
		tick := time.NewTicker(20 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-stopWriter:
				return
			case <-tick.C:
			}
			n := inserted.Load() + 1
			if _, err := coll.InsertOne(context.Background(), bson.D{{Key: "_id", Value: n}, {Key: "n", Value: n}}); err != nil {
				t.Errorf("insert %d: %v", n, err)
				return
			}
			inserted.Store(n)
		}
	}()
	defer func() {
		select {
		case <-stopWriter:
		default:
			close(stopWriter)
		}
		<-writerDone
	}()
	waitUntil("running with changes committed", 30*time.Second, func() bool {
		st := apiStatus(t, base)
		return st.State == "running" && st.EventsOut > 50
	})
	if code := httpCode(t, base+"readyz"); code != 200 {
		t.Errorf("/readyz while running = %d, want 200", code)
	}
	if lag := metricLag(t, base); lag < 0 || lag > 2 {
		t.Errorf("tide_lag_seconds while running = %v, want under 2 s", lag)
	}
	if err := chromedp.Do(b.Ctx, chromedp.Navigate(base)); err != nil {
		t.Fatal(err)
	}
	page := func(sel string) string {
		t.Helper()
		step, cancel := context.WithTimeout(b.Ctx, 10*time.Second)
		defer cancel()
		s, err := chromedp.Run(step, chromedp.TextContent(chromedp.CSS(sel)))
		if err != nil {
			t.Fatalf("%s: %v", sel, err)
		}
		return s
	}

	proxy.Down()
	down := time.Now()
	var st apiPipeline
	waitUntil("degraded on /api/status", 10*time.Second, func() bool {
		st = apiStatus(t, base)
		return st.State == "degraded"
	})
	if d := st.Degraded; d == nil || d.Component != "sink" || d.Error == "" || d.Attempts < 1 {
		t.Fatalf("degraded object %+v, want the sink, its error and attempts", d)
	}
	step, cancel := context.WithTimeout(b.Ctx, time.Until(down.Add(10*time.Second))+time.Second)
	err = chromedp.Do(step, chromedp.WaitVisible(chromedp.CSS(`section.pipeline[data-state="degraded"] .degraded`)))
	cancel()
	if err != nil {
		t.Fatalf("the page did not show DEGRADED within 10 s: %v", err)
	}
	t.Logf("degraded on the page after %s", time.Since(down).Round(time.Millisecond))
	banner := page(`section[data-pipeline="outage"] div.degraded`)
	// The error is the last attempt's: the proxy resets every connection.
	if !strings.HasPrefix(banner, "DEGRADED: the sink is retrying (attempt ") || !strings.Contains(banner, "connection reset by peer") {
		t.Errorf("banner %q, want DEGRADED, the sink and its error", banner)
	}
	if code := httpCode(t, base+"readyz"); code != 503 {
		t.Errorf("/readyz while degraded = %d, want 503", code)
	}

	time.Sleep(time.Until(down.Add(30 * time.Second)))
	st = apiStatus(t, base)
	if st.LagSeconds == nil || *st.LagSeconds < 25 {
		t.Errorf("/api/status lag after 30 s down = %v, want over 25 s", st.LagSeconds)
	}
	if lag := metricLag(t, base); lag < 25 {
		t.Errorf("tide_lag_seconds after 30 s down = %v, want over 25 s", lag)
	}
	if st.Degraded == nil || st.Degraded.SecondsSinceLastSuccess < 25 {
		t.Errorf("degraded %+v after 30 s, want 25 s and more since the last success", st.Degraded)
	}

	time.Sleep(time.Until(down.Add(*outageDown)))
	if cmd.ProcessState != nil || httpCode(t, base+"healthz") != 200 {
		t.Fatalf("tide did not live through 75 s without PostgreSQL:\n%s", logs.String())
	}
	before := apiStatus(t, base).EventsOut
	proxy.Up()
	up := time.Now()
	waitUntil("running again and caught up", 60*time.Second, func() bool {
		st = apiStatus(t, base)
		return st.State == "running" && st.LagSeconds != nil && *st.LagSeconds < 2
	})
	t.Logf("caught up %s after PostgreSQL returned", time.Since(up).Round(time.Millisecond))
	if st.EventsOut < before+int64(outageDown.Seconds())*40 {
		t.Errorf("%d changes committed after the outage, %d before: want the backlog of 75 s at 50/s", st.EventsOut, before)
	}
	close(stopWriter)
	<-writerDone
	total := inserted.Load()
	waitUntil(fmt.Sprintf("every insert (%d) committed", total), 30*time.Second, func() bool {
		st = apiStatus(t, base)
		return st.EventsOut >= total
	})
	if st.EventsOut != total {
		t.Errorf("%d changes committed, %d inserted", st.EventsOut, total)
	}
	if got := page(`section[data-pipeline="outage"] .state`); got != "running" {
		// The page polls every second.
		time.Sleep(2 * time.Second)
		if got = page(`section[data-pipeline="outage"] .state`); got != "running" {
			t.Errorf("state on the page after recovery %q, want running", got)
		}
	}
	if lag := metricLag(t, base); lag < 0 || lag > 2 {
		t.Errorf("tide_lag_seconds after recovery = %v, want under 2 s", lag)
	}

	// Drain, then every change is in the table exactly once.
	cmd.Process.Signal(os.Interrupt)
	if err := cmd.Wait(); err != nil {
		t.Fatalf("tide run after the outage: %v\n%s", err, logs.String())
	}
	out := apiOut(t, logs.String())
	conn, err := pgx.Connect(t.Context(), dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.Background())
	var rows int64
	if err := conn.QueryRow(t.Context(), `SELECT count(*) FROM outage_orders`).Scan(&rows); err != nil {
		t.Fatal(err)
	}
	if rows != total || out != total {
		t.Errorf("%d rows in the table, %d events committed, %d inserted: want each change once", rows, out, total)
	}
}

// apiOut reads the events committed from tide run's last log line.
func apiOut(t *testing.T, logs string) int64 {
	t.Helper()
	n, err := strconv.ParseInt(logField(t, logs, "pipeline stopped", "events"), 10, 64)
	if err != nil {
		t.Fatal(err)
	}
	return n
}

func getText(t *testing.T, u string) (int, string) {
	t.Helper()
	resp, err := http.Get(u)
	if err != nil {
		t.Fatalf("GET %s: %v", u, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

func grepLines(text, prefix string) string {
	var out []string
	for _, l := range strings.Split(text, "\n") {
		if strings.HasPrefix(l, prefix) {
			out = append(out, l)
		}
	}
	return strings.Join(out, "\n")
}
