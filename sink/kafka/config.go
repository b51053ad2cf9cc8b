package kafka

import (
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/url"
	"regexp"
	"strconv"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/tide-cdc/tide/cdc"
	"github.com/tide-cdc/tide/internal/placeholder"
)

// Defaults.
const (
	DefaultTopic           = "{pipeline}.{db}.{coll}" // Debezium's topic.prefix.db.coll
	DefaultCheckpointTopic = "tide_checkpoints"
	DefaultMaxOutage       = time.Minute
)

// Keys (Config.Key).
const (
	KeyDocumentKey = "document_key"
	KeyNone        = "none"
)

// Config configures a Sink. Its yaml tags are the sink.kafka section of a
// pipeline file; zero values mean the defaults, applied by New.
type Config struct {
	// Brokers are the seed brokers, host:port; default 127.0.0.1:9092.
	Brokers []string `yaml:"brokers"`
	// Topic names each record's topic, with {pipeline}, {db}, {coll},
	// {namespace}, {op} and {route} (a route transform's) filled from
	// the pipeline and the event;
	// characters a topic name cannot hold become '_'. Default
	// DefaultTopic.
	Topic string `yaml:"topic"`
	// Key is KeyDocumentKey (default: Debezium's {"id": "<_id as
	// strict JSON>"}, null for an event without a document key) or
	// KeyNone (no key: records are spread over the partitions).
	Key string `yaml:"key"`
	// CreateTopics creates a missing topic with Partitions and
	// ReplicationFactor; default true (nil). Off, a missing topic is a
	// permanent error.
	CreateTopics *bool `yaml:"create_topics"`
	// Partitions and ReplicationFactor are those of a topic Tide creates;
	// -1 (the default, and 0) is the broker's default. ReplicationFactor
	// is also the checkpoint topic's.
	Partitions        int32 `yaml:"partitions"`
	ReplicationFactor int16 `yaml:"replication_factor"`
	// Tombstones writes a record with a null value after each delete, as
	// Debezium does, with encode.format: debezium; default true (nil).
	Tombstones *bool `yaml:"tombstones"`
	// Compression is none (default), gzip, snappy, lz4 or zstd.
	Compression string `yaml:"compression"`
	// Headers adds tide-op, tide-namespace, tide-position and
	// tide-cluster-time to each record; default true (nil).
	Headers *bool `yaml:"headers"`
	// MaxOutage bounds how long the sink rides out an unreachable
	// cluster (retrying) before the pipeline fails; default
	// DefaultMaxOutage.
	MaxOutage time.Duration `yaml:"max_outage"`
	SASL      *SASL         `yaml:"sasl"`
	TLS       *TLS          `yaml:"tls"`
	// SchemaRegistry is where the sink registers the schemas of
	// encode.format: avro (which needs it, and only it uses).
	SchemaRegistry *SchemaRegistry `yaml:"schema_registry"`
	// CheckpointTopic is the compacted topic of the checkpoints the sink
	// keeps (checkpoint: sink); default DefaultCheckpointTopic.
	CheckpointTopic string `yaml:"checkpoint_topic"`

	// Pipeline is the pipeline's name: {pipeline} in Topic, the key of
	// its checkpoint record, and the base of the transactional id.
	Pipeline string `yaml:"-"`
	// Format is encode.format: with debezium and avro, deletes are
	// followed by a tombstone (Tombstones); with avro the sink writes
	// Debezium's values (encode.Debezium's records) as Avro.
	Format string       `yaml:"-"`
	Logger *slog.Logger `yaml:"-"`
	// ClientOptions are added to every franz-go client the sink makes,
	// for a program's tuning (retries, timeouts, a logger); the sink's
	// own producer settings (acks, compression, partitioner, the
	// transactional id) come after them and win.
	ClientOptions []kgo.Opt `yaml:"-"`
}

// SASL holds the credentials of SASL authentication.
type SASL struct {
	Mechanism string `yaml:"mechanism"` // PLAIN, SCRAM-SHA-256 or SCRAM-SHA-512
	User      string `yaml:"user"`
	Password  string `yaml:"password" secret:"whole"`
}

// TLS configures TLS to the brokers. An empty section is TLS with the
// system's roots.
type TLS struct {
	CAFile   string `yaml:"ca_file"`
	CertFile string `yaml:"cert_file"`
	KeyFile  string `yaml:"key_file"`
}

// SchemaRegistry locates a Confluent-compatible schema registry.
type SchemaRegistry struct {
	URL string `yaml:"url" secret:"uri"`
}

// DefaultConfig returns the defaults of a pipeline file's sink.kafka
// section, which a program should start from too.
func DefaultConfig() Config {
	yes := func() *bool { b := true; return &b }
	return Config{
		Brokers: []string{"127.0.0.1:9092"}, Topic: DefaultTopic, Key: KeyDocumentKey,
		CreateTopics: yes(), Partitions: -1, ReplicationFactor: -1, Tombstones: yes(),
		Compression: "none", Headers: yes(), MaxOutage: DefaultMaxOutage, CheckpointTopic: DefaultCheckpointTopic,
	}
}

// withDefaults fills the zero values of c.
func (c Config) withDefaults() Config {
	d := DefaultConfig()
	if len(c.Brokers) == 0 {
		c.Brokers = d.Brokers
	}
	if c.Topic == "" {
		c.Topic = d.Topic
	}
	if c.Key == "" {
		c.Key = d.Key
	}
	if c.CreateTopics == nil {
		c.CreateTopics = d.CreateTopics
	}
	if c.Partitions == 0 {
		c.Partitions = -1
	}
	if c.ReplicationFactor == 0 {
		c.ReplicationFactor = -1
	}
	if c.Tombstones == nil {
		c.Tombstones = d.Tombstones
	}
	if c.Compression == "" {
		c.Compression = d.Compression
	}
	if c.Headers == nil {
		c.Headers = d.Headers
	}
	if c.MaxOutage <= 0 {
		c.MaxOutage = d.MaxOutage
	}
	if c.CheckpointTopic == "" {
		c.CheckpointTopic = d.CheckpointTopic
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	return c
}

// legalTopic is what Kafka accepts as a topic name.
var legalTopic = regexp.MustCompile(`^[a-zA-Z0-9._-]{1,249}$`)

// Validate reports every problem of c, joined, or nil. Each error starts
// with the YAML key it is about; package config prefixes the section's
// path and line. The zero value of a field is its default and passes.
func (c Config) Validate() error {
	var errs []error
	bad := func(key, format string, args ...any) {
		errs = append(errs, fmt.Errorf("%s: %s", key, fmt.Sprintf(format, args...)))
	}
	for i, b := range c.Brokers {
		if _, port, err := net.SplitHostPort(b); err != nil {
			bad(fmt.Sprintf("brokers[%d]", i), "%q is not host:port", b)
		} else if n, err := strconv.Atoi(port); err != nil || n < 1 || n > 65535 {
			bad(fmt.Sprintf("brokers[%d]", i), "%q: port %q is not a number from 1 to 65535", b, port)
		}
	}
	if c.Topic != "" {
		if _, err := parseTopic(c.Topic); err != nil {
			bad("topic", "%v", err)
		}
	}
	switch c.Key {
	case "", KeyDocumentKey, KeyNone:
	default:
		bad("key", "%q is not one of %s, %s", c.Key, KeyDocumentKey, KeyNone)
	}
	if c.Partitions < -1 {
		bad("partitions", "%d: want a positive number, or -1 for the broker's default", c.Partitions)
	}
	if c.ReplicationFactor < -1 {
		bad("replication_factor", "%d: want a positive number, or -1 for the broker's default", c.ReplicationFactor)
	}
	if _, err := codec(c.Compression); err != nil {
		bad("compression", "%v", err)
	}
	if c.MaxOutage < 0 {
		bad("max_outage", "must not be negative (0 means the default, %s)", DefaultMaxOutage)
	}
	if s := c.SASL; s != nil {
		switch s.Mechanism {
		case "PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512":
		case "":
			bad("sasl.mechanism", "required: PLAIN, SCRAM-SHA-256 or SCRAM-SHA-512")
		default:
			bad("sasl.mechanism", "%q is not one of PLAIN, SCRAM-SHA-256, SCRAM-SHA-512", s.Mechanism)
		}
		if s.User == "" {
			bad("sasl.user", "required")
		}
		if s.Password == "" {
			bad("sasl.password", "required")
		}
	}
	if t := c.TLS; t != nil && (t.CertFile == "") != (t.KeyFile == "") {
		bad("tls", "cert_file and key_file go together")
	}
	if r := c.SchemaRegistry; r != nil {
		if u, err := url.Parse(r.URL); r.URL == "" || err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			bad("schema_registry.url", "%q is not an http:// or https:// URL", redactURL(r.URL))
		}
	}
	if c.CheckpointTopic != "" && (!legalTopic.MatchString(c.CheckpointTopic) || c.CheckpointTopic == "." || c.CheckpointTopic == "..") {
		bad("checkpoint_topic", "%q is not a legal topic name (letters, digits, '.', '_', '-'; at most 249)", c.CheckpointTopic)
	}
	return errors.Join(errs...)
}

// CheckFormat takes the encodings whose records the sink writes as they
// are (json, canonical and debezium), and keeps the one of the pipeline
// in c.Format: with debezium, deletes are followed by tombstones.
func (c *Config) CheckFormat(format string, _ bool) error {
	switch format {
	case "json", "canonical", "debezium":
		if c.SchemaRegistry != nil {
			return fmt.Errorf("%s does not use sink.kafka.schema_registry, which is for avro", format)
		}
	case "avro":
		if c.SchemaRegistry == nil {
			return errors.New("avro needs sink.kafka.schema_registry: {url: ...}, where the sink registers its schemas")
		}
	default:
		return fmt.Errorf("the Kafka sink writes json, canonical, debezium or avro records, not %q", format)
	}
	c.Format = format
	return nil
}

// WritesAvro says that the sink writes encode.format: avro itself: it
// has a schema registry for its schemas.
func (c Config) WritesAvro() bool { return c.SchemaRegistry != nil }

// redactURL hides the password of a URL's user information.
func redactURL(s string) string {
	u, err := url.Parse(s)
	if err != nil || u.User == nil {
		return s
	}
	return u.Redacted()
}

// parseTopic parses a topic template; its literal text must be legal in
// a topic name.
func parseTopic(tmpl string) ([]placeholder.Part, error) {
	parts, err := placeholder.Parse(tmpl, "pipeline", "db", "coll", "namespace", "op", "route")
	if err != nil {
		return nil, err
	}
	for _, p := range parts {
		if p.Lit != "" && !legalTopic.MatchString(p.Lit) {
			return nil, fmt.Errorf("%q: %q cannot be part of a topic name (letters, digits, '.', '_', '-')", tmpl, p.Lit)
		}
	}
	if tmpl == "." || tmpl == ".." {
		return nil, fmt.Errorf("%q is not a legal topic name", tmpl)
	}
	return parts, nil
}

// Batch sizes where the pipeline file sets none: a Kafka commit (a flush,
// or a transaction) costs a round trip to every partition leader, so
// fewer, larger batches go faster.
const (
	DefaultMaxRecords = 10000
	DefaultMaxBytes   = 16 << 20
)

// BatchDefaults are the batch sizes the sink wants where the pipeline
// file sets none.
func (Config) BatchDefaults() (int, cdc.ByteSize) { return DefaultMaxRecords, DefaultMaxBytes }
