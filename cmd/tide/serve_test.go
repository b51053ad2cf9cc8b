package main

import (
	"context"
	"encoding/binary"
	"errors"
	"io"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"

	"github.com/tide-cdc/tide/internal/testenv"
)

// TestServeRefusesNetworkWithoutAuth: binding to every interface without
// --auth is refused at start, with a message that says what to do.
func TestServeRefusesNetworkWithoutAuth(t *testing.T) {
	t.Parallel()
	for _, addr := range []string{"0.0.0.0:0", ":0", "[::]:0"} {
		var stdout, stderr strings.Builder
		code := Main([]string{"serve", "--addr", addr}, &stdout, &stderr)
		if code != 1 {
			t.Errorf("--addr %s: exit %d, want 1; stderr:\n%s", addr, code, stderr.String())
		}
		for _, want := range []string{"--addr " + addr, "--auth", "--admin-user", "--admin-password-file", "--insecure"} {
			if !strings.Contains(stderr.String(), want) {
				t.Errorf("--addr %s: the refusal does not mention %s:\n%s", addr, want, stderr.String())
			}
		}
	}
}

func TestIsLoopback(t *testing.T) {
	t.Parallel()
	tests := map[string]bool{
		"127.0.0.1:27017": true, "127.1.2.3:1": true, "[::1]:27017": true, "localhost:27017": true,
		"0.0.0.0:27017": false, ":27017": false, "[::]:27017": false, "192.0.2.7:27017": false, "no-port": false,
	}
	for addr, want := range tests {
		if got := isLoopback(addr); got != want {
			t.Errorf("isLoopback(%q) = %v, want %v", addr, got, want)
		}
	}
}

// TestServeInsecure: --insecure starts anyway, and warns.
func TestServeInsecure(t *testing.T) {
	t.Parallel()
	_, logs := startTide(t, t.TempDir(), "serving", "serve", "--addr", "0.0.0.0:0", "--insecure")
	if !strings.Contains(logs.String(), "without authentication on a non-loopback address") {
		t.Errorf("no warning for --insecure:\n%s", logs.String())
	}
}

// TestServeTLS runs tide serve with the TLS flags and connects the driver
// with tls=true and the CA file.
func TestServeTLS(t *testing.T) {
	t.Parallel()
	certs := testenv.TLSCerts(t)
	_, logs := startTide(t, t.TempDir(), "serving", "serve", "--addr", "127.0.0.1:0",
		"--tls-cert-file", certs.ServerCertFile, "--tls-key-file", certs.ServerKeyFile,
		"--tls-ca-file", certs.CAFile, "--tls-require-client-cert")
	m := regexp.MustCompile(`uri="?([^"\s]+)`).FindStringSubmatch(logs.String())
	if m == nil || !strings.Contains(m[1], "tls=true") {
		t.Fatalf("the serving line has no TLS uri:\n%s", logs.String())
	}
	uri := m[1] + "&tlsCAFile=" + url.QueryEscape(certs.CAFile) + "&serverSelectionTimeoutMS=2000"
	ping := func(uri string) error {
		c, err := mongo.Connect(options.Client().ApplyURI(uri))
		if err != nil {
			return err
		}
		defer c.Disconnect(context.Background())
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		return c.Database("admin").RunCommand(ctx, bson.D{{Key: "ping", Value: 1}}).Err()
	}
	if err := ping(uri + "&tlsCertificateKeyFile=" + url.QueryEscape(certs.ClientFile)); err != nil {
		t.Fatalf("driver with tls=true, CA file and client certificate: %v", err)
	}
	if err := ping(uri); err == nil {
		t.Error("--tls-require-client-cert let in a client without a certificate")
	}
}

func TestServeTLSFlagErrors(t *testing.T) {
	t.Parallel()
	certs := testenv.TLSCerts(t)
	tests := map[string]struct {
		args []string
		want string
	}{
		"cert without key": {[]string{"--tls-cert-file", certs.ServerCertFile}, "a certificate file without a key file"},
		"require without CA": {[]string{"--tls-cert-file", certs.ServerCertFile, "--tls-key-file", certs.ServerKeyFile, "--tls-require-client-cert"},
			"needs a CA file"},
		"missing file": {[]string{"--tls-cert-file", certs.ServerCertFile + ".nope", "--tls-key-file", certs.ServerKeyFile}, "server.pem.nope"},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			var stdout, stderr strings.Builder
			code := Main(append([]string{"serve", "--addr", "127.0.0.1:0"}, tc.args...), &stdout, &stderr)
			if code != 1 || !strings.Contains(stderr.String(), tc.want) || !strings.Contains(stderr.String(), "--tls-cert-file") {
				t.Errorf("exit %d, stderr %q: want 1 and an error with %q naming the flags", code, stderr.String(), tc.want)
			}
		})
	}
}

// helloConn connects to addr, sends one hello and reads its reply, as a
// client that then never authenticates.
func helloConn(t *testing.T, addr string) net.Conn {
	t.Helper()
	nc, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { nc.Close() })
	nc.SetDeadline(time.Now().Add(10 * time.Second))
	doc, err := bson.Marshal(bson.D{{Key: "hello", Value: 1}, {Key: "$db", Value: "admin"}})
	if err != nil {
		t.Fatal(err)
	}
	msg := binary.LittleEndian.AppendUint32(nil, uint32(16+4+1+len(doc))) // OP_MSG: header, flags, section kind 0
	msg = binary.LittleEndian.AppendUint32(msg, 1)
	msg = binary.LittleEndian.AppendUint32(msg, 0)
	msg = binary.LittleEndian.AppendUint32(msg, 2013)
	msg = binary.LittleEndian.AppendUint32(msg, 0)
	msg = append(append(msg, 0), doc...)
	if _, err := nc.Write(msg); err != nil {
		t.Fatal(err)
	}
	var hdr [16]byte
	if _, err := io.ReadFull(nc, hdr[:]); err != nil {
		t.Fatalf("hello reply: %v", err)
	}
	if _, err := io.CopyN(io.Discard, nc, int64(binary.LittleEndian.Uint32(hdr[:]))-16); err != nil {
		t.Fatalf("hello reply: %v", err)
	}
	return nc
}

// closedBy reports whether the server closed nc within d.
func closedBy(nc net.Conn, d time.Duration) bool {
	nc.SetReadDeadline(time.Now().Add(d))
	_, err := nc.Read(make([]byte, 1))
	return err != nil && !errors.Is(err, os.ErrDeadlineExceeded)
}

// TestServeConnectionLimits: --max-unauthenticated-connections and
// --auth-timeout close unauthenticated connections; --max-connections-per-ip
// refuses, with or without --auth; /metrics counts each. (The 1,000 idle
// connections and the authenticated driver: mongowire's
// TestIdleUnauthenticatedConnectionsLeaveRoom.)
func TestServeConnectionLimits(t *testing.T) {
	t.Parallel()
	for _, want := range []string{"--auth-timeout", "--max-unauthenticated-connections", "--max-connections-per-ip"} {
		var stdout, stderr strings.Builder
		if code := Main([]string{"serve", "--help"}, &stdout, &stderr); code != 0 || !strings.Contains(stdout.String(), want) {
			t.Errorf("tide serve --help (exit %d) does not mention %s:\n%s%s", code, want, stdout.String(), stderr.String())
		}
	}

	t.Run("auth", func(t *testing.T) {
		t.Parallel()
		dir := t.TempDir()
		const pw = "limits-admin-pw-7c"
		pwFile := filepath.Join(dir, "pw")
		if err := os.WriteFile(pwFile, []byte(pw), 0o600); err != nil {
			t.Fatal(err)
		}
		_, logs := startTide(t, dir, "serving metrics", "serve", "--addr", "127.0.0.1:0", "--auth", "--admin-user", "root", "--admin-password-file", pwFile,
			"--auth-timeout", "300ms", "--max-unauthenticated-connections", "2", "--http-addr", "127.0.0.1:0")
		addr := logField(t, logs.String(), `msg=serving `, "addr")
		metricsAddr := logField(t, logs.String(), `msg="serving metrics"`, "addr")

		first, second, third := helloConn(t, addr), helloConn(t, addr), helloConn(t, addr) // the third closes the idlest, the first
		if !closedBy(first, 5*time.Second) {
			t.Fatal("the connection past --max-unauthenticated-connections did not close the idlest")
		}
		if !closedBy(second, 5*time.Second) || !closedBy(third, 5*time.Second) {
			t.Fatal("an idle unauthenticated connection outlived --auth-timeout")
		}
		body := scrape(t, "http://"+metricsAddr+"/metrics")
		for _, want := range []string{
			`tide_mongowire_connections_closed_total{reason="max_unauthenticated"} 1`,
			`tide_mongowire_connections_closed_total{reason="auth_timeout"} 2`,
			`tide_mongowire_connections_unauthenticated 0`,
			`tide_mongowire_connections 0`,
		} {
			if !strings.Contains(body, want+"\n") {
				t.Errorf("/metrics lacks %q:\n%s", want, body)
			}
		}
	})

	t.Run("per ip, without auth", func(t *testing.T) {
		t.Parallel()
		_, logs := startTide(t, t.TempDir(), "serving metrics", "serve", "--addr", "127.0.0.1:0",
			"--max-connections-per-ip", "2", "--auth-timeout", "10ms", "--max-unauthenticated-connections", "1", "--http-addr", "127.0.0.1:0")
		addr := logField(t, logs.String(), `msg=serving `, "addr")
		metricsAddr := logField(t, logs.String(), `msg="serving metrics"`, "addr")
		a, b := helloConn(t, addr), helloConn(t, addr)
		third, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		defer third.Close()
		if !closedBy(third, 5*time.Second) {
			t.Fatal("the connection past --max-connections-per-ip was served")
		}
		// Without --auth, neither the timeout nor the cap of unauthenticated connections applies.
		if closedBy(a, 100*time.Millisecond) || closedBy(b, 10*time.Millisecond) {
			t.Fatal("without --auth, an unauthenticated connection was closed")
		}
		body := scrape(t, "http://"+metricsAddr+"/metrics")
		for _, want := range []string{
			`tide_mongowire_connections_refused_total{reason="max_connections_per_ip"} 1`,
			`tide_mongowire_connections_closed_total{reason="auth_timeout"} 0`,
			`tide_mongowire_connections_closed_total{reason="max_unauthenticated"} 0`,
			`tide_mongowire_connections_unauthenticated 0`,
		} {
			if !strings.Contains(body, want) {
				t.Errorf("/metrics lacks %q:\n%s", want, body)
			}
		}
	})
}
