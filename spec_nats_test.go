package tide

import (
	"strings"
	"testing"
	"time"

	"github.com/tide-cdc/tide/cdc"
	natssink "github.com/tide-cdc/tide/sink/nats"
	natssource "github.com/tide-cdc/tide/source/nats"
)

func TestSpecNATSSections(t *testing.T) {
	t.Parallel()
	tests := map[string]struct {
		yaml string
		want []string // substrings of the error; none for a valid file
	}{
		"jetstream defaults": {yaml: `
name: p
source: {nats: {stream: ORDERS, consumer: tide, subject: "orders.>"}}
sink: {nats: {stream: CDC, create_stream: {subjects: ["cdc.>"]}}}`},
		"core": {yaml: `
name: p
source: {nats: {mode: core, subject: "orders.*", queue_group: q, lag_poll_interval: 0s}}
sink: {file: {path: out.jsonl}}`},
		"jetstream needs names": {yaml: `
name: p
source: {nats: {queue_group: q}}
sink: {file: {path: out.jsonl}}`, want: []string{"source.nats.stream: required in jetstream mode",
			"source.nats.consumer: required in jetstream mode", "source.nats.queue_group: only for mode: core"}},
		"illegal names and subjects": {yaml: `
name: p
source: {nats: {stream: "OR.DERS", consumer: "a b", subject: "orders.>.x", filter_subjects: ["ok.*", "bad..x"]}}
sink: {file: {path: out.jsonl}}`, want: []string{`source.nats.stream: "OR.DERS" is not a legal stream name`,
			`source.nats.consumer: "a b" is not a legal consumer name`, `source.nats.subject: "orders.>.x" is not a legal subject`,
			`source.nats.filter_subjects[1]: "bad..x" is not a legal subject`}},
		"max_buffered_bytes too small": {yaml: `
name: p
source: {nats: {stream: S, consumer: c, max_buffered_bytes: 64KiB}}
sink: {file: {path: out.jsonl}}`, want: []string{`source.nats.max_buffered_bytes: 65536 is below the minimum of 1MiB`}},
		"max_buffered_bytes with a unit": {yaml: `
name: p
source: {nats: {stream: S, consumer: c, max_buffered_bytes: 64MiB}}
sink: {file: {path: out.jsonl}}`},
		"start positions": {yaml: `
name: p
source: {nats: {stream: S, consumer: c, deliver: by_start_time, start_time: "yesterday"}}
sink: {file: {path: out.jsonl}}`, want: []string{`source.nats.start_time: deliver: by_start_time needs an RFC 3339 time`}},
		"start sequence": {yaml: `
name: p
source: {nats: {stream: S, consumer: c, deliver: by_start_sequence}}
sink: {file: {path: out.jsonl}}`, want: []string{"source.nats.start_sequence: deliver: by_start_sequence needs a start_sequence of 1 or more"}},
		"enums": {yaml: `
name: p
source: {nats: {stream: S, consumer: c, mode: jetstream, deliver: last, ack: all, format: xml, on_decode_error: retry}}
sink: {file: {path: out.jsonl}}`, want: []string{`source.nats.deliver: "last" is not one of`, `source.nats.ack: "all" is not one of explicit, none`,
			`source.nats.format: "xml" is not one of json, raw, string`, `source.nats.on_decode_error: "retry" is not one of fail, skip, dead_letter`}},
		"dead letter": {yaml: `
name: p
source: {nats: {stream: S, consumer: c, on_decode_error: dead_letter}}
sink: {file: {path: out.jsonl}}`, want: []string{"source.nats.dead_letter_subject: required with on_decode_error: dead_letter"}},
		"auth": {yaml: `
name: p
source: {nats: {stream: S, consumer: c, auth: {token: t, creds_file: f}, tls: {cert_file: c}}}
sink: {file: {path: out.jsonl}}`, want: []string{"source.nats.auth: set only one of", "source.nats.tls: cert_file and key_file go together"}},
		"sink": {yaml: `
name: p
source: {generate: {count: 1}}
sink: {nats: {subject: "cdc.{database}", max_in_flight: -1, create_stream: {storage: tape, replicas: 7}}}`, want: []string{
			"sink.nats.stream: required", `sink.nats.subject: "cdc.{database}" has an unknown placeholder`,
			"sink.nats.max_in_flight: must not be negative", `sink.nats.create_stream.storage: "tape" is not one of file, memory`,
			"sink.nats.create_stream.replicas: 7 is not between 1 and 5"}},
		"sink wildcard": {yaml: `
name: p
source: {generate: {count: 1}}
sink: {nats: {stream: CDC, subject: "cdc.*.{coll}"}}`, want: []string{`sink.nats.subject: "cdc.*.{coll}" is not a legal subject to publish to`}},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			s, err := parseSpec(tc.yaml, nil)
			if len(tc.want) == 0 {
				if err != nil {
					t.Fatal(err)
				}
				if n := sectionConfig[*natssource.Config](t, s.Source, "nats"); n.Mode == "jetstream" && (n.AckWait != 30*time.Second || n.FetchBatch != 500 || n.LagPollInterval != 5*time.Second || n.MaxDeliver != -1) {
					t.Errorf("source defaults: %+v", n)
				} else if n.Mode == "core" && n.LagPollInterval != 0 {
					t.Errorf("an explicit lag_poll_interval: 0s became %v", n.LagPollInterval)
				}
				if s.Sink.Key == "nats" {
					if c := sectionConfig[*natssink.Config](t, s.Sink, "nats"); c.Subject != "cdc.{db}.{coll}" || c.MaxInFlight != 4096 {
						t.Errorf("sink defaults: %+v", c)
					}
				}
				return
			}
			if err == nil {
				t.Fatalf("no error, want %q", tc.want)
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error lacks %q:\n%v", w, err)
				}
			}
		})
	}
}

func TestSpecNATSSinkMaxOutage(t *testing.T) {
	t.Parallel()
	tests := map[string]struct {
		value string // sink.nats.max_outage, or "" to leave it out
		want  time.Duration
		err   string // a substring of the error, or "" for none
	}{
		"default":      {"", time.Minute, ""},
		"set":          {"3s", 3 * time.Second, ""},
		"zero":         {"0s", 0, ""}, // the sink's default, as for postgres
		"negative":     {"-1s", 0, "line 4: sink.nats.max_outage: must not be negative (0 means the default, 1m0s)"},
		"not duration": {"soon", 0, "line 4: sink.nats.max_outage: "},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			yaml := "name: p\nsource: {generate: {count: 1}}\nsink:\n  nats: {stream: CDC"
			if tc.value != "" {
				yaml += ", max_outage: " + tc.value
			}
			yaml += "}\n"
			s, err := parseSpec(yaml, nil)
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("Parse = %v, want an error containing %q", err, tc.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got := sectionConfig[*natssink.Config](t, s.Sink, "nats").MaxOutage; got != tc.want {
				t.Errorf("max_outage = %v, want %v", got, tc.want)
			}
		})
	}
}

// TestSpecNATSMaxBufferedBytesReachesTheSource: the size in the file is
// the source's budget, and absent means the source's default. The
// section's Config is the source's own, handed to it as decoded.
func TestSpecNATSMaxBufferedBytesReachesTheSource(t *testing.T) {
	t.Parallel()
	for yaml, want := range map[string]cdc.ByteSize{
		"max_buffered_bytes: 16MiB, ": 16 << 20,
		"":                            natssource.DefaultMaxBufferedBytes,
	} {
		s, err := parseSpec("name: p\nsource: {nats: {"+yaml+"stream: S, consumer: c}}\nsink: {file: {path: out.jsonl}}\n", nil)
		if err != nil {
			t.Fatalf("%q: %v", yaml, err)
		}
		if got := sectionConfig[*natssource.Config](t, s.Source, "nats").MaxBufferedBytes; got != want {
			t.Errorf("%q: source MaxBufferedBytes = %d, want %d", yaml, got, want)
		}
	}
}
