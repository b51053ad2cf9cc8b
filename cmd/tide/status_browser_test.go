package main

import (
	"bytes"
	"context"
	"flag"
	"image/png"
	"net/url"
	"os"
	"os/exec"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/cdproto/network"
	"github.com/chromedp/cdproto/runtime"
	"github.com/chromedp/chromedp"
)

// -status-screenshot writes the browser test's screenshot of the page to
// a file: go test ./cmd/tide -run TestStatusPageBrowser -status-screenshot ../../docs/status-page.png
var statusScreenshot = flag.String("status-screenshot", "", "write the status page's screenshot to this PNG file")

// chromium returns the path of a Chromium binary, or skips the test; in CI
// (CI=true) a missing Chromium is a failure.
func chromium(t *testing.T) string {
	t.Helper()
	for _, name := range []string{"chromium", "chromium-browser", "google-chrome"} {
		if path, err := exec.LookPath(name); err == nil {
			return path
		}
	}
	if os.Getenv("CI") == "true" {
		t.Fatal("chromium is not installed (apt-get install chromium); CI needs it for the status page's browser test")
	}
	t.Skip("chromium is not installed; the status page's browser test needs it")
	return ""
}

// TestStatusPageBrowser loads the status page of a running tide run in
// headless Chromium: the plots are drawn and move (the throughput series
// grows between two screenshots, both in uPlot's data and in the pixels),
// the state and the checkpoint are shown, no script fails, and the page
// asks nothing of any other server.
func TestStatusPageBrowser(t *testing.T) {
	chrome := chromium(t)
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

	actx, cancelAlloc := chromedp.NewExecAllocator(context.Background(),
		chromedp.ExecPath(chrome),
		chromedp.Flag("headless", true),
		chromedp.NoSandbox,
		chromedp.DisableGPU,
		chromedp.Flag("disable-quic", true),
		chromedp.NoFirstRun,
		chromedp.Flag("disable-background-networking", true),
		chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-sync", true),
		chromedp.Flag("hide-scrollbars", true),
		chromedp.UserDataDir(t.TempDir()),
		chromedp.WindowSize(1280, 900),
	)
	defer cancelAlloc()
	ctx, cancel := chromedp.NewContext(actx)
	defer cancel()

	var (
		mu         sync.Mutex
		requests   []string
		exceptions []string
		listening  sync.WaitGroup
	)
	reqs := chromedp.Events(ctx, network.RequestWillBeSent)
	excs := chromedp.Events(ctx, runtime.ExceptionThrown)
	listening.Add(2)
	go func() { // ends when ctx does
		defer listening.Done()
		for ev, err := range reqs {
			if err != nil {
				return
			}
			mu.Lock()
			requests = append(requests, ev.Request.URL)
			mu.Unlock()
		}
	}()
	go func() { // ends when ctx does
		defer listening.Done()
		for ev, err := range excs {
			if err != nil {
				return
			}
			mu.Lock()
			exceptions = append(exceptions, (&chromedp.ExceptionError{ExceptionDetails: ev.ExceptionDetails}).Error())
			mu.Unlock()
		}
	}()
	defer listening.Wait()
	defer cancel()

	step, stepCancel := context.WithTimeout(ctx, 30*time.Second)
	defer stepCancel()
	if err := chromedp.Do(ctx, chromedp.Navigate(page)); err != nil {
		t.Fatalf("open %s: %v", page, err)
	}
	if err := chromedp.Do(step, chromedp.WaitVisible(chromedp.CSS(`section.pipeline[data-state="running"]`))); err != nil {
		t.Fatalf("the page never showed the pipeline running: %v\n%s", err, logs.String())
	}
	points := func() int {
		t.Helper()
		n, err := chromedp.Run(step, chromedp.Evaluate[int](`window.tideCharts["gen"].throughput.data[0].length`))
		if err != nil {
			t.Fatalf("read uPlot's data: %v", err)
		}
		return n
	}
	for points() < 3 {
		if err := chromedp.Do(step, chromedp.Sleep(200*time.Millisecond)); err != nil {
			t.Fatalf("the throughput plot has %d points after 30 s: %v", points(), err)
		}
	}
	plot := chromedp.CSS(`section.pipeline[data-pipeline="gen"] .plot`) // the first: throughput
	n1 := points()
	shot1, err := chromedp.Run(step, chromedp.Screenshot(plot))
	if err != nil {
		t.Fatal(err)
	}
	if err := chromedp.Do(step, chromedp.Sleep(3*time.Second)); err != nil {
		t.Fatal(err)
	}
	n2 := points()
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
		if px := seriesPixels(t, shot); px < 100 {
			t.Errorf("screenshot %d: %d pixels of the throughput line (#0969da); want it drawn", i+1, px)
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
	if *statusScreenshot != "" {
		full, err := chromedp.Run(step, chromedp.FullScreenshot(100))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(*statusScreenshot, full, 0o644); err != nil {
			t.Fatal(err)
		}
	}

	mu.Lock()
	defer mu.Unlock()
	if len(requests) < 4 { // the page, its CSS and scripts, /api/status
		t.Errorf("saw only %d requests: %q", len(requests), requests)
	}
	for _, r := range requests {
		u, err := url.Parse(r)
		if err != nil || u.Host != server.Host || u.Scheme != "http" {
			t.Errorf("the page requested %q, outside its server %s", r, server.Host)
		}
	}
	for _, e := range exceptions {
		t.Errorf("script error on the page: %s", e)
	}
}

// seriesPixels counts the pixels of a PNG near the throughput line's
// colour.
func seriesPixels(t *testing.T, shot []byte) int {
	t.Helper()
	img, err := png.Decode(bytes.NewReader(shot))
	if err != nil {
		t.Fatalf("screenshot: %v", err)
	}
	near := func(a, b uint32) bool { return a>>8 <= b+12 && a>>8+12 >= b }
	n := 0
	b := img.Bounds()
	for y := b.Min.Y; y < b.Max.Y; y++ {
		for x := b.Min.X; x < b.Max.X; x++ {
			r, g, bl, _ := img.At(x, y).RGBA()
			if near(r, 0x09) && near(g, 0x69) && near(bl, 0xda) {
				n++
			}
		}
	}
	return n
}
