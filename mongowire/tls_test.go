package mongowire_test

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/binary"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/url"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"

	"github.com/tide-cdc/tide/internal/testenv"
	"github.com/tide-cdc/tide/mongowire"
)

// tlsServer starts a TLS-only server from certs, logging into the
// returned buffer.
func tlsServer(t *testing.T, certs testenv.Certs, requireClientCert bool, opts ...func(*mongowire.Config)) (*mongowire.Server, *testenv.Buffer) {
	t.Helper()
	cfg, err := mongowire.TLSFiles{
		CertFile: certs.ServerCertFile, KeyFile: certs.ServerKeyFile,
		CAFile: certs.CAFile, RequireClientCert: requireClientCert,
	}.Config()
	if err != nil {
		t.Fatal(err)
	}
	logs := &testenv.Buffer{}
	s := testenv.MongoWire(t, append([]func(*mongowire.Config){func(c *mongowire.Config) {
		c.TLS = cfg
		c.Logger = slog.New(slog.NewTextHandler(io.MultiWriter(logs, t.Output()), nil))
	}}, opts...)...)
	return s, logs
}

// tlsURI is s's URI with the driver's TLS options.
func tlsURI(s *mongowire.Server, params ...string) string {
	uri := s.URI()
	for i := 0; i+1 < len(params); i += 2 {
		uri += "&" + params[i] + "=" + url.QueryEscape(params[i+1])
	}
	return uri + "&serverSelectionTimeoutMS=2000&connectTimeoutMS=2000"
}

func pingURI(t *testing.T, uri string) error {
	t.Helper()
	c, err := mongo.Connect(options.Client().ApplyURI(uri))
	if err != nil {
		return err
	}
	defer c.Disconnect(context.Background())
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	return c.Database("admin").RunCommand(ctx, bson.D{{Key: "ping", Value: 1}}).Err()
}

func TestTLSDriver(t *testing.T) {
	certs := testenv.TLSCerts(t)
	s, _ := tlsServer(t, certs, false)
	if !strings.Contains(s.URI(), "tls=true") {
		t.Fatalf("URI %q of a TLS server does not say tls=true", s.URI())
	}
	c := testenv.MongoClient(t, tlsURI(s, "tlsCAFile", certs.CAFile))
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	coll := c.Database("app").Collection("things")
	if _, err := coll.InsertOne(ctx, bson.D{{Key: "_id", Value: 1}, {Key: "v", Value: "over tls"}}); err != nil {
		t.Fatalf("insert over TLS: %v", err)
	}
	var got bson.M
	if err := coll.FindOne(ctx, bson.D{{Key: "_id", Value: 1}}).Decode(&got); err != nil || got["v"] != "over tls" {
		t.Fatalf("find over TLS: %v %v", got, err)
	}
	var hello bson.M
	if err := c.Database("admin").RunCommand(ctx, bson.D{{Key: "hello", Value: 1}}).Decode(&hello); err != nil {
		t.Fatal(err)
	}
	if hello["isWritablePrimary"] != true || hello["setName"] != "rs0" || hello["primary"] != s.Addr() {
		t.Errorf("hello over TLS: %v", hello)
	}
	// A client certificate signed by the CA is accepted when offered.
	if err := pingURI(t, tlsURI(s, "tlsCAFile", certs.CAFile, "tlsCertificateKeyFile", certs.ClientFile)); err != nil {
		t.Errorf("client certificate signed by the CA: %v", err)
	}
}

func TestTLSUntrustedServerRefused(t *testing.T) {
	certs := testenv.TLSCerts(t)
	s, _ := tlsServer(t, certs, false)
	err := pingURI(t, tlsURI(s, "tlsCAFile", certs.OtherCAFile))
	if err == nil {
		t.Fatal("the driver accepted a server certificate its CA file does not vouch for")
	}
	if !strings.Contains(err.Error(), "certificate") {
		t.Errorf("error does not say the certificate is the problem: %v", err)
	}
}

func TestTLSRequireClientCert(t *testing.T) {
	certs := testenv.TLSCerts(t)
	s, logs := tlsServer(t, certs, true)
	if err := pingURI(t, tlsURI(s, "tlsCAFile", certs.CAFile)); err == nil {
		t.Fatal("a client without a certificate was accepted by a server that requires one")
	}
	if !strings.Contains(logs.String(), "certificate") {
		t.Errorf("the server's log does not say why it refused the client:\n%s", logs)
	}
	if err := pingURI(t, tlsURI(s, "tlsCAFile", certs.CAFile, "tlsCertificateKeyFile", certs.ClientFile)); err != nil {
		t.Errorf("client with a certificate: %v", err)
	}
	// A certificate of another CA does not count.
	if err := pingURI(t, tlsURI(s, "tlsCAFile", certs.CAFile, "tlsCertificateKeyFile", certs.OtherClientFile)); err == nil {
		t.Error("a client certificate from an unknown CA was accepted")
	}
}

// TestTLSPlaintextClosed: a client that forgot tls=true gets its
// connection closed at once, and the server says why.
func TestTLSPlaintextClosed(t *testing.T) {
	certs := testenv.TLSCerts(t)
	s, logs := tlsServer(t, certs, false)

	nc, err := net.Dial("tcp", s.Addr())
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	body, _ := bson.Marshal(bson.D{{Key: "hello", Value: 1}, {Key: "$db", Value: "admin"}})
	msg := make([]byte, 21, 21+len(body))
	msg = append(msg, body...)
	binary.LittleEndian.PutUint32(msg[0:], uint32(len(msg)))
	binary.LittleEndian.PutUint32(msg[4:], 1)
	binary.LittleEndian.PutUint32(msg[12:], 2013) // OP_MSG, flags 0, section kind 0
	if _, err := nc.Write(msg); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	nc.SetReadDeadline(time.Now().Add(5 * time.Second))
	n, err := nc.Read(make([]byte, 64))
	if n != 0 || err == nil || os.IsTimeout(err) {
		t.Fatalf("plaintext hello got %d bytes, %v: want the connection closed", n, err)
	}
	if took := time.Since(start); took > 2*time.Second {
		t.Errorf("closing took %s", took)
	}
	waitFor(t, func() bool { return strings.Contains(logs.String(), "client sent plaintext to a TLS port") },
		"the log to say the client sent plaintext:\n"+logs.String())

	// The driver without tls=true fails fast, not at its selection timeout.
	start = time.Now()
	err = pingURI(t, strings.Replace(tlsURI(s), "tls=true", "tls=false", 1))
	if err == nil {
		t.Fatal("a plaintext driver got an answer from a TLS-only server")
	}
	if !strings.Contains(err.Error(), "incomplete read of message header") {
		t.Errorf("the plaintext driver's error does not say the server closed the connection: %v", err)
	}
	if took := time.Since(start); took > 3*time.Second {
		t.Errorf("the plaintext driver gave up after %s", took)
	}
}

func TestTLSHandshakeTimeout(t *testing.T) {
	certs := testenv.TLSCerts(t)
	s, _ := tlsServer(t, certs, false, func(c *mongowire.Config) { c.TLSHandshakeTimeout = 200 * time.Millisecond })
	nc, err := net.Dial("tcp", s.Addr())
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	start := time.Now()
	nc.SetReadDeadline(time.Now().Add(5 * time.Second))
	if _, err := nc.Read(make([]byte, 1)); err == nil || os.IsTimeout(err) {
		t.Fatalf("a silent client was not closed: %v", err)
	}
	if took := time.Since(start); took > 3*time.Second {
		t.Errorf("the silent client was closed after %s, want about 200ms", took)
	}
	// And a TLS client that stalls mid-handshake is closed too: send
	// only a record header.
	nc2, err := net.Dial("tcp", s.Addr())
	if err != nil {
		t.Fatal(err)
	}
	defer nc2.Close()
	nc2.Write([]byte{0x16, 3, 1, 0, 200})
	nc2.SetReadDeadline(time.Now().Add(5 * time.Second))
	if _, err := io.ReadAll(nc2); os.IsTimeout(err) {
		t.Fatal("a stalled handshake was not closed")
	}
}

func TestTLSMinVersion(t *testing.T) {
	certs := testenv.TLSCerts(t)
	cfg, err := mongowire.TLSFiles{CertFile: certs.ServerCertFile, KeyFile: certs.ServerKeyFile}.Config()
	if err != nil {
		t.Fatal(err)
	}
	cfg.MinVersion = tls.VersionTLS10 // a library user's config: raised to 1.2
	s := testenv.MongoWire(t, func(c *mongowire.Config) { c.TLS = cfg })
	pool, err := os.ReadFile(certs.CAFile)
	if err != nil {
		t.Fatal(err)
	}
	roots := x509Pool(t, pool)
	_, err = tls.Dial("tcp", s.Addr(), &tls.Config{RootCAs: roots, MinVersion: tls.VersionTLS10, MaxVersion: tls.VersionTLS11})
	if err == nil {
		t.Fatal("TLS 1.1 was negotiated")
	}
	conn, err := tls.Dial("tcp", s.Addr(), &tls.Config{RootCAs: roots, MinVersion: tls.VersionTLS12, MaxVersion: tls.VersionTLS12})
	if err != nil {
		t.Fatalf("TLS 1.2: %v", err)
	}
	conn.Close()
}

func TestTLSFilesErrors(t *testing.T) {
	t.Parallel()
	certs := testenv.TLSCerts(t)
	tests := map[string]struct {
		f    mongowire.TLSFiles
		want string
	}{
		"nothing":        {mongowire.TLSFiles{}, "certificate file and a key file are required"},
		"no key":         {mongowire.TLSFiles{CertFile: certs.ServerCertFile}, "without a key file"},
		"no cert":        {mongowire.TLSFiles{KeyFile: certs.ServerKeyFile}, "without a certificate file"},
		"require, no CA": {mongowire.TLSFiles{CertFile: certs.ServerCertFile, KeyFile: certs.ServerKeyFile, RequireClientCert: true}, "needs a CA file"},
		"missing cert":   {mongowire.TLSFiles{CertFile: certs.ServerCertFile + ".missing", KeyFile: certs.ServerKeyFile}, "server.pem.missing"},
		"key mismatch":   {mongowire.TLSFiles{CertFile: certs.ServerCertFile, KeyFile: certs.ClientKeyFile}, "private key does not match"},
		"CA not PEM":     {mongowire.TLSFiles{CertFile: certs.ServerCertFile, KeyFile: certs.ServerKeyFile, CAFile: certs.ServerKeyFile}, "holds no PEM certificate"},
		"CA missing":     {mongowire.TLSFiles{CertFile: certs.ServerCertFile, KeyFile: certs.ServerKeyFile, CAFile: "/nonexistent/ca.pem"}, "/nonexistent/ca.pem"},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			_, err := tc.f.Config()
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("got %v, want an error containing %q", err, tc.want)
			}
		})
	}
}

// TestTLSMongosh connects mongosh with --tls to a TLS-only server.
func TestTLSMongosh(t *testing.T) {
	bin, err := exec.LookPath("mongosh")
	if err != nil {
		testenv.Need(t, "mongosh", fmt.Errorf("%w (npm install -g mongosh)", err))
	}
	certs := testenv.TLSCerts(t)
	s, _ := tlsServer(t, certs, false)
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Second)
	defer cancel()
	uri := "mongodb://" + s.Addr() + "/?directConnection=true&tls=true&tlsCAFile=" + url.QueryEscape(certs.CAFile)
	cmd := exec.CommandContext(ctx, bin, uri, "--quiet", "--norc", "--eval",
		`db.getSiblingDB("t").c.insertOne({_id: 1}); print("count=" + db.getSiblingDB("t").c.countDocuments({}))`)
	cmd.Env = append(os.Environ(), "MONGOSH_NO_TELEMETRY=1", "DO_NOT_TRACK=1")
	out, err := cmd.CombinedOutput()
	if err != nil || !strings.Contains(string(out), "count=1") {
		t.Fatalf("mongosh over TLS: %v\n%s", err, out)
	}
}

func waitFor(t *testing.T, ok func() bool, what string) {
	t.Helper()
	for deadline := time.Now().Add(5 * time.Second); !ok(); {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func x509Pool(t *testing.T, pem []byte) *x509.CertPool {
	t.Helper()
	p := x509.NewCertPool()
	if !p.AppendCertsFromPEM(pem) {
		t.Fatal("no certificate in the CA file")
	}
	return p
}
