package mongo

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"path"
	"strconv"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/tide-cdc/tide/cdc"
	"github.com/tide-cdc/tide/internal/redact"
)

// Config configures a Source. Its yaml tags are the source.mongo section
// of a pipeline file, and DefaultConfig holds the defaults of both a
// pipeline file and a program: start from it. New also fills in a zero
// field that has no meaning of its own (a zero batch size), so a zero
// Config works too, except where zero means something: HeadroomWarn 0
// never warns.
type Config struct {
	// URI is a MongoDB connection string. In a pipeline file "embedded"
	// makes package tide start its embedded server in process (its data
	// under data_dir/embedded) and pass that server's URI; the source
	// itself does not start servers.
	URI        string `yaml:"uri" secret:"uri"`
	Database   string `yaml:"database"`   // required with collection
	Collection string `yaml:"collection"` // one collection; or collections, not both

	// Collections, if set, makes the source capture many collections
	// through one change stream: names or path.Match globs of collections
	// of Database (["*"]: all of them, including ones created later), or,
	// without Database, "db.coll" globs over the whole cluster. Exclude
	// globs are applied after. System collections and the admin, local
	// and config databases are never captured. At a restart, a checkpoint
	// written with other Collections or Exclude is accepted only if they
	// narrow it (entries left out of Collections, or added to Exclude).
	Collections []string `yaml:"collections"`
	Exclude     []string `yaml:"exclude"`
	// SnapshotParallelism is how many collections the initial snapshot
	// copies at a time (of one collection: how many _id ranges of it are
	// read ahead at once, handed out in _id order), and incremental
	// snapshots, all of them together; default 2.
	SnapshotParallelism int `yaml:"snapshot_parallelism"`
	// SignalCollection, if set ("coll" of Database, or "db.coll"), is
	// watched for signals: inserting {type: "snapshot", collections:
	// ["db.coll", ...], filter: {...}, chunk: N} there starts an
	// incremental snapshot. The signals' own changes are not forwarded.
	// Off by default.
	SignalCollection string `yaml:"signal_collection"`

	// FullDocument: delta (default; updates carry only their
	// updateDescription) | update_lookup (the current document) |
	// when_available | required (post-images; need
	// changeStreamPreAndPostImages on the collection).
	FullDocument string `yaml:"full_document"`
	// BeforeChange: off (default) | when_available | required (pre-images).
	BeforeChange string `yaml:"before_change"`
	// Pipeline holds extra stages after $changeStream ($match, $project,
	// $addFields, $set, $unset, $replaceRoot, $replaceWith, $redact): a
	// JSON array (Extended JSON); in YAML a list of stages or a string
	// holding a JSON array.
	Pipeline Stages `yaml:"pipeline"`
	// Snapshot: initial (default; copy the existing documents first) | never.
	Snapshot string `yaml:"snapshot"`

	MaxBufferedBytes cdc.ByteSize  `yaml:"max_buffered_bytes"` // the reader's queue budget; default 64MiB
	BatchSize        int32         `yaml:"batch_size"`         // driver cursor batch size; default 1000
	MaxAwait         time.Duration `yaml:"max_await"`          // how long an idle getMore waits; default 1s
	MaxReconnects    int           `yaml:"max_reconnects"`     // consecutive failed reconnects before Poll fails; default 0: no cap, the pipeline's retry policy decides

	// HeadroomWarn is the checkpoint headroom (the time until the
	// checkpoint falls out of the oplog window) below which the source
	// logs a warning; default 1h, 0: never.
	HeadroomWarn time.Duration `yaml:"headroom_warn"`
	// OplogPoll is how often the oplog window is read for the headroom
	// metrics; default 30s.
	OplogPoll time.Duration `yaml:"oplog_poll"`

	// Embedded configures the embedded server that uri: embedded starts.
	Embedded *Embedded `yaml:"embedded"`

	AdmitAttempts  int           `yaml:"-"` // admission attempts on transient errors; default 0: no cap, the retry policy decides
	BackoffBase    time.Duration `yaml:"-"` // first retry wait; default 100 ms
	BackoffMax     time.Duration `yaml:"-"` // retry wait cap; default 10 s
	ConnectTimeout time.Duration `yaml:"-"` // server selection and connect timeout; default 10 s
	SnapshotBatch  int32         `yaml:"-"` // documents per snapshot batch; default 1000

	// Progress, if set, receives a one-line progress bar of the snapshot
	// (documents done / estimated total), redrawn with '\r'. Pass a
	// terminal; leave nil otherwise.
	Progress io.Writer    `yaml:"-"`
	Logger   *slog.Logger `yaml:"-"`
}

// Embedded configures the embedded server that uri: embedded starts
// (source.mongo.embedded).
type Embedded struct {
	// Auth makes the embedded server require authentication, and the
	// source authenticate as User with Password (SCRAM-SHA-256, against
	// admin). On a data directory without users, User is created first,
	// with the root role; afterwards it must be a user of the server's
	// admin database.
	Auth     bool   `yaml:"auth"`
	User     string `yaml:"user"`
	Password string `yaml:"password" secret:"whole"` // write it as ${VAR}
}

// Defaults of a Config.
const (
	DefaultURI                 = "embedded"
	DefaultMaxBufferedBytes    = 64 << 20
	DefaultBatchSize           = 1000
	DefaultMaxAwait            = time.Second
	DefaultMaxReconnects       = 0 // no cap: the retry policy's max_elapsed decides
	DefaultSnapshotParallelism = 2
)

// DefaultConfig returns the defaults of a pipeline file's source.mongo
// section; fill in the collection (or collections) and the URI.
func DefaultConfig() Config {
	return Config{
		URI:                 DefaultURI,
		FullDocument:        "delta",
		BeforeChange:        "off",
		Snapshot:            "initial",
		MaxBufferedBytes:    DefaultMaxBufferedBytes,
		BatchSize:           DefaultBatchSize,
		MaxAwait:            DefaultMaxAwait,
		MaxReconnects:       DefaultMaxReconnects,
		SnapshotParallelism: DefaultSnapshotParallelism,
		HeadroomWarn:        DefaultHeadroomWarn,
		OplogPoll:           DefaultOplogPoll,
	}
}

// minBufferedBytes is the smallest MaxBufferedBytes: a queue that could
// not hold a few ordinary events is a mistake (tests use such small ones
// to fill the queue quickly).
const minBufferedBytes = 4 << 10

// Stages of a change-stream pipeline after $changeStream that MongoDB
// accepts.
var streamStages = map[string]bool{
	"$match": true, "$project": true, "$addFields": true, "$set": true, "$unset": true,
	"$replaceRoot": true, "$replaceWith": true, "$redact": true,
}

// Validate reports every problem of c, joined, or nil. Each error starts
// with the key it is about ("collection: required"); package tide puts the
// section's path and the key's line in front. A zero field that New
// fills in passes.
func (c Config) Validate() error {
	var errs []error
	bad := func(field, format string, args ...any) {
		errs = append(errs, fmt.Errorf("%s: %s", field, fmt.Sprintf(format, args...)))
	}
	if c.URI == "" {
		bad("uri", `required: a mongodb:// or mongodb+srv:// connection string, or "embedded"`)
	} else if c.URI != "embedded" && !strings.HasPrefix(c.URI, "mongodb://") && !strings.HasPrefix(c.URI, "mongodb+srv://") {
		bad("uri", `%q is not a mongodb:// or mongodb+srv:// connection string, nor "embedded"`, redact.String(c.URI))
	}
	if c.Database == "" && len(c.Collections) == 0 {
		bad("database", "required (or collections, as \"db.coll\" globs, for a cluster-wide stream)")
	} else if strings.ContainsAny(c.Database, `/\. "$`) {
		bad("database", "%q is not a legal database name (no '/', '\\', '.', ' ', '\"' or '$')", c.Database)
	}
	switch {
	case c.Collection != "" && len(c.Collections) > 0:
		bad("collection", "collection and collections are both set: name one collection, or list collections, not both")
	case len(c.Collections) > 0:
		errs = append(errs, validateGlobs("collections", c.Collections, c.Database == "")...)
	case c.Collection == "":
		bad("collection", "required (or collections)")
	case strings.Contains(c.Collection, "$") || strings.HasPrefix(c.Collection, "system."):
		bad("collection", "%q cannot be watched (no '$', no system collections)", c.Collection)
	}
	if len(c.Exclude) > 0 {
		if len(c.Collections) == 0 {
			bad("exclude", "needs collections (exclude filters what collections matches)")
		} else {
			errs = append(errs, validateGlobs("exclude", c.Exclude, c.Database == "")...)
		}
	}
	if c.SignalCollection != "" {
		db, coll, ok := strings.Cut(c.SignalCollection, ".")
		if !ok {
			db, coll = c.Database, c.SignalCollection
		}
		switch {
		case db == "":
			bad("signal_collection", "%q: name it as \"db.coll\" (the source has no database)", c.SignalCollection)
		case !capturable(db, coll) || strings.Contains(coll, "$"):
			bad("signal_collection", "%q cannot be watched (no '$', no system collections, not in admin, local or config)", c.SignalCollection)
		case len(c.Collections) == 0 && db == c.Database && coll == c.Collection:
			bad("signal_collection", "%q is the captured collection itself: name another one", c.SignalCollection)
		}
	}
	if c.SnapshotParallelism < 1 || c.SnapshotParallelism > 64 {
		bad("snapshot_parallelism", "%d is not between 1 and 64", c.SnapshotParallelism)
	}
	switch c.FullDocument {
	case "", "delta", "update_lookup", "when_available", "required":
	default:
		bad("full_document", "%q is not one of delta, update_lookup, when_available, required", c.FullDocument)
	}
	switch c.BeforeChange {
	case "", "off", "when_available", "required":
	default:
		bad("before_change", "%q is not one of off, when_available, required", c.BeforeChange)
	}
	switch c.Snapshot {
	case "", "initial", "never":
	default:
		bad("snapshot", "%q is not one of initial, never", c.Snapshot)
	}
	if c.MaxBufferedBytes < 0 {
		bad("max_buffered_bytes", "%d is negative", c.MaxBufferedBytes)
	} else if c.MaxBufferedBytes > 0 && c.MaxBufferedBytes < minBufferedBytes {
		bad("max_buffered_bytes", "%d is below the minimum of %s", c.MaxBufferedBytes, cdc.ByteSize(minBufferedBytes))
	}
	if c.BatchSize < 0 || c.BatchSize > 1<<20 {
		bad("batch_size", "%d is not between 1 and 1048576", c.BatchSize)
	}
	if c.MaxAwait < 0 {
		bad("max_await", "%s is negative", c.MaxAwait)
	}
	if c.MaxReconnects < 0 {
		bad("max_reconnects", "%d is negative", c.MaxReconnects)
	}
	if c.HeadroomWarn < 0 {
		bad("headroom_warn", "%s is negative", c.HeadroomWarn)
	}
	if c.OplogPoll != 0 && c.OplogPoll < 100*time.Millisecond {
		bad("oplog_poll", "%s is below the minimum of 100ms", c.OplogPoll)
	}
	errs = append(errs, c.Pipeline.problems()...)
	return errors.Join(append(errs, c.embeddedErrors()...)...)
}

// problems checks the stages as written: one key each, and only those a
// change stream allows.
func (p Stages) problems() []error {
	var errs []error
	bad := func(field, format string, args ...any) {
		errs = append(errs, fmt.Errorf("%s: %s", field, fmt.Sprintf(format, args...)))
	}
	stages, err := p.Decode()
	if err != nil {
		bad("pipeline", "%v", err)
		return errs
	}
	for i, st := range stages {
		key := fmt.Sprintf("pipeline[%d]", i)
		if len(st) != 1 {
			bad(key, "a stage is an object with exactly one key, such as {\"$match\": {...}}")
			continue
		}
		for name, arg := range st {
			if name == splitStage {
				// Tide adds it where the server supports it; writing it
				// is allowed, last and with an empty argument.
				if m, ok := arg.(map[string]any); !ok || len(m) != 0 || i != len(stages)-1 {
					bad(key, "$changeStreamSplitLargeEvent must be the last stage and take an empty object: "+
						"{\"$changeStreamSplitLargeEvent\": {}} (Tide adds it by itself where the server supports it)")
				}
				continue
			}
			if !streamStages[name] {
				bad(key, "stage %q is not allowed in a change stream; use $match, $project, $addFields, $set, $unset, $replaceRoot, $replaceWith or $redact", name)
			}
		}
	}
	return errs
}

func (c Config) embeddedErrors() []error {
	e := c.Embedded
	if e == nil {
		return nil
	}
	var errs []error
	bad := func(field, format string, args ...any) {
		errs = append(errs, fmt.Errorf("embedded%s: %s", field, fmt.Sprintf(format, args...)))
	}
	switch {
	case c.URI != "embedded":
		bad("", `applies to uri: embedded only; put the user and password of a MongoDB server in its uri`)
	case e.Auth && e.User == "":
		bad(".user", "required with auth: true: the user the pipeline authenticates as (created on a data directory without users)")
	case e.Auth && e.Password == "":
		bad(".password", "required with auth: true; write it as ${VAR} and set the variable in the environment")
	case !e.Auth && (e.User != "" || e.Password != ""):
		bad(".auth", "user and password are set but auth is false; set auth: true to require authentication")
	}
	return errs
}

// Describe tells the sink's configuration what the records are: changes
// of documents, full on update only with update_lookup or required, and
// the table a sink writes by default, named after the collection.
func (c Config) Describe() cdc.SourceInfo {
	info := cdc.SourceInfo{Section: "source.mongo", Documents: true, Table: c.Collection}
	switch {
	case len(c.Collections) > 0 && c.Database != "":
		info.Table = "{coll}"
	case len(c.Collections) > 0:
		info.Table = "{db}_{coll}"
	}
	switch c.FullDocument {
	case "update_lookup", "required":
		info.FullUpdates = true
	case "when_available":
		info.PartialUpdates = `source.mongo.full_document: "when_available" may leave the full document of an update out: use update_lookup or required`
	default:
		fd := c.FullDocument
		if fd == "" {
			fd = "delta"
		}
		info.PartialUpdates = fmt.Sprintf("source.mongo.full_document: %q gives updates without their full document: set full_document to update_lookup or required", fd)
	}
	return info
}

// validateGlobs checks collections or exclude entries: path.Match globs,
// "db.coll" ones when the stream is cluster-wide.
func validateGlobs(key string, globs []string, cluster bool) []error {
	var errs []error
	for i, g := range globs {
		field := fmt.Sprintf("%s[%d]", key, i)
		switch {
		case g == "":
			errs = append(errs, fmt.Errorf("%s: empty; write a collection name or a glob such as \"orders_*\"", field))
		case !validGlob(g):
			errs = append(errs, fmt.Errorf("%s: %q is not a valid glob (syntax: * ? [a-z] [^a-z] \\x)", field, g))
		case cluster && !strings.Contains(g, "."):
			errs = append(errs, fmt.Errorf("%s: %q: without database, an entry is a \"db.coll\" glob, such as \"shop.*\"", field, g))
		}
	}
	return errs
}

func validGlob(g string) bool {
	_, err := path.Match(g, "")
	return err == nil
}

// Stages is a list of aggregation stages, kept as a JSON array (Extended
// JSON, relaxed or canonical) in the order written. In YAML it is a list
// of mappings, or a string holding a JSON array.
type Stages string

// UnmarshalYAML accepts a sequence of mappings or a JSON array string.
func (p *Stages) UnmarshalYAML(n *yaml.Node) error {
	switch n.Kind {
	case yaml.ScalarNode:
		s := strings.TrimSpace(n.Value)
		if s == "" || n.Tag == "!!null" {
			*p = ""
			return nil
		}
		var stages []json.RawMessage
		if err := json.Unmarshal([]byte(s), &stages); err != nil {
			return fmt.Errorf("pipeline is not a JSON array of stages: %v", err)
		}
		*p = Stages(s)
		return nil
	case yaml.SequenceNode:
		b, err := nodeJSON(nil, n)
		if err != nil {
			return err
		}
		*p = Stages(b)
		return nil
	}
	return fmt.Errorf("pipeline must be a list of stages or a JSON array string")
}

// Decode returns the stages as generic maps, for checks (the source
// parses the JSON text itself, keeping key order).
func (p Stages) Decode() ([]map[string]any, error) {
	if strings.TrimSpace(string(p)) == "" {
		return nil, nil
	}
	var stages []map[string]any
	if err := json.Unmarshal([]byte(p), &stages); err != nil {
		return nil, fmt.Errorf("not a JSON array of stage objects: %v", err)
	}
	return stages, nil
}

// nodeJSON appends n as JSON, keeping the order of mapping keys (which
// matters to some stages, such as $sort inside $match expressions).
func nodeJSON(dst []byte, n *yaml.Node) ([]byte, error) {
	switch n.Kind {
	case yaml.AliasNode:
		return nodeJSON(dst, n.Alias)
	case yaml.DocumentNode:
		if len(n.Content) == 0 {
			return append(dst, "null"...), nil
		}
		return nodeJSON(dst, n.Content[0])
	case yaml.SequenceNode:
		dst = append(dst, '[')
		for i, c := range n.Content {
			if i > 0 {
				dst = append(dst, ',')
			}
			var err error
			if dst, err = nodeJSON(dst, c); err != nil {
				return dst, err
			}
		}
		return append(dst, ']'), nil
	case yaml.MappingNode:
		dst = append(dst, '{')
		for i := 0; i+1 < len(n.Content); i += 2 {
			if i > 0 {
				dst = append(dst, ',')
			}
			k, _ := json.Marshal(n.Content[i].Value)
			dst = append(append(dst, k...), ':')
			var err error
			if dst, err = nodeJSON(dst, n.Content[i+1]); err != nil {
				return dst, err
			}
		}
		return append(dst, '}'), nil
	case yaml.ScalarNode:
		var v any
		if err := n.Decode(&v); err != nil {
			return dst, fmt.Errorf("line %d: %v", n.Line, err)
		}
		switch x := v.(type) {
		case nil:
			return append(dst, "null"...), nil
		case bool:
			return strconv.AppendBool(dst, x), nil
		case int:
			return strconv.AppendInt(dst, int64(x), 10), nil
		case float64:
			b, err := json.Marshal(x)
			if err != nil {
				return dst, fmt.Errorf("line %d: %v", n.Line, err)
			}
			return append(dst, b...), nil
		default:
			b, _ := json.Marshal(n.Value)
			return append(dst, b...), nil
		}
	}
	return dst, fmt.Errorf("line %d: unsupported YAML node", n.Line)
}
