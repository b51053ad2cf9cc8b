package config

import (
	"fmt"

	natssink "github.com/tide-cdc/tide/sink/nats"
	natssource "github.com/tide-cdc/tide/source/nats"
)

// NATSSource configures the NATS source (source.nats): a core subscription
// (at-most-once) or a durable JetStream pull consumer (at-least-once,
// acknowledged only after the sink committed and the checkpoint was saved).
// Its keys are the source's own Config; validation is the source's
// Config.Validate.
type NATSSource struct {
	natssource.Config `yaml:",inline"`

	// MaxBufferedBytes is the source's MaxBufferedBytes, written with a
	// unit (64MiB); the source's own field has no YAML form.
	MaxBufferedBytes ByteSize `yaml:"max_buffered_bytes"` // default 64MiB
}

// setDefaults fills in, before the YAML is decoded, the defaults that an
// explicit zero in the file must be able to override: lag_poll_interval: 0
// disables the lag poll, where the source's zero means its default.
func (c *NATSSource) setDefaults() {
	c.Config = natssource.Config{
		Mode: "jetstream", Deliver: "all", Ack: "explicit", AckWait: natssource.DefaultAckWait,
		MaxDeliver: -1, MaxAckPending: natssource.DefaultMaxAckPending,
		FetchBatch: natssource.DefaultFetchBatch, FetchMaxWait: natssource.DefaultFetchMaxWait,
		Format: "json", OnDecodeError: "fail", LagPollInterval: natssource.DefaultLagPollInterval,
	}
}

// Source returns the source's Config for the named pipeline. In YAML an
// explicit lag_poll_interval of 0 turns the lag poll off; in the source a
// negative interval does.
func (c *NATSSource) Source(pipeline string) natssource.Config {
	cfg := c.Config
	cfg.Name = pipeline
	cfg.MaxBufferedBytes = int64(c.MaxBufferedBytes)
	if cfg.LagPollInterval == 0 {
		cfg.LagPollInterval = -1
	}
	return cfg
}

func (c *NATSSource) validate(path string) []error {
	errs := prefixed(path, c.Config.Validate())
	if c.MaxBufferedBytes < 0 {
		errs = append(errs, fmt.Errorf("%s.max_buffered_bytes: %d is negative", path, c.MaxBufferedBytes))
	} else if c.MaxBufferedBytes > 0 && c.MaxBufferedBytes < 1<<20 {
		errs = append(errs, fmt.Errorf("%s.max_buffered_bytes: %d is below the minimum of 1MiB", path, c.MaxBufferedBytes))
	}
	return errs
}

// NATSSink configures the JetStream sink (sink.nats). Its keys are the
// sink's own Config; validation is the sink's Config.Validate.
type NATSSink struct {
	natssink.Config `yaml:",inline"`
}

// DefaultNATSSinkMaxOutage is sink.nats.max_outage's default.
const DefaultNATSSinkMaxOutage = natssink.DefaultMaxOutage

func (c *NATSSink) setDefaults() {
	c.Config = natssink.Config{Subject: "cdc.{db}.{coll}", MaxInFlight: 4096, MaxOutage: DefaultNATSSinkMaxOutage}
}

// Sink returns the sink's Config for the named pipeline.
func (c *NATSSink) Sink(pipeline string) natssink.Config {
	cfg := c.Config
	cfg.Pipeline = pipeline
	return cfg
}

func (c *NATSSink) validate(path string) []error { return prefixed(path, c.Config.Validate()) }
