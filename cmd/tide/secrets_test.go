package main

import (
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"

	"github.com/tide-cdc/tide/internal/testenv"
)

// leakPassword is the secret every pipeline of TestSecretsNeverLeak
// carries; it must appear in no output. It holds characters that a
// connection string escapes, so that both spellings are looked for.
const leakPassword = "Leak/Pw@7f3e+9a"

// leakForms are the spellings of leakPassword that a program may print.
var leakForms = []string{leakPassword, url.QueryEscape(leakPassword), url.PathEscape(leakPassword), url.UserPassword("u", leakPassword).String()[2:], "7f3e+9a", "7f3e%2B9a"}

func requireNoLeak(t *testing.T, what, out string) {
	t.Helper()
	for _, f := range leakForms {
		if strings.Contains(out, f) {
			t.Errorf("%s prints the password (as %q):\n%s", what, f, out)
			return
		}
	}
}

// closedPort returns a loopback port nothing listens on.
func closedPort(t *testing.T) int {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := ln.Addr().(*net.TCPAddr).Port
	ln.Close()
	return port
}

// TestSecretsNeverLeak runs the real binary with pipelines whose URIs,
// DSNs and NATS credentials carry leakPassword, inline or through
// ${VAR}, provokes every failure (unreachable servers, refused
// passwords, a bad DSN or URI), and greps everything tide prints: tide validate
// (which must warn about the inline ones, by key), tide run with text and
// JSON logs at debug level, tide checkpoint show, and /metrics.
func TestSecretsNeverLeak(t *testing.T) {
	t.Parallel()
	esc := url.QueryEscape(leakPassword)
	pgDSN, err := url.Parse(testenv.Postgres(t))
	if err != nil {
		t.Fatal(err)
	}
	pgHost, pgPort, _ := net.SplitHostPort(pgDSN.Host)
	pgDB := strings.TrimPrefix(pgDSN.Path, "/")
	ns := testenv.NATSWithOptions(t, &server.Options{Username: "app", Password: "the-right-one"})
	natsURL := strings.TrimPrefix(ns.ClientURL(), "nats://")
	mw := testenv.MongoWire(t) // a user it does not know: authentication fails

	tests := map[string]struct {
		yaml   string
		inline string // the key tide validate warns about; "" if the secret comes from ${VAR}
	}{
		"mongo refuses the password, inline": {fmt.Sprintf(`
source:
  mongo: {uri: "mongodb://app:%s@%s/?replicaSet=rs0&authSource=admin", database: d, collection: c}
sink: {file: {path: ./out.jsonl}}
`, esc, mw.Addr()), "source.mongo.uri"},
		"mongo refuses the password, from env": {fmt.Sprintf(`
source:
  mongo: {uri: "mongodb://app:${LEAK_PW_ESCAPED}@%s/?replicaSet=rs0&authMechanism=SCRAM-SHA-1", database: d, collection: c}
sink: {file: {path: ./out.jsonl}}
`, mw.Addr()), ""},
		"mongo bad option": {fmt.Sprintf(`
source:
  mongo: {uri: "mongodb://app:%s@127.0.0.1:%d/?replicaSet=rs0&authMechanism=BOGUS", database: d, collection: c}
sink: {file: {path: ./out.jsonl}}
`, esc, closedPort(t)), "source.mongo.uri"},
		"postgres refuses the password, keyword DSN": {fmt.Sprintf(`
source: {generate: {count: 5}}
sink:
  postgres: {dsn: "host=%s port=%s user=postgres password='%s' dbname=%s sslmode=disable connect_timeout=2", table: t}
checkpoint: sink
`, pgHost, pgPort, leakPassword, pgDB), "sink.postgres.dsn"},
		"postgres refuses the password, URL from env": {fmt.Sprintf(`
source: {generate: {count: 5}}
sink:
  postgres: {dsn: "postgres://postgres:${LEAK_PW_ESCAPED}@%s/%s?sslmode=disable&connect_timeout=2", table: t}
checkpoint: sink
`, pgDSN.Host, pgDB), ""},
		"postgres bad DSN": {fmt.Sprintf(`
source: {generate: {count: 5}}
sink:
  postgres: {dsn: "postgres://postgres:%s@127.0.0.1:notaport/db?sslmode=disable", table: t}
`, esc), "sink.postgres.dsn"},
		"postgres unreachable": {fmt.Sprintf(`
source: {generate: {count: 5}}
sink:
  postgres: {dsn: "postgres://postgres:%s@127.0.0.1:%d/db?sslmode=disable&connect_timeout=1", table: t}
retry: {max_elapsed: 2s}   # unreachable is transient: retried, logged, then given up
`, esc, closedPort(t)), "sink.postgres.dsn"},
		"nats refuses the password in the URL": {fmt.Sprintf(`
source: {generate: {count: 5}}
sink:
  nats: {servers: ["nats://app:%s@%s"], stream: S, max_outage: 1s}
`, esc, natsURL), "sink.nats.servers[0]"},
		"nats refuses the password": {fmt.Sprintf(`
source: {generate: {count: 5}}
sink:
  nats: {servers: ["nats://%s"], stream: S, max_outage: 1s, auth: {user: app, password: "%s"}}
`, natsURL, leakPassword), "sink.nats.auth.password"},
		"nats refuses the token": {fmt.Sprintf(`
source:
  nats: {servers: ["nats://%s"], stream: S, consumer: c, auth: {token: "${LEAK_PW}"}}
sink: {stdout: {}}
`, natsURL), ""},
	}
	env := append(os.Environ(), "LEAK_PW="+leakPassword, "LEAK_PW_ESCAPED="+esc)
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			dir := t.TempDir()
			cfg := writePipeline(t, dir, "name: leak\n"+tc.yaml)
			run := func(args ...string) string {
				cmd := tideCmd(t, dir, args...)
				cmd.Env = env
				out, _ := cmd.CombinedOutput()
				requireNoLeak(t, "tide "+strings.Join(args, " "), string(out))
				return string(out)
			}
			out := run("validate", "-f", cfg)
			if !strings.Contains(out, "is valid") {
				t.Errorf("tide validate refused the file:\n%s", out)
			}
			switch {
			case tc.inline != "" && !strings.Contains(out, "warning: ") || tc.inline != "" && !strings.Contains(out, " "+tc.inline+": "):
				t.Errorf("tide validate does not warn about the inline secret in %s:\n%s", tc.inline, out)
			case tc.inline == "" && strings.Contains(out, "warning"):
				t.Errorf("tide validate warns about a secret taken from the environment:\n%s", out)
			}
			for _, format := range []string{"text", "json"} {
				out := run("run", "-f", cfg, "--log-format", format, "--log-level", "debug", "--drain-timeout", "2s")
				if !strings.Contains(out, "tide: ") {
					t.Errorf("tide run (%s logs) did not fail:\n%s", format, out)
				}
			}
			run("checkpoint", "show", "-f", cfg)
		})
	}

	// /metrics of a pipeline that keeps failing to reach NATS.
	t.Run("metrics", func(t *testing.T) {
		t.Parallel()
		dir := t.TempDir()
		cfg := writePipeline(t, dir, fmt.Sprintf(`name: leak-metrics
source: {generate: {count: 5}}
sink:
  nats: {servers: ["nats://app:%s@%s"], stream: S, max_outage: 3s}
`, esc, natsURL))
		var logs *syncBuilder
		t.Cleanup(func() { requireNoLeak(t, "tide run --metrics-addr", logs.String()) }) // after the process is stopped
		_, logs = startTide(t, dir, "serving metrics", "run", "-f", cfg, "--metrics-addr", "127.0.0.1:0", "--log-level", "debug")
		m := metricsAddr.FindStringSubmatch(logs.String())
		if m == nil {
			t.Fatalf("no metrics address in:\n%s", logs.String())
		}
		for range 3 {
			resp, err := http.Get(m[1])
			if err != nil {
				break // the pipeline gave up and exited
			}
			body, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			requireNoLeak(t, "/metrics", string(body))
			time.Sleep(300 * time.Millisecond)
		}
	})

	// A pipeline that works, with the password of the test PostgreSQL
	// server in its DSN: the same holds when nothing fails.
	t.Run("postgres works", func(t *testing.T) {
		t.Parallel()
		dir := t.TempDir()
		cfg := writePipeline(t, dir, fmt.Sprintf(`name: pg-ok
source: {generate: {count: 20}}
sink:
  postgres: {dsn: %q, table: t}
checkpoint: sink
data_dir: %s
`, pgDSN.String(), filepath.Join(dir, "data")))
		for _, args := range [][]string{
			{"validate", "-f", cfg},
			{"run", "-f", cfg, "--log-level", "debug", "--log-format", "json"},
			{"checkpoint", "show", "-f", cfg},
		} {
			out, err := runTide(t, dir, args...)
			if err != nil {
				t.Fatalf("tide %s: %v\n%s", strings.Join(args, " "), err, out)
			}
			if strings.Contains(out, testenv.PostgresPassword) {
				t.Errorf("tide %s prints the DSN's password:\n%s", strings.Join(args, " "), out)
			}
		}
	})
}
