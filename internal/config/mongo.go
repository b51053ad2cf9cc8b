package config

import (
	"encoding/json"
	"fmt"
	"path"
	"strconv"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/tide-cdc/tide/internal/redact"
)

// MongoSource configures the MongoDB change-stream source (source.mongo):
// one collection (collection), or many through one change stream
// (collections, exclude), of a replica set or sharded cluster, or of the
// embedded server when uri is "embedded".
type MongoSource struct {
	// URI is a MongoDB connection string, or "embedded" to start Tide's
	// embedded server in process (its data under data_dir/embedded).
	URI        string `yaml:"uri"`
	Database   string `yaml:"database"`   // required with collection
	Collection string `yaml:"collection"` // one collection; or collections, not both

	// Collections are names or globs (path.Match syntax) of collections
	// of Database, ["*"] for all of them including ones created later;
	// without Database, "db.coll" globs over the whole cluster. Exclude
	// globs are applied after.
	Collections []string `yaml:"collections"`
	Exclude     []string `yaml:"exclude"`
	// SnapshotParallelism is how many collections the initial snapshot
	// copies at a time; default 2.
	SnapshotParallelism int `yaml:"snapshot_parallelism"`

	// FullDocument: delta (default; updates carry only their
	// updateDescription) | update_lookup (the current document) |
	// when_available | required (post-images; need
	// changeStreamPreAndPostImages on the collection).
	FullDocument string `yaml:"full_document"`
	// BeforeChange: off (default) | when_available | required (pre-images).
	BeforeChange string `yaml:"before_change"`
	// Pipeline holds extra stages after $changeStream ($match, $project,
	// $addFields, $set, $unset, $replaceRoot, $replaceWith, $redact),
	// written as a YAML list or as a JSON array in a string.
	Pipeline MongoPipeline `yaml:"pipeline"`
	// Snapshot: initial (default; copy the existing documents first) | never.
	Snapshot string `yaml:"snapshot"`

	MaxBufferedBytes ByteSize `yaml:"max_buffered_bytes"` // default 64MiB
	BatchSize        int      `yaml:"batch_size"`         // driver cursor batch size; default 1000
	MaxAwait         Duration `yaml:"max_await"`          // how long an idle getMore waits; default 1s
	MaxReconnects    int      `yaml:"max_reconnects"`     // consecutive failed reconnects before failing; default 10

	// HeadroomWarn: below this checkpoint headroom (the time until the
	// checkpoint falls out of the oplog window) the source warns; default 1h.
	HeadroomWarn Duration `yaml:"headroom_warn"`
	// OplogPoll is how often the source reads the oplog window; default 30s.
	OplogPoll Duration `yaml:"oplog_poll"`

	Embedded *MongoEmbedded `yaml:"embedded"` // the embedded server's settings, for uri: embedded (secrets.go)
}

func (c *MongoSource) setDefaults() {
	c.URI = "embedded"
	c.FullDocument = "delta"
	c.BeforeChange = "off"
	c.Snapshot = "initial"
	c.MaxBufferedBytes = 64 << 20
	c.BatchSize = 1000
	c.MaxAwait = Duration(time.Second)
	c.MaxReconnects = 10
	c.SnapshotParallelism = 2
	c.HeadroomWarn = Duration(time.Hour)
	c.OplogPoll = Duration(30 * time.Second)
}

// Stages of a change-stream pipeline after $changeStream that MongoDB
// accepts.
var mongoStreamStages = map[string]bool{
	"$match": true, "$project": true, "$addFields": true, "$set": true, "$unset": true,
	"$replaceRoot": true, "$replaceWith": true, "$redact": true,
}

func (c *MongoSource) validate(path string) []error {
	var errs []error
	bad := func(field, format string, args ...any) {
		errs = append(errs, fmt.Errorf("%s.%s: %s", path, field, fmt.Sprintf(format, args...)))
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
		errs = append(errs, validateGlobs(path+".collections", c.Collections, c.Database == "")...)
	case c.Collection == "":
		bad("collection", "required (or collections)")
	case strings.Contains(c.Collection, "$") || strings.HasPrefix(c.Collection, "system."):
		bad("collection", "%q cannot be watched (no '$', no system collections)", c.Collection)
	}
	if len(c.Exclude) > 0 {
		if len(c.Collections) == 0 {
			bad("exclude", "needs collections (exclude filters what collections matches)")
		} else {
			errs = append(errs, validateGlobs(path+".exclude", c.Exclude, c.Database == "")...)
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
	} else if c.MaxBufferedBytes > 0 && c.MaxBufferedBytes < 1<<20 {
		bad("max_buffered_bytes", "%d is below the minimum of 1MiB", c.MaxBufferedBytes)
	}
	if c.BatchSize < 0 || c.BatchSize > 1<<20 {
		bad("batch_size", "%d is not between 1 and 1048576", c.BatchSize)
	}
	if c.MaxAwait < 0 {
		bad("max_await", "%s is negative", time.Duration(c.MaxAwait))
	}
	if c.MaxReconnects < 0 {
		bad("max_reconnects", "%d is negative", c.MaxReconnects)
	}
	if c.HeadroomWarn < 0 {
		bad("headroom_warn", "%s is negative", time.Duration(c.HeadroomWarn))
	}
	if c.OplogPoll < Duration(100*time.Millisecond) {
		bad("oplog_poll", "%s is below the minimum of 100ms", time.Duration(c.OplogPoll))
	}
	stages, err := c.Pipeline.Stages()
	if err != nil {
		bad("pipeline", "%v", err)
	}
	for i, st := range stages {
		if len(st) != 1 {
			bad(fmt.Sprintf("pipeline[%d]", i), "a stage is an object with exactly one key, such as {\"$match\": {...}}")
			continue
		}
		for name, arg := range st {
			if name == "$changeStreamSplitLargeEvent" {
				// Tide adds it where the server supports it; writing it
				// is allowed, last and with an empty argument.
				if m, ok := arg.(map[string]any); !ok || len(m) != 0 || i != len(stages)-1 {
					bad(fmt.Sprintf("pipeline[%d]", i), "$changeStreamSplitLargeEvent must be the last stage and take an empty object: "+
						"{\"$changeStreamSplitLargeEvent\": {}} (Tide adds it by itself where the server supports it)")
				}
				continue
			}
			if !mongoStreamStages[name] {
				bad(fmt.Sprintf("pipeline[%d]", i), "stage %q is not allowed in a change stream; use $match, $project, $addFields, $set, $unset, $replaceRoot, $replaceWith or $redact", name)
			}
		}
	}
	return append(errs, c.embeddedErrors(path)...)
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

// MongoPipeline is a list of aggregation stages, kept as a JSON array
// (Extended JSON, relaxed or canonical) in the order written. In YAML it
// is a list of mappings, or a string holding a JSON array.
type MongoPipeline string

// UnmarshalYAML accepts a sequence of mappings or a JSON array string.
func (p *MongoPipeline) UnmarshalYAML(n *yaml.Node) error {
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
		*p = MongoPipeline(s)
		return nil
	case yaml.SequenceNode:
		b, err := nodeJSON(nil, n)
		if err != nil {
			return err
		}
		*p = MongoPipeline(b)
		return nil
	}
	return fmt.Errorf("pipeline must be a list of stages or a JSON array string")
}

// Stages returns the stages as generic maps, for validation only (the
// source parses the JSON text itself, keeping key order).
func (p MongoPipeline) Stages() ([]map[string]any, error) {
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
