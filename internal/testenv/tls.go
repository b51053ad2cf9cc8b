package testenv

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// Certs are PEM files made for one test: a CA, a server certificate it
// signed for 127.0.0.1, ::1 and localhost, a client certificate it signed,
// and a second CA, which the server does not trust, with a client
// certificate of its own.
type Certs struct {
	CAFile         string // the CA certificate
	ServerCertFile string
	ServerKeyFile  string
	// ClientFile holds the client's certificate and key together, as
	// drivers take it (tlsCertificateKeyFile).
	ClientFile      string
	ClientCertFile  string
	ClientKeyFile   string
	OtherCAFile     string // a CA the server's certificate does not chain to
	OtherClientFile string // a client certificate and key signed by the other CA
}

// TLSCerts generates Certs in a temporary directory of t.
func TLSCerts(t testing.TB) Certs {
	t.Helper()
	dir := t.TempDir()
	write := func(name string, blocks ...*pem.Block) string {
		var data []byte
		for _, b := range blocks {
			data = append(data, pem.EncodeToMemory(b)...)
		}
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, data, 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	ca, caKey, caDER := newCA(t, "tide test CA")
	other, otherKey, otherDER := newCA(t, "some other CA")
	srvDER, srvKey := newLeaf(t, ca, caKey, "tide test server", true)
	cliDER, cliKey := newLeaf(t, ca, caKey, "tide test client", false)
	oDER, oKey := newLeaf(t, other, otherKey, "stranger", false)
	c := Certs{
		CAFile:         write("ca.pem", certBlock(caDER)),
		OtherCAFile:    write("other-ca.pem", certBlock(otherDER)),
		ServerCertFile: write("server.pem", certBlock(srvDER)),
		ServerKeyFile:  write("server-key.pem", keyBlock(t, srvKey)),
		ClientCertFile: write("client-cert.pem", certBlock(cliDER)),
		ClientKeyFile:  write("client-key.pem", keyBlock(t, cliKey)),
	}
	c.ClientFile = write("client.pem", certBlock(cliDER), keyBlock(t, cliKey))
	c.OtherClientFile = write("stranger.pem", certBlock(oDER), keyBlock(t, oKey))
	return c
}

func newCA(t testing.TB, name string) (*x509.Certificate, *ecdsa.PrivateKey, []byte) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber:          serial(t),
		Subject:               pkix.Name{CommonName: name},
		NotBefore:             time.Now().Add(-time.Hour),
		NotAfter:              time.Now().Add(24 * time.Hour),
		IsCA:                  true,
		BasicConstraintsValid: true,
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	return cert, key, der
}

func newLeaf(t testing.TB, ca *x509.Certificate, caKey *ecdsa.PrivateKey, name string, server bool) ([]byte, *ecdsa.PrivateKey) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: serial(t),
		Subject:      pkix.Name{CommonName: name},
		NotBefore:    time.Now().Add(-time.Hour),
		NotAfter:     time.Now().Add(24 * time.Hour),
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
	}
	if server {
		tmpl.ExtKeyUsage = []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}
		tmpl.DNSNames = []string{"localhost"}
		tmpl.IPAddresses = []net.IP{net.IPv4(127, 0, 0, 1), net.IPv6loopback}
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca, &key.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	return der, key
}

func serial(t testing.TB) *big.Int {
	n, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 62))
	if err != nil {
		t.Fatal(err)
	}
	return n
}

func certBlock(der []byte) *pem.Block { return &pem.Block{Type: "CERTIFICATE", Bytes: der} }

func keyBlock(t testing.TB, key *ecdsa.PrivateKey) *pem.Block {
	t.Helper()
	der, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	return &pem.Block{Type: "PRIVATE KEY", Bytes: der}
}
