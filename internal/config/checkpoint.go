package config

import (
	"fmt"
	"maps"
	"reflect"
	"regexp"
	"slices"
	"strings"

	"go.yaml.in/yaml/v3"

	"github.com/tide-cdc/tide/cdc"
	"github.com/tide-cdc/tide/checkpoint/natskv"
	"github.com/tide-cdc/tide/internal/natsconn"
)

// CheckpointStore is the mapping form of the checkpoint key: a store that
// needs settings. Exactly one field is set.
type CheckpointStore struct {
	NATSKV *NATSKVCheckpoint `yaml:"nats_kv"`
}

// NATSKVCheckpoint keeps the pipeline's checkpoint in a NATS KV bucket
// (checkpoint.nats_kv), replicated by the NATS cluster, so that another
// worker can resume it. Connection keys are the NATS source's.
type NATSKVCheckpoint struct {
	Servers  []string      `yaml:"servers" secret:"uri"` // required
	Bucket   string        `yaml:"bucket"`               // default tide_checkpoints
	Replicas int           `yaml:"replicas"`             // default 1; used when the bucket is created
	Auth     natsconn.Auth `yaml:"auth"`
	TLS      natsconn.TLS  `yaml:"tls"`
}

func (c *NATSKVCheckpoint) setDefaults() {
	c.Bucket, c.Replicas = natskv.DefaultBucket, 1
}

var bucketName = regexp.MustCompile(`^[A-Za-z0-9_-]+$`)

func (c *NATSKVCheckpoint) validate(path string) []error {
	var errs []error
	bad := func(key, format string, args ...any) {
		errs = append(errs, fmt.Errorf("%s.%s: %s", path, key, fmt.Sprintf(format, args...)))
	}
	if len(c.Servers) == 0 {
		bad("servers", "required: the NATS servers that hold the bucket, such as [nats://127.0.0.1:4222]")
	}
	if !bucketName.MatchString(c.Bucket) {
		bad("bucket", "%q is not a legal bucket name: use letters, digits, '_' and '-'", c.Bucket)
	}
	if c.Replicas < 1 || c.Replicas > natskv.MaxReplicas {
		bad("replicas", "%d is out of range: want 1 to %d (3 survives the loss of one NATS server)", c.Replicas, natskv.MaxReplicas)
	}
	return append(errs, prefixed(path, natsconn.Validate(c.Servers, c.Auth, c.TLS))...)
}

// mappingForm decodes checkpoint: {nats_kv: ...} into CheckpointStore
// and marks the pipeline's Checkpoint as "nats_kv".
func (p *Pipeline) mappingForm(key string, val *yaml.Node) (reflect.Value, bool) {
	if val.Kind == yaml.AliasNode {
		val = val.Alias
	}
	if key != "checkpoint" || val.Kind != yaml.MappingNode {
		return reflect.Value{}, false
	}
	p.Checkpoint = "nats_kv"
	return reflect.ValueOf(&p.CheckpointStore).Elem(), true
}

// keepers lists the registered sinks that keep checkpoints themselves.
func (p *Pipeline) keepers() []string {
	var out []string
	for _, k := range slices.Sorted(maps.Keys(p.conns.Sinks)) {
		if _, ok := p.conns.Sinks[k]().(cdc.CheckpointTable); ok {
			out = append(out, k)
		}
	}
	return out
}

func (p *Pipeline) checkpointErrors() []error {
	switch p.Checkpoint {
	case "", "file":
	case "sink":
		if p.Sink.Key != "" && !p.KeepsCheckpoints() {
			return []error{fmt.Errorf(`checkpoint: "sink" needs a sink that stores checkpoints in its own transaction (%s); use "file" with sink.%s`, strings.Join(p.keepers(), ", "), p.Sink.Key)}
		}
	case "nats_kv":
		if c := p.CheckpointStore.NATSKV; c != nil {
			return c.validate("checkpoint.nats_kv")
		}
		return []error{fmt.Errorf("checkpoint: nats_kv takes settings: write checkpoint: {nats_kv: {servers: [nats://127.0.0.1:4222], bucket: %s, replicas: 3}}", natskv.DefaultBucket)}
	default:
		return []error{fmt.Errorf(`checkpoint: %q is not one of file, sink, or the mapping {nats_kv: ...}`, p.Checkpoint)}
	}
	return nil
}
