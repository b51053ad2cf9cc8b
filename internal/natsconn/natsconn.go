// Package natsconn builds the NATS connection options that the NATS source
// and the NATS sink share: servers, credentials, TLS, the reconnect policy,
// the connection name and the logging of connection events. It lives in
// one place so that the two connectors cannot drift apart.
package natsconn

import (
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/url"
	"strings"
	"syscall"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/tide-cdc/tide/internal/redact"
)

// Auth holds the credentials for a NATS connection. At most one of
// user/password, token, creds_file and nkey_seed_file is used.
type Auth struct {
	User         string `yaml:"user"`
	Password     string `yaml:"password" secret:"whole"`
	Token        string `yaml:"token" secret:"whole"`
	CredsFile    string `yaml:"creds_file"`     // a .creds file (JWT and nkey seed)
	NKeySeedFile string `yaml:"nkey_seed_file"` // a file holding an nkey seed
}

// TLS configures TLS for a NATS connection. Empty means the server's own
// choice (plain text unless the URL is tls://).
type TLS struct {
	CAFile             string `yaml:"ca_file"`
	CertFile           string `yaml:"cert_file"`
	KeyFile            string `yaml:"key_file"`
	InsecureSkipVerify bool   `yaml:"insecure_skip_verify"`
}

// ReconnectWait is the pause between reconnect attempts. The client
// reconnects forever: a CDC pipeline outlives a broker restart.
const ReconnectWait = 500 * time.Millisecond

// Config is what a connector knows about its connection.
type Config struct {
	Name    string // the pipeline's name; the connection is named "tide <Name>"
	Servers []string
	Auth    Auth
	TLS     TLS
	Logger  *slog.Logger

	// OnReconnect, if set, is called after the connection is back.
	OnReconnect func()
	// OnError, if set, receives the connection's asynchronous errors
	// (slow consumer, permission violation) instead of a warning in the log.
	OnError func(sub *nats.Subscription, err error)
}

// Validate reports the problems of a connection's settings, joined. Each
// error starts with the key it is about ("servers[0]", "auth", "tls"),
// so that config validation can prefix the YAML path.
func Validate(servers []string, auth Auth, t TLS) error {
	var errs []error
	for i, s := range servers {
		if s == "" || strings.ContainsAny(s, " \t") {
			errs = append(errs, fmt.Errorf("servers[%d]: %q is not a server URL", i, RedactServers([]string{s})))
		}
	}
	n := 0
	for _, set := range []bool{auth.User != "" || auth.Password != "", auth.Token != "", auth.CredsFile != "", auth.NKeySeedFile != ""} {
		if set {
			n++
		}
	}
	if n > 1 {
		errs = append(errs, errors.New("auth: set only one of user/password, token, creds_file, nkey_seed_file"))
	}
	if auth.Password != "" && auth.User == "" {
		errs = append(errs, errors.New("auth.user: required with a password"))
	}
	if (t.CertFile == "") != (t.KeyFile == "") {
		errs = append(errs, errors.New("tls: cert_file and key_file go together"))
	}
	return errors.Join(errs...)
}

// Options returns the connection options for c. Callers append their own
// (a subscription buffer, a reconnect buffer policy) after these.
func Options(c Config) ([]nats.Option, error) {
	log := c.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	opts := []nats.Option{
		nats.Name("tide " + c.Name),
		nats.MaxReconnects(-1),
		nats.ReconnectWait(ReconnectWait),
		nats.DisconnectErrHandler(func(_ *nats.Conn, err error) {
			if err != nil {
				log.Warn("nats disconnected", "err", err)
			}
		}),
		nats.ReconnectHandler(func(nc *nats.Conn) {
			log.Info("nats reconnected", "url", nc.ConnectedUrlRedacted())
			if c.OnReconnect != nil {
				c.OnReconnect()
			}
		}),
		nats.ErrorHandler(func(_ *nats.Conn, sub *nats.Subscription, err error) {
			if c.OnError != nil {
				c.OnError(sub, err)
				return
			}
			subj := ""
			if sub != nil {
				subj = sub.Subject
			}
			log.Warn("nats async error", "subject", subj, "err", err)
		}),
	}
	a := c.Auth
	switch {
	case a.CredsFile != "":
		opts = append(opts, nats.UserCredentials(a.CredsFile))
	case a.NKeySeedFile != "":
		o, err := nats.NkeyOptionFromSeed(a.NKeySeedFile)
		if err != nil {
			return nil, fmt.Errorf("read nkey seed: %w", err)
		}
		opts = append(opts, o)
	case a.Token != "":
		opts = append(opts, nats.Token(a.Token))
	case a.User != "":
		opts = append(opts, nats.UserInfo(a.User, a.Password))
	}
	if c.TLS.CAFile != "" {
		opts = append(opts, nats.RootCAs(c.TLS.CAFile))
	}
	if c.TLS.CertFile != "" {
		opts = append(opts, nats.ClientCert(c.TLS.CertFile, c.TLS.KeyFile))
	}
	if c.TLS.InsecureSkipVerify {
		opts = append(opts, nats.Secure(&tls.Config{InsecureSkipVerify: true}))
	}
	return opts, nil
}

// connectRetryFor bounds the retries of a first connection that reached
// a server and was then broken.
const connectRetryFor = 10 * time.Second

// Connect dials c's servers with Options(c) followed by extra. A first
// connection that reached a server and broke before the handshake ended
// (EOF, a reset, a timeout: a network fault or a server restarting) is
// tried again for up to 10s; a refusal or a bad credential fails at once.
func Connect(c Config, extra ...nats.Option) (*nats.Conn, error) {
	opts, err := Options(c)
	if err != nil {
		return nil, err
	}
	deadline := time.Now().Add(connectRetryFor)
	for pause := 50 * time.Millisecond; ; pause = min(2*pause, time.Second) {
		nc, err := nats.Connect(strings.Join(c.Servers, ","), append(opts, extra...)...)
		if err == nil {
			return nc, nil
		}
		if !brokenHandshake(err) || time.Now().Add(pause).After(deadline) {
			return nil, fmt.Errorf("connect to nats %s: %w", RedactServers(c.Servers), err)
		}
		time.Sleep(pause)
	}
}

// brokenHandshake reports whether a failed first connection reached a
// server and lost the connection, as opposed to being refused or turned
// away.
func brokenHandshake(err error) bool {
	if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, syscall.ECONNRESET) ||
		errors.Is(err, syscall.EPIPE) || errors.Is(err, nats.ErrTimeout) {
		return true
	}
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}

// RedactServers joins the server URLs with any credentials in them
// removed, for messages.
func RedactServers(servers []string) string {
	out := make([]string, len(servers))
	for i, s := range servers {
		out[i] = s
		if u, err := url.Parse(s); err == nil && u.User != nil {
			u.User = nil
			out[i] = u.String()
		} else if at := strings.LastIndexByte(s, '@'); err != nil && at >= 0 {
			out[i] = s[at+1:]
		} else {
			out[i] = redact.String(s)
		}
	}
	return strings.Join(out, ",")
}

// ValidName reports whether s is a legal stream or consumer name.
func ValidName(s string) bool {
	return s != "" && len(s) <= 255 && !strings.ContainsAny(s, " \t\r\n.*>/\\")
}

// ValidSubject reports whether s is a legal subject (wildcards allowed).
func ValidSubject(s string) bool {
	if s == "" || strings.ContainsAny(s, " \t\r\n") {
		return false
	}
	toks := strings.Split(s, ".")
	for i, t := range toks {
		if t == "" || t == ">" && i != len(toks)-1 || len(t) > 1 && strings.ContainsAny(t, "*>") {
			return false
		}
	}
	return true
}
