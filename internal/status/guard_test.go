package status

import (
	"net"
	"net/http"
	"strings"
	"sync/atomic"
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

// TestGuardWrites: a request that may change something (any method but
// GET and HEAD; here on a route registered by the test, as POST
// /api/snapshots will be) is refused with 403 when a browser says it comes
// from another origin or site, and with 415 unless its body is JSON; from
// the page's own origin, or from a program that sends neither Origin nor
// Sec-Fetch-Site, JSON is accepted.
func TestGuardWrites(t *testing.T) {
	srv, stop := serve(t, Config{Addr: "127.0.0.1:0"})
	defer stop()
	var calls atomic.Int64
	srv.mux.HandleFunc("/api/test-write", func(w http.ResponseWriter, r *http.Request) {
		calls.Add(1)
		w.Write([]byte("done"))
	})
	_, port, err := net.SplitHostPort(srv.Addr())
	if err != nil {
		t.Fatal(err)
	}
	self := "http://127.0.0.1:" + port
	const jsonType = "application/json"
	tests := map[string]struct {
		method string
		header map[string]string
		want   int
	}{
		"program, JSON":                  {"POST", map[string]string{"Content-Type": jsonType}, 200},
		"program, JSON with charset":     {"POST", map[string]string{"Content-Type": "Application/JSON; charset=utf-8"}, 200},
		"own page":                       {"POST", map[string]string{"Origin": self, "Sec-Fetch-Site": "same-origin", "Content-Type": jsonType}, 200},
		"typed in (Sec-Fetch-Site none)": {"POST", map[string]string{"Sec-Fetch-Site": "none", "Content-Type": jsonType}, 200},
		"own page on the default port":   {"POST", map[string]string{"Host": "localhost", "Origin": "http://localhost", "Content-Type": jsonType}, 200},
		"own page, DELETE":               {"DELETE", map[string]string{"Origin": self, "Content-Type": jsonType}, 200},
		"GET from another origin":        {"GET", map[string]string{"Origin": "http://evil.example"}, 200},

		"another origin":                    {"POST", map[string]string{"Origin": "http://evil.example", "Content-Type": jsonType}, 403},
		"another origin, same-origin claim": {"POST", map[string]string{"Origin": "http://evil.example", "Sec-Fetch-Site": "same-origin", "Content-Type": jsonType}, 403},
		"another loopback name":             {"POST", map[string]string{"Origin": "http://localhost:" + port, "Content-Type": jsonType}, 403},
		"another loopback port":             {"POST", map[string]string{"Origin": "http://127.0.0.1:1", "Content-Type": jsonType}, 403},
		"the same host without the port":    {"POST", map[string]string{"Origin": "http://127.0.0.1", "Content-Type": jsonType}, 403},
		"null origin":                       {"POST", map[string]string{"Origin": "null", "Content-Type": jsonType}, 403},
		"cross-site":                        {"POST", map[string]string{"Sec-Fetch-Site": "cross-site", "Content-Type": jsonType}, 403},
		"same-site":                         {"POST", map[string]string{"Sec-Fetch-Site": "same-site", "Content-Type": jsonType}, 403},
		"cross-site form":                   {"POST", map[string]string{"Origin": "http://evil.example", "Sec-Fetch-Site": "cross-site", "Content-Type": "application/x-www-form-urlencoded"}, 403},
		"another origin, PUT":               {"PUT", map[string]string{"Origin": "http://evil.example", "Content-Type": jsonType}, 403},
		"another origin, DELETE":            {"DELETE", map[string]string{"Origin": "http://evil.example"}, 403},
		"another origin, OPTIONS":           {"OPTIONS", map[string]string{"Origin": "http://evil.example", "Access-Control-Request-Method": "POST"}, 403},

		"form":                   {"POST", map[string]string{"Content-Type": "application/x-www-form-urlencoded"}, 415},
		"multipart form":         {"POST", map[string]string{"Content-Type": "multipart/form-data; boundary=x"}, 415},
		"text/plain":             {"POST", map[string]string{"Content-Type": "text/plain"}, 415},
		"own page, text/plain":   {"POST", map[string]string{"Origin": self, "Sec-Fetch-Site": "same-origin", "Content-Type": "text/plain"}, 415},
		"no content type":        {"POST", nil, 415},
		"not quite JSON":         {"POST", map[string]string{"Content-Type": "application/jsonx"}, 415},
		"malformed content type": {"POST", map[string]string{"Content-Type": "application/json; ="}, 415},
		"PUT without a type":     {"PUT", nil, 415},
	}
	for name, tc := range tests {
		before := calls.Load()
		code, body := send(t, tc.method, self+"/api/test-write", tc.header, `{"x":1}`)
		if code != tc.want {
			t.Errorf("%s: %s %v: %d %q, want %d", name, tc.method, tc.header, code, body, tc.want)
		}
		if called := calls.Load() != before; called != (tc.want == 200) {
			t.Errorf("%s: handler called %v, want %v", name, called, tc.want == 200)
		}
		if tc.want == 403 && !strings.Contains(body, "403 forbidden") {
			t.Errorf("%s: %q, want a 403 message", name, body)
		}
		if tc.want == 415 && !strings.Contains(body, "needs Content-Type: application/json") {
			t.Errorf("%s: %q, want a message naming application/json", name, body)
		}
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
