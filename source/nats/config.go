package nats

import (
	"crypto/tls"
	"fmt"
	"log/slog"
	"time"

	"github.com/nats-io/nats.go"
)

// Config configures a Source. It mirrors the source.nats YAML section; the
// zero value of a field means its default, applied by New.
type Config struct {
	Name    string   // pipeline name, for logs and the connection name
	Servers []string // default nats://127.0.0.1:4222
	Auth    Auth
	TLS     TLS

	Mode       string // "core" or "jetstream" (default)
	Subject    string // core: subscribe subject; jetstream: default filter subject
	QueueGroup string // core only

	Stream         string   // jetstream: the stream to read
	Consumer       string   // jetstream: the durable consumer's name
	FilterSubjects []string // default [Subject] when Subject is set

	Deliver       string // "all" (default), "new", "by_start_sequence", "by_start_time"
	StartSequence uint64 // by_start_sequence
	StartTime     string // by_start_time, RFC 3339
	Ack           string // "explicit" (default) or "none"
	AckWait       time.Duration
	MaxDeliver    int // 0 means -1: unlimited
	// MaxAckPending is the server's limit on messages delivered and not
	// acknowledged (default 1000). Tide acknowledges a batch only after it
	// committed, so the pipeline holds up to two batches plus QueueSize
	// unacknowledged: set it above 2×max_batch + QueueSize, or the server
	// pauses delivery until each commit.
	MaxAckPending int
	FetchBatch    int // default 500
	FetchMaxWait  time.Duration

	Format            string // "json" (default), "raw" (base64 in the envelope), "string"
	OnDecodeError     string // "fail" (default), "skip", "dead_letter"
	DeadLetterSubject string

	// LagPollInterval is how often consumer info is read for the lag metric:
	// zero means 5s, negative disables it.
	LagPollInterval time.Duration

	AckTimeout   time.Duration // a double ack's wait for the server; default 5s
	CloseTimeout time.Duration // how long Close waits for the reader and acks in flight; default 5s
	QueueSize    int           // events buffered between the reader and Poll; default 4×FetchBatch (core: 8192)

	// Conn, if set, is used instead of dialing Servers; Close leaves it open.
	Conn *nats.Conn

	Logger  *slog.Logger // default: discard
	Metrics Metrics      // optional
}

// Auth holds credentials; set at most one kind.
type Auth struct {
	User, Password string
	Token          string
	CredsFile      string
	NKeySeedFile   string
}

// TLS configures the connection's TLS.
type TLS struct {
	CAFile, CertFile, KeyFile string
	InsecureSkipVerify        bool
}

// syncQueueLen is how many messages the client buffers for a core
// subscription before it drops them as a slow consumer (8 MiB of pointers).
const syncQueueLen = 1 << 20

const (
	modeCore      = "core"
	modeJetStream = "jetstream"
)

func (c *Config) setDefaults() {
	if len(c.Servers) == 0 {
		c.Servers = []string{nats.DefaultURL}
	}
	if c.Mode == "" {
		c.Mode = modeJetStream
	}
	if c.Deliver == "" {
		c.Deliver = "all"
	}
	if c.Ack == "" {
		c.Ack = "explicit"
	}
	if c.AckWait == 0 {
		c.AckWait = 30 * time.Second
	}
	if c.MaxDeliver == 0 {
		c.MaxDeliver = -1
	}
	if c.MaxAckPending == 0 {
		c.MaxAckPending = 1000
	}
	if c.FetchBatch <= 0 {
		c.FetchBatch = 500
	}
	if c.FetchMaxWait <= 0 {
		c.FetchMaxWait = time.Second
	}
	if c.Format == "" {
		c.Format = "json"
	}
	if c.OnDecodeError == "" {
		c.OnDecodeError = "fail"
	}
	if c.LagPollInterval == 0 {
		c.LagPollInterval = 5 * time.Second
	}
	if c.AckTimeout <= 0 {
		c.AckTimeout = 5 * time.Second
	}
	if c.CloseTimeout <= 0 {
		c.CloseTimeout = 5 * time.Second
	}
	if c.QueueSize <= 0 {
		c.QueueSize = 4 * c.FetchBatch
		if c.Mode == modeCore {
			c.QueueSize = 8192
		}
	}
	if len(c.FilterSubjects) == 0 && c.Subject != "" {
		c.FilterSubjects = []string{c.Subject}
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
}

// check reports the first problem of a defaulted Config. config.Validate
// reports them all with YAML paths; this guards direct users of the package.
func (c *Config) check() error {
	switch c.Mode {
	case modeCore:
		if c.Subject == "" {
			return fmt.Errorf("core mode needs a subject")
		}
	case modeJetStream:
		if c.Stream == "" || c.Consumer == "" {
			return fmt.Errorf("jetstream mode needs a stream and a durable consumer name")
		}
	default:
		return fmt.Errorf("mode %q is not one of core, jetstream", c.Mode)
	}
	switch c.Format {
	case "json", "raw", "string":
	default:
		return fmt.Errorf("format %q is not one of json, raw, string", c.Format)
	}
	switch c.OnDecodeError {
	case "fail", "skip":
	case "dead_letter":
		if c.DeadLetterSubject == "" {
			return fmt.Errorf("on_decode_error dead_letter needs a dead_letter_subject")
		}
	default:
		return fmt.Errorf("on_decode_error %q is not one of fail, skip, dead_letter", c.OnDecodeError)
	}
	switch c.Ack {
	case "explicit", "none":
	default:
		return fmt.Errorf("ack %q is not one of explicit, none", c.Ack)
	}
	return nil
}

// connect dials the servers with the configured credentials. The client
// reconnects forever: a CDC pipeline outlives a broker restart.
func connect(c *Config, log *slog.Logger) (*nats.Conn, error) {
	opts := []nats.Option{
		nats.Name("tide " + c.Name),
		nats.SyncQueueLen(syncQueueLen), // a core subscription's buffer
		nats.MaxReconnects(-1),
		nats.ReconnectWait(500 * time.Millisecond),
		nats.DisconnectErrHandler(func(_ *nats.Conn, err error) {
			if err != nil {
				log.Warn("nats disconnected", "err", err)
			}
		}),
		nats.ReconnectHandler(func(nc *nats.Conn) { log.Info("nats reconnected", "url", nc.ConnectedUrlRedacted()) }),
		nats.ErrorHandler(func(_ *nats.Conn, sub *nats.Subscription, err error) {
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
	servers := ""
	for i, s := range c.Servers {
		if i > 0 {
			servers += ","
		}
		servers += s
	}
	nc, err := nats.Connect(servers, opts...)
	if err != nil {
		return nil, fmt.Errorf("connect to nats %s: %w", servers, err)
	}
	return nc, nil
}
