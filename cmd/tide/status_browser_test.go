package main

import (
	"bufio"
	"bytes"
	"context"
	"flag"
	"net/url"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/tide-cdc/tide/internal/testenv"
)

// -status-screenshot makes TestStatusPageScreenshot write the page of a
// running tide demo to a PNG file:
//
//	go test ./cmd/tide -run TestStatusPageScreenshot -status-screenshot "$PWD/docs/status-page.png"
var statusScreenshot = flag.String("status-screenshot", "", "write a screenshot of tide demo's status page to this PNG file")

// The colour of the throughput line (status.js).
const throughputR, throughputG, throughputB = 0x09, 0x69, 0xda

// TestStatusPageBrowser loads the status page of a running tide run in
// headless Chromium: the plots are drawn and move (the throughput series
// grows between two screenshots, both in uPlot's data and in the pixels),
// the state and the checkpoint are shown, no script fails, and the page
// asks nothing of any other server.
func TestStatusPageBrowser(t *testing.T) {
	b := testenv.Chromium(t)
	dir := t.TempDir()
	cfg := writePipeline(t, dir, `
name: gen
source:
  generate: {count: 0, rate: 300}
sink:
  file: {path: ./out.jsonl}
batch: {commit_interval: 20ms}
`)
	_, logs := startTide(t, dir, "serving metrics", "run", "-f", cfg, "--http-addr", "127.0.0.1:0")
	page := logField(t, logs.String(), "serving metrics", "page")
	server, err := url.Parse(page)
	if err != nil {
		t.Fatal(err)
	}
	step, cancel := context.WithTimeout(b.Ctx, 30*time.Second)
	defer cancel()
	if err := chromedp.Do(b.Ctx, chromedp.Navigate(page)); err != nil {
		t.Fatalf("open %s: %v", page, err)
	}
	if err := chromedp.Do(step, chromedp.WaitVisible(chromedp.CSS(`section.pipeline[data-state="running"]`))); err != nil {
		t.Fatalf("the page never showed the pipeline running: %v\n%s", err, logs.String())
	}
	waitPoints(t, step, "gen", 3)
	plot := chromedp.CSS(`section.pipeline[data-pipeline="gen"] .plot`) // the first: throughput
	n1 := plotPoints(t, step, "gen")
	shot1, err := chromedp.Run(step, chromedp.Screenshot(plot))
	if err != nil {
		t.Fatal(err)
	}
	if err := chromedp.Do(step, chromedp.Sleep(3*time.Second)); err != nil {
		t.Fatal(err)
	}
	n2 := plotPoints(t, step, "gen")
	shot2, err := chromedp.Run(step, chromedp.Screenshot(plot))
	if err != nil {
		t.Fatal(err)
	}
	if n2 < n1+2 {
		t.Errorf("throughput series: %d points, then %d three seconds later; want it to grow by one a second", n1, n2)
	}
	if bytes.Equal(shot1, shot2) {
		t.Error("the throughput plot looks the same in two screenshots three seconds apart")
	}
	for i, shot := range [][]byte{shot1, shot2} {
		if px := testenv.ColorPixels(t, shot, throughputR, throughputG, throughputB); px < 100 {
			t.Errorf("screenshot %d: %d pixels of the throughput line; want it drawn", i+1, px)
		}
	}
	last, err := chromedp.Run(step, chromedp.Evaluate[float64](`(d => d[d.length-1])(window.tideCharts["gen"].throughput.data[1])`))
	if err != nil || last < 150 || last > 600 {
		t.Errorf("last plotted throughput %v events/s (%v); the generator makes 300/s", last, err)
	}
	state, err := chromedp.Run(step, chromedp.TextContent(chromedp.CSS(`section.pipeline[data-pipeline="gen"] .state`)))
	if err != nil || state != "running" {
		t.Errorf("state shown %q (%v), want running", state, err)
	}
	cp, err := chromedp.Run(step, chromedp.TextContent(chromedp.CSS(`section.pipeline[data-pipeline="gen"] .checkpoint`)))
	if err != nil || !strings.HasPrefix(cp, `checkpoint: position {"seq":`) || !strings.Contains(cp, "ago") {
		t.Errorf("checkpoint shown %q (%v), want the generator's position and its age", cp, err)
	}
	row, err := chromedp.Run(step, chromedp.TextContent(chromedp.CSS(`section.pipeline[data-pipeline="gen"] table.namespaces tr[data-namespace="gen.events"]`)))
	if err != nil || !strings.HasPrefix(row, "gen.events") || !strings.HasSuffix(row, "ago") {
		t.Errorf("namespace row shown %q (%v), want gen.events, its events and when the last was", row, err)
	}
	b.CheckRequests(t, server.Host, 5) // the page, two style sheets, two scripts, /api/status
}

func plotPoints(t *testing.T, ctx context.Context, pipeline string) int {
	t.Helper()
	n, err := chromedp.Run(ctx, chromedp.Evaluate[int](`(c => c ? c.throughput.data[0].length : 0)(window.tideCharts[`+jsString(pipeline)+`])`))
	if err != nil {
		t.Fatalf("read uPlot's data: %v", err)
	}
	return n
}

func waitPoints(t *testing.T, ctx context.Context, pipeline string, n int) {
	t.Helper()
	for plotPoints(t, ctx, pipeline) < n {
		if err := chromedp.Do(ctx, chromedp.Sleep(200*time.Millisecond)); err != nil {
			t.Fatalf("the throughput plot has fewer than %d points: %v", n, err)
		}
	}
}

func jsString(s string) string {
	return `"` + strings.NewReplacer(`\`, `\\`, `"`, `\"`).Replace(s) + `"`
}

// TestStatusPageScreenshot, with -status-screenshot, writes the page of a
// running tide demo (a MongoDB source, so the lag is plotted too) after
// half a minute of history. Without the flag it is skipped.
func TestStatusPageScreenshot(t *testing.T) {
	if *statusScreenshot == "" {
		t.Skip("no -status-screenshot file")
	}
	b := testenv.Chromium(t)
	dir := t.TempDir()
	cmd := tideCmd(t, dir, "demo", "--events", "10000000", "--rate", "1500", "--progress", "never")
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
	sc := bufio.NewScanner(stdout)
	var page string
	for page == "" && sc.Scan() {
		if u, ok := strings.CutPrefix(sc.Text(), "status page: "); ok {
			page = u
		}
	}
	go func() {
		for sc.Scan() {
		}
	}()
	if err := chromedp.Do(b.Ctx, chromedp.Navigate(page)); err != nil {
		t.Fatalf("open %q: %v", page, err)
	}
	step, cancel := context.WithTimeout(b.Ctx, time.Minute)
	defer cancel()
	waitPoints(t, step, "demo", 30)
	full, err := chromedp.Run(step, chromedp.FullScreenshot(100))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(*statusScreenshot, full, 0o644); err != nil {
		t.Fatal(err)
	}
}
