package status

import (
	"bytes"
	"io"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"testing"
)

// TestCheckBind: off loopback, an address needs an auth file or
// --http-insecure; the flags without an address are refused.
func TestCheckBind(t *testing.T) {
	t.Parallel()
	tests := map[string]struct {
		addr, authFile string
		insecure       bool
		want           string // "" for no error
	}{
		"loopback":                  {addr: "127.0.0.1:9464"},
		"other loopback":            {addr: "127.3.2.1:9464"},
		"localhost":                 {addr: "localhost:9464"},
		"LOCALHOST":                 {addr: "LOCALHOST:9464"},
		"ipv6 loopback":             {addr: "[::1]:9464"},
		"mapped loopback":           {addr: "[::ffff:127.0.0.1]:9464"},
		"no address":                {},
		"every interface":           {addr: ":9464", want: "--http-addr :9464 is not a loopback address"},
		"0.0.0.0":                   {addr: "0.0.0.0:9464", want: "--http-addr 0.0.0.0:9464 is not a loopback address"},
		"[::]":                      {addr: "[::]:9464", want: "--http-addr [::]:9464 is not a loopback address"},
		"routable":                  {addr: "192.0.2.1:9464", want: "is not a loopback address"},
		"a name":                    {addr: "tide.example:9464", want: "is not a loopback address"},
		"a name ending localhost":   {addr: "evil-localhost:9464", want: "is not a loopback address"},
		"every interface, auth":     {addr: ":9464", authFile: "auth"},
		"every interface, insecure": {addr: "0.0.0.0:9464", insecure: true},
		"a name, auth":              {addr: "tide.example:9464", authFile: "auth"},
		"auth file alone":           {authFile: "auth", want: "--http-auth-file needs --http-addr"},
		"insecure alone":            {insecure: true, want: "--http-insecure needs --http-addr"},
		"no port":                   {addr: "9464", want: `--http-addr "9464": want host:port`},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			err := CheckBind(tc.addr, tc.authFile, tc.insecure)
			switch {
			case tc.want == "" && err != nil:
				t.Errorf("CheckBind(%q, %q, %v) = %v, want nil", tc.addr, tc.authFile, tc.insecure, err)
			case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
				t.Errorf("CheckBind(%q, %q, %v) = %v, want %q", tc.addr, tc.authFile, tc.insecure, err, tc.want)
			case tc.want != "" && strings.Contains(tc.want, "loopback") &&
				(!strings.Contains(err.Error(), "--http-auth-file") || !strings.Contains(err.Error(), "--http-insecure")):
				t.Errorf("CheckBind(%q) = %v: want it to name --http-auth-file and --http-insecure", tc.addr, err)
			}
		})
	}
}

// TestListenInsecure: Listen applies CheckBind; with Insecure it serves
// off loopback without credentials, and warns.
func TestListenInsecure(t *testing.T) {
	if _, err := Listen(Config{Addr: "0.0.0.0:0"}); err == nil || !strings.Contains(err.Error(), "--http-insecure") {
		t.Fatalf("Listen(0.0.0.0:0) = %v, want a refusal naming --http-insecure", err)
	}
	var logs bytes.Buffer
	srv, stop := serve(t, Config{Addr: "0.0.0.0:0", Insecure: true, Logger: slog.New(slog.NewTextHandler(&logs, nil))})
	defer stop()
	if !strings.Contains(logs.String(), "without authentication on a non-loopback address") {
		t.Errorf("no warning for Insecure:\n%s", logs.String())
	}
	_, port, err := net.SplitHostPort(srv.Addr())
	if err != nil {
		t.Fatal(err)
	}
	if code, _ := send(t, "GET", "http://127.0.0.1:"+port+"/api/status", nil, ""); code != 200 {
		t.Errorf("GET /api/status: %d, want 200", code)
	}
}

// send makes a request with the given headers ("Host" sets the Host
// header) and body, and returns the response's status code and body.
func send(t *testing.T, method, url string, header map[string]string, body string) (int, string) {
	t.Helper()
	req, err := http.NewRequest(method, url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	for k, v := range header {
		if k == "Host" {
			req.Host = v
		} else {
			req.Header.Set(k, v)
		}
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, string(b)
}
