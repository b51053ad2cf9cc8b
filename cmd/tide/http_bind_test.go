package main

import (
	"bufio"
	"bytes"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/tide-cdc/tide/internal/testenv"
)

// httpCommands are the commands with --http-addr, each with the arguments
// it needs to start in dir and the output that shows it has started
// something besides its HTTP server.
func httpCommands(t *testing.T) map[string]struct {
	args    func(dir string) []string
	started string
} {
	natsURL := testenv.NATS(t).ClientURL()
	return map[string]struct {
		args    func(dir string) []string
		started string
	}{
		"run": {func(dir string) []string { return []string{"run", "-f", writePipeline(t, dir, statusPipeline)} }, "pipeline started"},
		"demo": {func(string) []string {
			return []string{"demo", "--events", "1000000", "--rate", "100", "--progress", "never"}
		}, "tide demo: embedded MongoDB"},
		"serve":  {func(string) []string { return []string{"serve", "--addr", "127.0.0.1:0"} }, "msg=serving "},
		"worker": {func(string) []string { return []string{"worker", "--nats", natsURL} }, "worker started"},
	}
}

// TestHTTPBindRule: tide run, demo, serve and worker follow one rule for
// --http-addr. An address off loopback (every interface, or a host name
// other than localhost) is refused before anything starts, unless
// --http-auth-file or --http-insecure is given; with the first, /metrics
// needs the credentials, with the second it is open, and a warning says
// so. Loopback needs neither, and answers only a Host that names
// loopback (DNS rebinding).
func TestHTTPBindRule(t *testing.T) {
	t.Parallel()
	auth := filepath.Join(t.TempDir(), "auth")
	if err := os.WriteFile(auth, []byte("ops:s3cret\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	for name, c := range httpCommands(t) {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			for _, addr := range []string{":0", "0.0.0.0:0", "[::]:0", "tide.example:0"} {
				dir := t.TempDir()
				out, err := runRefused(t, dir, append(c.args(dir), "--http-addr", addr)...)
				if err == nil {
					t.Errorf("--http-addr %s: started, want a refusal:\n%s", addr, out)
					continue
				}
				for _, want := range []string{"--http-addr " + addr + " is not a loopback address", "--http-auth-file", "--http-insecure"} {
					if !strings.Contains(out, want) {
						t.Errorf("--http-addr %s: the refusal does not mention %q:\n%s", addr, want, out)
					}
				}
				if strings.Contains(out, c.started) {
					t.Errorf("--http-addr %s: %q before the refusal:\n%s", addr, c.started, out)
				}
			}
			for flag, value := range map[string]string{"--http-auth-file": auth, "--http-insecure": "true"} {
				dir := t.TempDir()
				out, err := runRefused(t, dir, append(c.args(dir), "--http-addr", "", flag+"="+value)...)
				if err == nil || !strings.Contains(out, flag+" needs --http-addr") {
					t.Errorf("%s without --http-addr: %v, want %q:\n%s", flag, err, flag+" needs --http-addr", out)
				}
			}

			cases := map[string]struct {
				extra    []string
				wantAnon int // the status of GET /metrics without credentials
				warn     bool
			}{
				"loopback":                          {[]string{"--http-addr", "127.0.0.1:0"}, 200, false},
				"every interface with an auth file": {[]string{"--http-addr", "0.0.0.0:0", "--http-auth-file", auth}, 401, false},
				"every interface, insecure":         {[]string{"--http-addr", "0.0.0.0:0", "--http-insecure"}, 200, true},
			}
			for cname, cc := range cases {
				dir := t.TempDir()
				port, out := startHTTP(t, dir, append(c.args(dir), cc.extra...)...)
				url := "http://127.0.0.1:" + port + "/metrics"
				if got := getStatusCode(t, url, "", ""); got != cc.wantAnon {
					t.Errorf("%s: GET /metrics without credentials: %d, want %d", cname, got, cc.wantAnon)
				}
				if cname == "loopback" {
					// A page that rebinds its own name to 127.0.0.1 sends
					// that name as Host.
					req, _ := http.NewRequest("GET", url, nil)
					req.Host = "rebound.example:" + port
					resp, err := http.DefaultClient.Do(req)
					if err != nil {
						t.Fatal(err)
					}
					resp.Body.Close()
					if resp.StatusCode != 403 {
						t.Errorf("GET /metrics with Host rebound.example: %s, want 403", resp.Status)
					}
				}
				// The probes answer without credentials, whatever protects
				// the rest; /readyz once the command's work is ready.
				base := "http://127.0.0.1:" + port
				if got := getStatusCode(t, base+"/healthz", "", ""); got != 200 {
					t.Errorf("%s: GET /healthz without credentials: %d, want 200", cname, got)
				}
				ready := 0
				for deadline := time.Now().Add(20 * time.Second); ready != 200 && time.Now().Before(deadline); time.Sleep(100 * time.Millisecond) {
					ready = getStatusCode(t, base+"/readyz", "", "")
				}
				if ready != 200 {
					t.Errorf("%s: GET /readyz without credentials: %d, want 200 within 20 s", cname, ready)
				}
				if cc.wantAnon == 401 {
					if got := getStatusCode(t, url, "ops", "s3cret"); got != 200 {
						t.Errorf("%s: GET /metrics with the credentials: %d, want 200", cname, got)
					}
				}
				if warned := strings.Contains(out(), "without authentication on a non-loopback address (--http-insecure)"); warned != cc.warn {
					t.Errorf("%s: warned %v, want %v:\n%s", cname, warned, cc.warn, out())
				}
			}
		})
	}
}

// runRefused runs tide, which should refuse its arguments at once: if it
// is still running after 10 seconds it is stopped, and the output so far
// is returned with an error.
func runRefused(t *testing.T, dir string, args ...string) (string, error) {
	t.Helper()
	cmd := tideCmd(t, dir, args...)
	var out bytes.Buffer // one writer for both: exec writes to it from one goroutine at a time
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	timer := time.AfterFunc(10*time.Second, func() { cmd.Process.Kill() })
	err := cmd.Wait()
	if !timer.Stop() {
		return out.String(), nil // still running after 10s: not refused
	}
	return out.String(), err
}

// startHTTP starts tide with args in dir and returns, once its HTTP
// server listens, the server's port and a function giving the output so
// far (stdout and stderr). The process is stopped when the test ends.
func startHTTP(t *testing.T, dir string, args ...string) (port string, output func() string) {
	t.Helper()
	cmd := tideCmd(t, dir, args...)
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stdout, cmd.Stderr = w, w
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	w.Close()
	out := &syncBuilder{}
	copied := make(chan struct{})
	t.Cleanup(func() {
		cmd.Process.Signal(syscall.SIGTERM)
		<-copied
		cmd.Wait()
	})
	guard := time.AfterFunc(30*time.Second, func() { cmd.Process.Kill() })
	defer guard.Stop()
	// The line that names the server: "serving metrics ... addr=..." or
	// the demo's "status page: URL".
	re := regexp.MustCompile(`(?:serving metrics|status page: ).*?\]?:(\d+)/?`)
	sc := bufio.NewScanner(r)
	for sc.Scan() {
		out.WriteString(sc.Text() + "\n")
		if m := re.FindStringSubmatch(sc.Text()); m != nil {
			port = m[1]
			break
		}
	}
	go func() { // keep reading, so that tide never blocks on a full pipe
		defer close(copied)
		defer r.Close()
		for sc.Scan() {
			out.WriteString(sc.Text() + "\n")
		}
	}()
	if port == "" {
		t.Fatalf("tide %s never named its HTTP server:\n%s", strings.Join(args, " "), out.String())
	}
	return port, out.String
}

// getStatusCode GETs url, with basic auth if user is set, and returns the
// response's status code.
func getStatusCode(t *testing.T, url, user, pass string) int {
	t.Helper()
	req, err := http.NewRequest("GET", url, nil)
	if err != nil {
		t.Fatal(err)
	}
	if user != "" {
		req.SetBasicAuth(user, pass)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	return resp.StatusCode
}
