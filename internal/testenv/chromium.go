package testenv

import (
	"bytes"
	"context"
	"errors"
	"image/png"
	"net/url"
	"os/exec"
	"sync"
	"testing"

	"github.com/chromedp/cdproto/network"
	"github.com/chromedp/cdproto/runtime"
	"github.com/chromedp/chromedp"
)

// Browser is a headless Chromium for a test, with a record of every
// request its page made and every uncaught script error.
type Browser struct {
	// Ctx is the chromedp context of its one tab: use it with
	// chromedp.Run and chromedp.Do.
	Ctx context.Context

	mu         sync.Mutex
	requests   []string
	exceptions []string
}

// Chromium starts a headless Chromium, stopped when the test ends.
// Without one the test is skipped, or fails in CI: see Need.
func Chromium(t testing.TB) *Browser {
	t.Helper()
	var path string
	for _, name := range []string{"chromium", "chromium-browser", "google-chrome"} {
		if p, err := exec.LookPath(name); err == nil {
			path = p
			break
		}
	}
	if path == "" {
		Need(t, "chromium", errors.New("chromium is not installed (apt-get install chromium)"))
	}
	actx, cancelAlloc := chromedp.NewExecAllocator(context.Background(),
		chromedp.ExecPath(path),
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
	ctx, cancel := chromedp.NewContext(actx)
	b := &Browser{Ctx: ctx}
	reqs := chromedp.Events(ctx, network.RequestWillBeSent)
	excs := chromedp.Events(ctx, runtime.ExceptionThrown)
	var wg sync.WaitGroup
	wg.Add(2)
	go func() { // ends with ctx
		defer wg.Done()
		for ev, err := range reqs {
			if err != nil {
				return
			}
			b.mu.Lock()
			b.requests = append(b.requests, ev.Request.URL)
			b.mu.Unlock()
		}
	}()
	go func() { // ends with ctx
		defer wg.Done()
		for ev, err := range excs {
			if err != nil {
				return
			}
			b.mu.Lock()
			b.exceptions = append(b.exceptions, (&chromedp.ExceptionError{ExceptionDetails: ev.ExceptionDetails}).Error())
			b.mu.Unlock()
		}
	}()
	t.Cleanup(func() {
		cancel()
		wg.Wait()
		cancelAlloc()
	})
	return b
}

// CheckRequests fails the test if the page requested anything but
// http://host, or made fewer than min requests, or if a script failed.
func (b *Browser) CheckRequests(t testing.TB, host string, min int) {
	t.Helper()
	b.mu.Lock()
	defer b.mu.Unlock()
	if len(b.requests) < min {
		t.Errorf("the page made %d requests, want at least %d: %q", len(b.requests), min, b.requests)
	}
	for _, r := range b.requests {
		u, err := url.Parse(r)
		if err != nil || u.Scheme != "http" || u.Host != host {
			t.Errorf("the page requested %q, outside its server %s", r, host)
		}
	}
	for _, e := range b.exceptions {
		t.Errorf("script error on the page: %s", e)
	}
}

// ColorPixels counts the pixels of a PNG screenshot within 12 of the
// colour r, g, b in each channel: to tell that a plot's line is drawn.
func ColorPixels(t testing.TB, shot []byte, r, g, b uint8) int {
	t.Helper()
	img, err := png.Decode(bytes.NewReader(shot))
	if err != nil {
		t.Fatalf("screenshot: %v", err)
	}
	near := func(a uint32, b uint8) bool { a >>= 8; return a <= uint32(b)+12 && a+12 >= uint32(b) }
	n := 0
	bounds := img.Bounds()
	for y := bounds.Min.Y; y < bounds.Max.Y; y++ {
		for x := bounds.Min.X; x < bounds.Max.X; x++ {
			cr, cg, cb, _ := img.At(x, y).RGBA()
			if near(cr, r) && near(cg, g) && near(cb, b) {
				n++
			}
		}
	}
	return n
}
