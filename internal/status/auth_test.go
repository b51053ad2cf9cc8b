package status

import (
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"golang.org/x/crypto/bcrypt"
)

func writeFile(t *testing.T, body string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "auth")
	if err := os.WriteFile(path, []byte(body), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// TestNonLoopbackNeedsAuth: every interface, or a routable address,
// without --http-auth-file is refused with a message that says so.
func TestNonLoopbackNeedsAuth(t *testing.T) {
	for _, addr := range []string{"0.0.0.0:0", ":0", "[::]:0", "192.0.2.1:9464"} {
		_, err := Listen(Config{Addr: addr})
		if err == nil || !strings.Contains(err.Error(), "is not a loopback address") || !strings.Contains(err.Error(), "--http-auth-file") {
			t.Errorf("Listen(%q) = %v, want a refusal naming --http-auth-file", addr, err)
		}
	}
	if _, err := Listen(Config{Addr: "9464"}); err == nil || !strings.Contains(err.Error(), `--http-addr "9464": want host:port`) {
		t.Errorf("Listen(9464) = %v, want host:port", err)
	}
	for _, addr := range []string{"127.0.0.1:0", "localhost:0", "[::1]:0"} {
		loop, err := isLoopback(addr)
		if err != nil || !loop {
			t.Errorf("isLoopback(%q) = %v, %v; want true", addr, loop, err)
		}
	}
}

// TestBasicAuth: with an auth file, a request without credentials or with
// wrong ones gets 401, the right ones 200; a plain password and a bcrypt
// hash both work.
func TestBasicAuth(t *testing.T) {
	hash, err := bcrypt.GenerateFromPassword([]byte("s3cret"), bcrypt.MinCost)
	if err != nil {
		t.Fatal(err)
	}
	for name, line := range map[string]string{"plain": "ops:s3cret\n", "bcrypt": "# tide status\nops:" + string(hash) + "\n"} {
		t.Run(name, func(t *testing.T) {
			srv, stop := serve(t, Config{Addr: "0.0.0.0:0", AuthFile: writeFile(t, line)})
			defer stop()
			_, port, err := net.SplitHostPort(srv.Addr())
			if err != nil {
				t.Fatal(err)
			}
			url := "http://127.0.0.1:" + port
			for _, path := range []string{"/", "/api/status", "/assets/status.js"} {
				for _, c := range []struct {
					user, pass string
					want       int
				}{{"", "", 401}, {"ops", "wrong", 401}, {"other", "s3cret", 401}, {"ops", "s3cret", 200}} {
					req, _ := http.NewRequest("GET", url+path, nil)
					if c.user != "" {
						req.SetBasicAuth(c.user, c.pass)
					}
					resp, err := http.DefaultClient.Do(req)
					if err != nil {
						t.Fatal(err)
					}
					resp.Body.Close()
					if resp.StatusCode != c.want {
						t.Errorf("GET %s as %q:%q: %s, want %d", path, c.user, c.pass, resp.Status, c.want)
					}
					if c.want == 401 && !strings.HasPrefix(resp.Header.Get("WWW-Authenticate"), "Basic ") {
						t.Errorf("GET %s: 401 without a Basic challenge", path)
					}
				}
			}
		})
	}
}

// TestAuthFileErrors: a bad auth file stops the server with the file and
// line named.
func TestAuthFileErrors(t *testing.T) {
	for body, want := range map[string]string{
		"":                      "no user:password line",
		"# only a comment\n":    "no user:password line",
		"ops\n":                 "line 1: want user:password",
		"ops:\n":                "line 1: want user:password",
		"ops:a\nops2:b\n":       "line 2: want exactly one user:password line",
		"ops:$2a$10$notahash\n": "line 1: not a valid bcrypt hash",
	} {
		path := writeFile(t, body)
		_, err := Listen(Config{Addr: "127.0.0.1:0", AuthFile: path})
		if err == nil || !strings.Contains(err.Error(), path) || !strings.Contains(err.Error(), want) {
			t.Errorf("auth file %q: %v, want %q naming the file", body, err, want)
		}
	}
	if _, err := Listen(Config{Addr: "127.0.0.1:0", AuthFile: filepath.Join(t.TempDir(), "missing")}); err == nil || !strings.Contains(err.Error(), "--http-auth-file") {
		t.Errorf("missing auth file: %v", err)
	}
}
