package status

import (
	"net"
	"net/http"
	"strings"
	"testing"

	"github.com/tide-cdc/tide/internal/metrics"
)

// TestLoopbackHost: a server on loopback answers only requests whose Host
// names loopback; any other name, as a page that rebinds its own name to
// 127.0.0.1 sends, gets 403 on every route.
func TestLoopbackHost(t *testing.T) {
	srv, stop := serve(t, Config{Addr: "127.0.0.1:0", Metrics: metrics.NewRegistry()})
	defer stop()
	_, port, err := net.SplitHostPort(srv.Addr())
	if err != nil {
		t.Fatal(err)
	}
	hosts := map[string]int{
		"127.0.0.1:" + port: 200, "127.0.0.1": 200, "127.8.9.10:" + port: 200,
		"localhost:" + port: 200, "localhost": 200, "LocalHost:" + port: 200, "localhost.:" + port: 200,
		"[::1]:" + port: 200, "[::1]": 200,
		"evil.example:" + port: 403, "evil.example": 403, "localhost.evil.example:" + port: 403,
		"127.0.0.1.nip.io:" + port: 403, "0.0.0.0:" + port: 403, "192.168.1.5:" + port: 403, "[::]:" + port: 403,
	}
	for host, want := range hosts {
		for _, path := range []string{"/", "/api/status", "/metrics", "/assets/status.js"} {
			code, body := send(t, "GET", srv.URL()+path[1:], map[string]string{"Host": host}, "")
			if code != want {
				t.Errorf("GET %s with Host %q: %d, want %d", path, host, code, want)
			}
			if want == 403 && !strings.Contains(body, "DNS rebinding") {
				t.Errorf("GET %s with Host %q: the refusal does not say why: %q", path, host, body)
			}
		}
	}
}

// TestHostOffLoopback: a server off loopback (with --http-insecure or an
// auth file) is reached under names of its own: no Host check.
func TestHostOffLoopback(t *testing.T) {
	srv, stop := serve(t, Config{Addr: "0.0.0.0:0", Insecure: true})
	defer stop()
	_, port, err := net.SplitHostPort(srv.Addr())
	if err != nil {
		t.Fatal(err)
	}
	if code, body := send(t, "GET", "http://127.0.0.1:"+port+"/api/status", map[string]string{"Host": "tide.example:" + port}, ""); code != 200 {
		t.Errorf("GET /api/status with Host tide.example: %d %s, want 200", code, body)
	}
}

// TestRefusalHeaders: a refusal carries the security headers too.
func TestRefusalHeaders(t *testing.T) {
	srv, stop := serve(t, Config{Addr: "127.0.0.1:0"})
	defer stop()
	req, err := http.NewRequest("GET", srv.URL()+"api/status", nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Host = "evil.example"
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 403 || resp.Header.Get("X-Content-Type-Options") != "nosniff" || resp.Header.Get("Access-Control-Allow-Origin") != "" {
		t.Errorf("GET with a foreign Host: %s, headers %v: want 403 with nosniff and no CORS header", resp.Status, resp.Header)
	}
}
