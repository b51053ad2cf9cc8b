package nats

import (
	"fmt"
	"log/slog"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/tide-cdc/tide/cdc"
	"github.com/tide-cdc/tide/internal/natsconn"
)

// Config configures a Source. Its yaml tags are the source.nats section of
// a pipeline file, and DefaultConfig holds the defaults of both a pipeline
// file and a program. New also fills in a zero field that has no meaning
// of its own; LagPollInterval 0 disables the lag poll.
type Config struct {
	Name    string   `yaml:"-"`                    // pipeline name, for logs and the connection name
	Servers []string `yaml:"servers" secret:"uri"` // default nats://127.0.0.1:4222
	Auth    Auth     `yaml:"auth"`
	TLS     TLS      `yaml:"tls"`

	Mode       string `yaml:"mode"`        // "core" or "jetstream" (default)
	Subject    string `yaml:"subject"`     // core: subscribe subject; jetstream: default filter subject
	QueueGroup string `yaml:"queue_group"` // core only

	Stream         string   `yaml:"stream"`          // jetstream: the stream to read
	Consumer       string   `yaml:"consumer"`        // jetstream: the durable consumer's name
	FilterSubjects []string `yaml:"filter_subjects"` // default [Subject] when Subject is set

	Deliver       string        `yaml:"deliver"`        // "all" (default), "new", "by_start_sequence", "by_start_time"
	StartSequence uint64        `yaml:"start_sequence"` // by_start_sequence
	StartTime     string        `yaml:"start_time"`     // by_start_time, RFC 3339
	Ack           string        `yaml:"ack"`            // "explicit" (default) or "none"
	AckWait       time.Duration `yaml:"ack_wait"`       // default 30s
	MaxDeliver    int           `yaml:"max_deliver"`    // 0 means -1: unlimited
	// MaxAckPending is the server's limit on messages delivered and not
	// acknowledged (default 1000). Tide acknowledges a batch only after it
	// committed, so the pipeline holds up to two batches plus QueueSize
	// unacknowledged (more while a slow checkpoint store catches up): set
	// it above 2×max_batch + QueueSize, or the server pauses delivery
	// until each commit.
	MaxAckPending int           `yaml:"max_ack_pending"`
	FetchBatch    int           `yaml:"fetch_batch"`    // default 500
	FetchMaxWait  time.Duration `yaml:"fetch_max_wait"` // default 1s

	Format            string `yaml:"format"`          // "json" (default), "raw" (base64 in the envelope), "string"
	OnDecodeError     string `yaml:"on_decode_error"` // "fail" (default), "skip", "dead_letter", or "pipeline": the pipeline's on_error decides (the default where the file sets on_error)
	DeadLetterSubject string `yaml:"dead_letter_subject"`

	// LagPollInterval is how often consumer info is read for the lag
	// metric (default 5s); 0 disables it.
	LagPollInterval time.Duration `yaml:"lag_poll_interval"`

	AckTimeout   time.Duration `yaml:"-"` // a double ack's wait for the server; default 5s
	CloseTimeout time.Duration `yaml:"-"` // how long Close waits for the reader and acks in flight; default 5s
	QueueSize    int           `yaml:"-"` // events buffered between the reader and Poll; default 4×FetchBatch (core: 8192)

	// MaxBufferedBytes bounds the messages the source holds for the
	// pipeline (source.nats.max_buffered_bytes in a pipeline file,
	// default 64 MiB): three quarters for its queue, by the size of each
	// event, and in JetStream mode an eighth for each pull request the
	// client keeps open (about two at a time), but at least twice the
	// server's max_payload, so that any message fits. With a stalled sink
	// the source's memory stays within it. In core mode the client's own
	// buffer for a slow consumer comes on top (NATS drops beyond it).
	MaxBufferedBytes cdc.ByteSize `yaml:"max_buffered_bytes"`

	// Conn, if set, is used instead of dialing Servers; Close leaves it open.
	Conn *nats.Conn `yaml:"-"`

	Logger  *slog.Logger `yaml:"-"` // default: discard
	Metrics Metrics      `yaml:"-"` // optional
}

// Auth holds credentials; set at most one kind.
type Auth = natsconn.Auth

// TLS configures the connection's TLS.
type TLS = natsconn.TLS

// Defaults applied by New to zero fields.
const (
	DefaultAckWait          = 30 * time.Second
	DefaultMaxAckPending    = 1000
	DefaultFetchBatch       = 500
	DefaultFetchMaxWait     = time.Second
	DefaultLagPollInterval  = 5 * time.Second
	DefaultMaxBufferedBytes = 64 << 20
)

// syncQueueLen is how many messages the client buffers for a core
// subscription before it drops them as a slow consumer (8 MiB of pointers).
const syncQueueLen = 1 << 20

const (
	modeCore      = "core"
	modeJetStream = "jetstream"
)

// DefaultConfig returns the defaults of a pipeline file's source.nats
// section: a JetStream consumer reading the whole stream, acknowledging
// each message after its batch is committed.
func DefaultConfig() Config {
	return Config{
		Servers: []string{nats.DefaultURL}, Mode: modeJetStream, Deliver: "all", Ack: "explicit", AckWait: DefaultAckWait,
		MaxDeliver: -1, MaxAckPending: DefaultMaxAckPending,
		FetchBatch: DefaultFetchBatch, FetchMaxWait: DefaultFetchMaxWait,
		Format: "json", OnDecodeError: "fail", LagPollInterval: DefaultLagPollInterval,
		MaxBufferedBytes: DefaultMaxBufferedBytes,
	}
}

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
		c.AckWait = DefaultAckWait
	}
	if c.MaxDeliver == 0 {
		c.MaxDeliver = -1
	}
	if c.MaxAckPending == 0 {
		c.MaxAckPending = DefaultMaxAckPending
	}
	if c.FetchBatch <= 0 {
		c.FetchBatch = DefaultFetchBatch
	}
	if c.FetchMaxWait <= 0 {
		c.FetchMaxWait = DefaultFetchMaxWait
	}
	if c.Format == "" {
		c.Format = "json"
	}
	if c.OnDecodeError == "" {
		c.OnDecodeError = "fail"
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
	if c.MaxBufferedBytes <= 0 {
		c.MaxBufferedBytes = DefaultMaxBufferedBytes
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
	case "fail", "skip", "pipeline":
	case "dead_letter":
		if c.DeadLetterSubject == "" {
			return fmt.Errorf("on_decode_error dead_letter needs a dead_letter_subject")
		}
	default:
		return fmt.Errorf("on_decode_error %q is not one of fail, skip, dead_letter, pipeline", c.OnDecodeError)
	}
	switch c.Ack {
	case "explicit", "none":
	default:
		return fmt.Errorf("ack %q is not one of explicit, none", c.Ack)
	}
	return nil
}

// connect dials the servers with the connection options shared with the
// NATS sink (internal/natsconn), plus a core subscription's buffer.
func connect(c *Config, log *slog.Logger) (*nats.Conn, error) {
	return natsconn.Connect(natsconn.Config{
		Name: c.Name, Servers: c.Servers, Auth: c.Auth, TLS: c.TLS, Logger: log,
	}, nats.SyncQueueLen(syncQueueLen))
}
