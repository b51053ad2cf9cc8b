package main

import (
	"context"
	"net/url"
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
