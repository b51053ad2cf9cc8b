package nats

import (
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/tide-cdc/tide/internal/natsconn"
)

// Validate reports every problem of c, joined, or nil. Each error starts
// with the YAML key it is about, as in "stream: required in jetstream
// mode"; package config prefixes the section's path and line. The zero
// value of a field is its default and passes.
func (c Config) Validate() error {
	var errs []error
	bad := func(field, format string, args ...any) {
		errs = append(errs, fmt.Errorf("%s: %s", field, fmt.Sprintf(format, args...)))
	}
	if err := natsconn.Validate(c.Servers, c.Auth, c.TLS); err != nil {
		errs = append(errs, err)
	}
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
		} else if !natsconn.ValidName(c.Stream) {
			bad("stream", "%q is not a legal stream name (no spaces, '.', '*', '>', '/' or '\\')", c.Stream)
		}
		if c.Consumer == "" {
			bad("consumer", "required in jetstream mode (the durable name)")
		} else if !natsconn.ValidName(c.Consumer) {
			bad("consumer", "%q is not a legal consumer name (no spaces, '.', '*', '>', '/' or '\\')", c.Consumer)
		}
	default:
		bad("mode", "%q is not one of core, jetstream", c.Mode)
	}
	if c.Subject != "" && !natsconn.ValidSubject(c.Subject) {
		bad("subject", "%q is not a legal subject", c.Subject)
	}
	for i, s := range c.FilterSubjects {
		if !natsconn.ValidSubject(s) {
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
	case "", "fail", "skip", "pipeline":
		if c.DeadLetterSubject != "" {
			bad("dead_letter_subject", "only with on_decode_error: dead_letter")
		}
	case "dead_letter":
		if c.DeadLetterSubject == "" {
			bad("dead_letter_subject", "required with on_decode_error: dead_letter")
		} else if !natsconn.ValidSubject(c.DeadLetterSubject) || strings.ContainsAny(c.DeadLetterSubject, "*>") {
			bad("dead_letter_subject", "%q is not a legal subject to publish to", c.DeadLetterSubject)
		}
	default:
		bad("on_decode_error", "%q is not one of fail, skip, dead_letter, pipeline", c.OnDecodeError)
	}
	if c.LagPollInterval < 0 {
		bad("lag_poll_interval", "must not be negative (0 disables)")
	}
	if c.MaxBufferedBytes < 0 {
		bad("max_buffered_bytes", "%d is negative", c.MaxBufferedBytes)
	} else if c.MaxBufferedBytes > 0 && c.MaxBufferedBytes < 1<<20 {
		bad("max_buffered_bytes", "%d is below the minimum of 1MiB", c.MaxBufferedBytes)
	}
	return errors.Join(errs...)
}

// DecodeErrorsToPipeline makes a payload that is not JSON an error of its
// change, handled by the pipeline's on_error (on_decode_error:
// pipeline), unless the file set on_decode_error itself.
func (c *Config) DecodeErrorsToPipeline() { c.OnDecodeError = "pipeline" }
