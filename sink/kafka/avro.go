package kafka

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/hamba/avro/v2"
	"github.com/twmb/franz-go/pkg/sr"
)

// ValueSchema is the Avro schema of a record's value with encode.format:
// avro: Debezium's MongoDB change event, each document a JSON string (as
// Debezium's io.debezium.data.Json fields are), registered under
// "<topic>-value".
const ValueSchema = `{
  "type": "record", "name": "Envelope", "namespace": "tide.debezium.mongodb",
  "fields": [
    {"name": "before", "type": ["null", "string"], "default": null},
    {"name": "after", "type": ["null", "string"], "default": null},
    {"name": "updateDescription", "default": null, "type": ["null", {
      "type": "record", "name": "UpdateDescription",
      "fields": [
        {"name": "removedFields", "type": ["null", {"type": "array", "items": "string"}], "default": null},
        {"name": "updatedFields", "type": ["null", "string"], "default": null},
        {"name": "truncatedArrays", "default": null, "type": ["null", {"type": "array", "items": {
          "type": "record", "name": "TruncatedArray",
          "fields": [{"name": "field", "type": "string"}, {"name": "size", "type": "int"}]}}]}
      ]}]},
    {"name": "source", "type": {
      "type": "record", "name": "Source",
      "fields": [
        {"name": "version", "type": "string"},
        {"name": "connector", "type": "string"},
        {"name": "name", "type": "string"},
        {"name": "ts_ms", "type": "long"},
        {"name": "snapshot", "type": ["null", "string"], "default": null},
        {"name": "db", "type": "string"},
        {"name": "sequence", "type": ["null", "string"], "default": null},
        {"name": "ts_us", "type": ["null", "long"], "default": null},
        {"name": "ts_ns", "type": ["null", "long"], "default": null},
        {"name": "collection", "type": "string"},
        {"name": "ord", "type": "int"},
        {"name": "lsid", "type": ["null", "string"], "default": null},
        {"name": "txnNumber", "type": ["null", "long"], "default": null},
        {"name": "wallTime", "type": ["null", "long"], "default": null}
      ]}},
    {"name": "op", "type": ["null", "string"], "default": null},
    {"name": "ts_ms", "type": ["null", "long"], "default": null},
    {"name": "ts_us", "type": ["null", "long"], "default": null},
    {"name": "ts_ns", "type": ["null", "long"], "default": null},
    {"name": "transaction", "default": null, "type": ["null", {
      "type": "record", "name": "ConnectDefault", "namespace": "io.confluent.connect.avro",
      "fields": [
        {"name": "id", "type": "string"},
        {"name": "total_order", "type": "long"},
        {"name": "data_collection_order", "type": "long"}
      ]}]}
  ]
}`

// KeySchema is the Avro schema of a record's key with encode.format:
// avro: Debezium's {id: "<_id as strict JSON>"}, registered under
// "<topic>-key".
const KeySchema = `{"type": "record", "name": "Key", "namespace": "tide.debezium.mongodb",
  "fields": [{"name": "id", "type": "string"}]}`

var (
	valueSchema = avro.MustParse(ValueSchema)
	keySchema   = avro.MustParse(KeySchema)
)

// The Go form of the schemas: the fields of encode.Debezium's JSON.
type (
	avroEnvelope struct {
		Before            *string          `json:"before" avro:"before"`
		After             *string          `json:"after" avro:"after"`
		UpdateDescription *avroUpdate      `json:"updateDescription" avro:"updateDescription"`
		Source            avroSource       `json:"source" avro:"source"`
		Op                *string          `json:"op" avro:"op"`
		TsMS              *int64           `json:"ts_ms" avro:"ts_ms"`
		TsUS              *int64           `json:"ts_us" avro:"ts_us"`
		TsNS              *int64           `json:"ts_ns" avro:"ts_ns"`
		Transaction       *avroTransaction `json:"transaction" avro:"transaction"`
	}
	avroUpdate struct {
		RemovedFields   []string        `json:"removedFields" avro:"removedFields"`
		UpdatedFields   *string         `json:"updatedFields" avro:"updatedFields"`
		TruncatedArrays []avroTruncated `json:"truncatedArrays" avro:"truncatedArrays"`
	}
	avroTruncated struct {
		Field string `json:"field" avro:"field"`
		Size  int32  `json:"size" avro:"size"`
	}
	avroSource struct {
		Version    string  `json:"version" avro:"version"`
		Connector  string  `json:"connector" avro:"connector"`
		Name       string  `json:"name" avro:"name"`
		TsMS       int64   `json:"ts_ms" avro:"ts_ms"`
		Snapshot   *string `json:"snapshot" avro:"snapshot"`
		DB         string  `json:"db" avro:"db"`
		Sequence   *string `json:"sequence" avro:"sequence"`
		TsUS       *int64  `json:"ts_us" avro:"ts_us"`
		TsNS       *int64  `json:"ts_ns" avro:"ts_ns"`
		Collection string  `json:"collection" avro:"collection"`
		Ord        int32   `json:"ord" avro:"ord"`
		Lsid       *string `json:"lsid" avro:"lsid"`
		TxnNumber  *int64  `json:"txnNumber" avro:"txnNumber"`
		WallTime   *int64  `json:"wallTime" avro:"wallTime"`
	}
	avroTransaction struct {
		ID                  string `json:"id" avro:"id"`
		TotalOrder          int64  `json:"total_order" avro:"total_order"`
		DataCollectionOrder int64  `json:"data_collection_order" avro:"data_collection_order"`
	}
	avroKey struct {
		ID string `json:"id" avro:"id"`
	}
)

// schemaIDs are the registry's ids of a topic's key and value schemas.
type schemaIDs struct{ key, value int }

// registry registers the sink's schemas for each topic, once.
type registry struct {
	client *sr.Client
	url    string
	ids    map[string]schemaIDs
}

func newRegistry(url string) (*registry, error) {
	cl, err := sr.NewClient(sr.URLs(url))
	if err != nil {
		return nil, fmt.Errorf("schema_registry: %w", err)
	}
	return &registry{client: cl, url: redactURL(url), ids: map[string]schemaIDs{}}, nil
}

// register registers the key and value schemas under the topic's
// subjects (an identical schema keeps its id).
func (r *registry) register(ctx context.Context, topic string) (schemaIDs, error) {
	if ids, ok := r.ids[topic]; ok {
		return ids, nil
	}
	var ids schemaIDs
	for _, s := range []struct {
		subject string
		schema  string
		id      *int
	}{{topic + "-key", KeySchema, &ids.key}, {topic + "-value", ValueSchema, &ids.value}} {
		ss, err := r.client.CreateSchema(ctx, s.subject, sr.Schema{Schema: s.schema, Type: sr.TypeAvro})
		if err != nil {
			return ids, fmt.Errorf("register schema %s at %s: %w", s.subject, r.url, err)
		}
		*s.id = ss.ID
	}
	r.ids[topic] = ids
	return ids, nil
}

// appendConfluent appends the Confluent wire format's header: magic byte
// 0 and the schema id, big-endian.
func appendConfluent(dst []byte, id int) []byte {
	dst = append(dst, 0)
	return binary.BigEndian.AppendUint32(dst, uint32(id))
}

// avroValue appends the Avro form of value, Debezium's JSON.
func avroValue(dst []byte, id int, value []byte) ([]byte, error) {
	var env avroEnvelope
	if err := json.Unmarshal(value, &env); err != nil {
		return dst, fmt.Errorf("avro: read the Debezium value: %w", err)
	}
	b, err := avro.Marshal(valueSchema, &env)
	if err != nil {
		return dst, fmt.Errorf("avro: %w", err)
	}
	return append(appendConfluent(dst, id), b...), nil
}

// avroKeyOf appends the Avro form of key, Debezium's JSON key.
func avroKeyOf(dst []byte, id int, key []byte) ([]byte, error) {
	var k avroKey
	if err := json.Unmarshal(key, &k); err != nil {
		return dst, fmt.Errorf("avro: read the key: %w", err)
	}
	b, err := avro.Marshal(keySchema, &k)
	if err != nil {
		return dst, fmt.Errorf("avro: %w", err)
	}
	return append(appendConfluent(dst, id), b...), nil
}

var errNoRegistry = errors.New("encode.format avro needs schema_registry")
