package config

import (
	"fmt"
	"strings"
	"time"
)

// NATSAuth holds the credentials for a NATS connection. At most one of
// user/password, token, creds_file and nkey_seed_file is used.
type NATSAuth struct {
	User         string `yaml:"user"`
	Password     string `yaml:"password"`
	Token        string `yaml:"token"`
	CredsFile    string `yaml:"creds_file"`     // a .creds file (JWT and nkey seed)
	NKeySeedFile string `yaml:"nkey_seed_file"` // a file holding an nkey seed
}

// NATSTLS configures TLS for a NATS connection. Empty means the server's
// own choice (plain text unless the URL is tls://).
type NATSTLS struct {
	CAFile             string `yaml:"ca_file"`
	CertFile           string `yaml:"cert_file"`
	KeyFile            string `yaml:"key_file"`
	InsecureSkipVerify bool   `yaml:"insecure_skip_verify"`
}

// NATSSource configures the NATS source (source.nats): a core subscription
// (at-most-once) or a durable JetStream pull consumer (at-least-once,
// acknowledged only after the sink committed and the checkpoint was saved).
// setDefaults fills in the defaults shown before the YAML is decoded.
type NATSSource struct {
	Servers []string `yaml:"servers"` // default [nats://127.0.0.1:4222]
	Auth    NATSAuth `yaml:"auth"`
	TLS     NATSTLS  `yaml:"tls"`

	Mode       string `yaml:"mode"`        // core | jetstream (default)
	Subject    string `yaml:"subject"`     // core: the subscribe subject; jetstream: default filter
	QueueGroup string `yaml:"queue_group"` // core only

	Stream         string   `yaml:"stream"`          // jetstream: required
	Consumer       string   `yaml:"consumer"`        // jetstream: durable name, required
	FilterSubjects []string `yaml:"filter_subjects"` // default [subject] when subject is set

	Deliver       string        `yaml:"deliver"`        // all (default) | new | by_start_sequence | by_start_time
	StartSequence uint64        `yaml:"start_sequence"` // by_start_sequence
	StartTime     string        `yaml:"start_time"`     // by_start_time, RFC 3339
	Ack           string        `yaml:"ack"`            // explicit (default) | none
	AckWait       time.Duration `yaml:"ack_wait"`       // default 30s
	MaxDeliver    int           `yaml:"max_deliver"`    // default -1 (unlimited)
	MaxAckPending int           `yaml:"max_ack_pending"`
	FetchBatch    int           `yaml:"fetch_batch"`    // default 500
	FetchMaxWait  time.Duration `yaml:"fetch_max_wait"` // default 1s

	Format            string `yaml:"format"`          // json (default) | raw | string
	OnDecodeError     string `yaml:"on_decode_error"` // fail (default) | skip | dead_letter
	DeadLetterSubject string `yaml:"dead_letter_subject"`

	// LagPollInterval is how often the consumer's pending count is read
	// (default 5s); an explicit 0 disables it.
	LagPollInterval time.Duration `yaml:"lag_poll_interval"`
}

func (c *NATSSource) setDefaults() {
	*c = NATSSource{
		Mode: "jetstream", Deliver: "all", Ack: "explicit", AckWait: 30 * time.Second,
		MaxDeliver: -1, MaxAckPending: 1000, FetchBatch: 500, FetchMaxWait: time.Second,
		Format: "json", OnDecodeError: "fail", LagPollInterval: 5 * time.Second,
	}
}

func (c *NATSSink) setDefaults() {
	*c = NATSSink{Subject: "cdc.{db}.{coll}", MaxInFlight: 4096, MaxOutage: DefaultNATSSinkMaxOutage}
}

// NATSStreamSpec is the stream the JetStream sink creates when it is missing.
type NATSStreamSpec struct {
	Subjects        []string      `yaml:"subjects"`         // default ["cdc.>"]
	Storage         string        `yaml:"storage"`          // file (default) | memory
	Replicas        int           `yaml:"replicas"`         // default 1
	DuplicateWindow time.Duration `yaml:"duplicate_window"` // default 2m
}

// NATSSink configures the JetStream sink (sink.nats).
type NATSSink struct {
	Servers []string `yaml:"servers"` // default [nats://127.0.0.1:4222]
	Auth    NATSAuth `yaml:"auth"`
	TLS     NATSTLS  `yaml:"tls"`

	Stream       string          `yaml:"stream"`        // required
	CreateStream *NATSStreamSpec `yaml:"create_stream"` // create the stream if missing; nil: it must exist
	Subject      string          `yaml:"subject"`       // template with {db} {coll} {op} {namespace}; default "cdc.{db}.{coll}"
	MaxInFlight  int             `yaml:"max_in_flight"` // unacknowledged publishes; default 4096

	// MaxOutage is how long the sink waits for NATS while it is
	// unreachable, at start and for a batch not acknowledged, before the
	// pipeline fails. Default 60s; 0 also means the default, as for the
	// postgres sink's retries.
	MaxOutage time.Duration `yaml:"max_outage"`
}

// DefaultNATSSinkMaxOutage is sink.nats.max_outage's default.
const DefaultNATSSinkMaxOutage = time.Minute

func (c *NATSSource) validate(path string) []error {
	var errs []error
	bad := func(field, format string, args ...any) {
		errs = append(errs, fmt.Errorf("%s.%s: %s", path, field, fmt.Sprintf(format, args...)))
	}
	errs = append(errs, validateNATSConn(path, c.Servers, c.Auth, c.TLS)...)
	switch c.Mode {
	case "core":
		if c.Subject == "" {
			bad("subject", "required in core mode")
		}
		if c.Stream != "" || c.Consumer != "" {
			bad("mode", "core mode does not use stream or consumer; set mode: jetstream")
		}
	case "", "jetstream":
		if c.QueueGroup != "" {
			bad("queue_group", "only for mode: core")
		}
		if c.Stream == "" {
			bad("stream", "required in jetstream mode")
		} else if !natsName(c.Stream) {
			bad("stream", "%q is not a legal stream name (no spaces, '.', '*', '>', '/' or '\\')", c.Stream)
		}
		if c.Consumer == "" {
			bad("consumer", "required in jetstream mode (the durable name)")
		} else if !natsName(c.Consumer) {
			bad("consumer", "%q is not a legal consumer name (no spaces, '.', '*', '>', '/' or '\\')", c.Consumer)
		}
	default:
		bad("mode", "%q is not one of core, jetstream", c.Mode)
	}
	if c.Subject != "" && !natsSubject(c.Subject) {
		bad("subject", "%q is not a legal subject", c.Subject)
	}
	for i, s := range c.FilterSubjects {
		if !natsSubject(s) {
			bad(fmt.Sprintf("filter_subjects[%d]", i), "%q is not a legal subject", s)
		}
	}
	switch c.Deliver {
	case "", "all", "new":
		if c.StartSequence != 0 {
			bad("start_sequence", "only with deliver: by_start_sequence")
		}
		if c.StartTime != "" {
			bad("start_time", "only with deliver: by_start_time")
		}
	case "by_start_sequence":
		if c.StartSequence == 0 {
			bad("start_sequence", "deliver: by_start_sequence needs a start_sequence of 1 or more")
		}
	case "by_start_time":
		if _, err := time.Parse(time.RFC3339, c.StartTime); err != nil {
			bad("start_time", "deliver: by_start_time needs an RFC 3339 time such as 2026-01-02T15:04:05Z, got %q", c.StartTime)
		}
	default:
		bad("deliver", "%q is not one of all, new, by_start_sequence, by_start_time", c.Deliver)
	}
	switch c.Ack {
	case "", "explicit", "none":
	default:
		bad("ack", "%q is not one of explicit, none", c.Ack)
	}
	if c.AckWait < 0 {
		bad("ack_wait", "must not be negative")
	}
	if c.MaxDeliver < -1 {
		bad("max_deliver", "must be -1 (unlimited) or positive")
	}
	if c.MaxAckPending < -1 {
		bad("max_ack_pending", "must be -1 (unlimited) or positive")
	}
	if c.FetchBatch < 0 {
		bad("fetch_batch", "must not be negative")
	}
	if c.FetchMaxWait < 0 {
		bad("fetch_max_wait", "must not be negative")
	}
	switch c.Format {
	case "", "json", "raw", "string":
	default:
		bad("format", "%q is not one of json, raw, string", c.Format)
	}
	switch c.OnDecodeError {
	case "", "fail", "skip":
		if c.DeadLetterSubject != "" {
			bad("dead_letter_subject", "only with on_decode_error: dead_letter")
		}
	case "dead_letter":
		if c.DeadLetterSubject == "" {
			bad("dead_letter_subject", "required with on_decode_error: dead_letter")
		} else if !natsSubject(c.DeadLetterSubject) || strings.ContainsAny(c.DeadLetterSubject, "*>") {
			bad("dead_letter_subject", "%q is not a legal subject to publish to", c.DeadLetterSubject)
		}
	default:
		bad("on_decode_error", "%q is not one of fail, skip, dead_letter", c.OnDecodeError)
	}
	if c.LagPollInterval < 0 {
		bad("lag_poll_interval", "must not be negative (0 disables)")
	}
	return errs
}

func (c *NATSSink) validate(path string) []error {
	var errs []error
	bad := func(field, format string, args ...any) {
		errs = append(errs, fmt.Errorf("%s.%s: %s", path, field, fmt.Sprintf(format, args...)))
	}
	errs = append(errs, validateNATSConn(path, c.Servers, c.Auth, c.TLS)...)
	if c.Stream == "" {
		bad("stream", "required")
	} else if !natsName(c.Stream) {
		bad("stream", "%q is not a legal stream name (no spaces, '.', '*', '>', '/' or '\\')", c.Stream)
	}
	if c.Subject != "" {
		// Check the template with every placeholder replaced by a token.
		s := c.Subject
		for _, p := range []string{"{db}", "{coll}", "{op}", "{namespace}"} {
			s = strings.ReplaceAll(s, p, "x")
		}
		if strings.ContainsAny(s, "{}") {
			bad("subject", "%q has an unknown placeholder; use {db} {coll} {op} {namespace}", c.Subject)
		} else if !natsSubject(s) || strings.ContainsAny(s, "*>") {
			bad("subject", "%q is not a legal subject to publish to", c.Subject)
		}
	}
	if c.MaxInFlight < 0 {
		bad("max_in_flight", "must not be negative")
	}
	if c.MaxOutage < 0 {
		bad("max_outage", "must not be negative (0 means the default, %s)", DefaultNATSSinkMaxOutage)
	}
	if cs := c.CreateStream; cs != nil {
		for i, s := range cs.Subjects {
			if !natsSubject(s) {
				bad(fmt.Sprintf("create_stream.subjects[%d]", i), "%q is not a legal subject", s)
			}
		}
		switch cs.Storage {
		case "", "file", "memory":
		default:
			bad("create_stream.storage", "%q is not one of file, memory", cs.Storage)
		}
		if cs.Replicas < 0 || cs.Replicas > 5 {
			bad("create_stream.replicas", "%d is not between 1 and 5", cs.Replicas)
		}
		if cs.DuplicateWindow < 0 {
			bad("create_stream.duplicate_window", "must not be negative")
		}
	}
	return errs
}

func validateNATSConn(path string, servers []string, auth NATSAuth, tls NATSTLS) []error {
	var errs []error
	for i, s := range servers {
		if s == "" || strings.ContainsAny(s, " \t") {
			errs = append(errs, fmt.Errorf("%s.servers[%d]: %q is not a server URL", path, i, s))
		}
	}
	n := 0
	for _, set := range []bool{auth.User != "" || auth.Password != "", auth.Token != "", auth.CredsFile != "", auth.NKeySeedFile != ""} {
		if set {
			n++
		}
	}
	if n > 1 {
		errs = append(errs, fmt.Errorf("%s.auth: set only one of user/password, token, creds_file, nkey_seed_file", path))
	}
	if auth.Password != "" && auth.User == "" {
		errs = append(errs, fmt.Errorf("%s.auth.user: required with a password", path))
	}
	if (tls.CertFile == "") != (tls.KeyFile == "") {
		errs = append(errs, fmt.Errorf("%s.tls: cert_file and key_file go together", path))
	}
	return errs
}

// natsName reports whether s is a legal stream or consumer name.
func natsName(s string) bool {
	return s != "" && len(s) <= 255 && !strings.ContainsAny(s, " \t\r\n.*>/\\")
}

// natsSubject reports whether s is a legal subject (wildcards allowed).
func natsSubject(s string) bool {
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
