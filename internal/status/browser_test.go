package status

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/tide-cdc/tide/checkpoint"
	"github.com/tide-cdc/tide/encode"
	"github.com/tide-cdc/tide/internal/testenv"
	"github.com/tide-cdc/tide/pipeline"
	"github.com/tide-cdc/tide/source/generate"
)

// TestPageFailedAndEmpty loads the page in headless Chromium with a
// pipeline that failed and one with no data yet: the first shows its
// error, its errors by stage and its source's headroom warning; the
// second renders its empty plots.
func TestPageFailedAndEmpty(t *testing.T) {
	b := testenv.Chromium(t)
	srv, stop := serve(t, Config{Addr: "127.0.0.1:0"})
	defer stop()

	bad := NewTracker()
	bp := pipeline.New(pipeline.Config{Name: "bad", Observer: bad},
		detailed{generate.New(generate.Config{Count: 10})}, encode.Envelope, brokenSink{}, &checkpoint.Mem{})
	bad.Attach("bad", bp, detailed{}, nil)
	srv.Add(bad)
	if err := bp.Run(context.Background()); err == nil {
		t.Fatal("the pipeline with a broken sink did not fail")
	}
	empty := NewTracker()
	empty.Attach("empty", pipeline.New(pipeline.Config{Name: "empty"}, generate.New(generate.Config{}), encode.Envelope, brokenSink{}, nil), nil, nil)
	srv.Add(empty)

	step, cancel := context.WithTimeout(b.Ctx, 20*time.Second)
	defer cancel()
	if err := chromedp.Do(b.Ctx, chromedp.Navigate(srv.URL())); err != nil {
		t.Fatal(err)
	}
	if err := chromedp.Do(step, chromedp.WaitVisible(chromedp.CSS(`section.pipeline[data-state="failed"] .error`))); err != nil {
		t.Fatalf("the failed pipeline's error is not shown: %v", err)
	}
	text := func(sel string) string {
		t.Helper()
		s, err := chromedp.Run(step, chromedp.TextContent(chromedp.CSS(sel)))
		if err != nil {
			t.Fatalf("%s: %v", sel, err)
		}
		return s
	}
	if got := text(`section[data-pipeline="bad"] .error`); !strings.Contains(got, errBroken.Error()) || !strings.HasPrefix(got, "Failed: ") {
		t.Errorf("failed pipeline's error shown as %q", got)
	}
	if got := text(`section[data-pipeline="bad"] .state`); got != "failed" {
		t.Errorf("failed pipeline's state shown as %q", got)
	}
	if got := text(`section[data-pipeline="bad"] table.errors`); !strings.Contains(got, "put") || !strings.Contains(got, errBroken.Error()) {
		t.Errorf("errors by stage shown as %q", got)
	}
	if got := text(`section[data-pipeline="bad"] .warning`); !strings.Contains(got, "Oplog headroom low") || !strings.Contains(got, "30 min") {
		t.Errorf("headroom warning shown as %q", got)
	}
	if got := text(`section[data-pipeline="empty"] .checkpoint`); got != "checkpoint: none yet" {
		t.Errorf("empty pipeline's checkpoint shown as %q", got)
	}
	for _, name := range []string{"bad", "empty"} {
		drawn, err := chromedp.Run(step, chromedp.Evaluate[bool](`(c => !!c && c.throughput.ctx.canvas.width > 0 && c.lag.ctx.canvas.width > 0)(window.tideCharts["`+name+`"])`))
		if err != nil || !drawn {
			t.Errorf("%s: plots not drawn (%v)", name, err)
		}
	}
	b.CheckRequests(t, srv.Addr(), 5)
}
