package mongowire

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"os"
	"time"
)

// TLSFiles names the PEM files of a TLS-only server, as tide serve's
// --tls-* flags do.
type TLSFiles struct {
	CertFile string // the server's certificate chain; required
	KeyFile  string // its private key; required
	// CAFile holds the certificates that client certificates must chain
	// to. With it, a client may present a certificate, and one that does
	// not verify is refused; RequireClientCert refuses a client without one.
	CAFile            string
	RequireClientCert bool
}

// Config returns the *tls.Config for Config.TLS: TLS 1.2 at least, the
// server's certificate, and client certificates checked against CAFile.
func (f TLSFiles) Config() (*tls.Config, error) {
	switch {
	case f.CertFile == "" && f.KeyFile == "":
		return nil, errors.New("tls: a certificate file and a key file are required")
	case f.CertFile == "":
		return nil, errors.New("tls: a key file without a certificate file: give both")
	case f.KeyFile == "":
		return nil, errors.New("tls: a certificate file without a key file: give both")
	case f.RequireClientCert && f.CAFile == "":
		return nil, errors.New("tls: requiring client certificates needs a CA file to verify them against")
	}
	cert, err := tls.LoadX509KeyPair(f.CertFile, f.KeyFile)
	if err != nil {
		return nil, fmt.Errorf("tls: load certificate %s and key %s: %w", f.CertFile, f.KeyFile, err)
	}
	cfg := &tls.Config{MinVersion: tls.VersionTLS12, Certificates: []tls.Certificate{cert}}
	if f.CAFile != "" {
		pem, err := os.ReadFile(f.CAFile)
		if err != nil {
			return nil, fmt.Errorf("tls: read CA file: %w", err)
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("tls: CA file %s holds no PEM certificate", f.CAFile)
		}
		cfg.ClientCAs = pool
		cfg.ClientAuth = tls.VerifyClientCertIfGiven
		if f.RequireClientCert {
			cfg.ClientAuth = tls.RequireAndVerifyClientCert
		}
	}
	return cfg, nil
}

// DefaultTLSHandshakeTimeout is Config.TLSHandshakeTimeout's default.
const DefaultTLSHandshakeTimeout = 10 * time.Second
