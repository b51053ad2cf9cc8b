package kafka_test

import (
	"bytes"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/sr/srfake"
	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/tide-cdc/tide/cdc"
	"github.com/tide-cdc/tide/encode"
	"github.com/tide-cdc/tide/internal/testenv"
	"github.com/tide-cdc/tide/sink/kafka"
)

// decodeAvro is the independent reader: Apache Avro's Python library
// decodes each Confluent-framed key and value (hex, one record a line,
// "null" for none) with the schema the registry has under its id, and
// prints the key and value as JSON.
const decodeAvro = `
import avro.io, avro.schema, io, json, sys, urllib.request
url = sys.argv[2]
schemas = {}
def decode(h):
    if h == "null":
        return None
    b = bytes.fromhex(h)
    if b[0] != 0:
        raise SystemExit("magic byte %d, want 0" % b[0])
    sid = int.from_bytes(b[1:5], "big")
    if sid not in schemas:
        with urllib.request.urlopen("%s/schemas/ids/%d" % (url, sid)) as r:
            schemas[sid] = avro.schema.parse(json.load(r)["schema"])
    return avro.io.DatumReader(schemas[sid]).read(avro.io.BinaryDecoder(io.BytesIO(b[5:])))
for line in open(sys.argv[1]):
    k, v = line.split()
    print(json.dumps({"key": decode(k), "value": decode(v)}))
`

// TestAvroThroughSchemaRegistry writes Debezium values as Avro with the
// schemas registered in a schema registry (srfake), reads the records
// back with read_committed, and has Apache Avro's Python library decode
// them with the schemas it fetches by id: each value is Debezium's JSON
// value field for field, each key Debezium's key; a delete is followed
// by a tombstone.
func TestAvroThroughSchemaRegistry(t *testing.T) {
	t.Parallel()
	python := avroPython(t)
	reg := srfake.New()
	defer reg.Close()
	brokers := cluster(t)
	cfg := kafka.DefaultConfig()
	cfg.Brokers, cfg.Pipeline, cfg.Logger, cfg.Partitions = brokers, "fulfillment", testLogger(t), 1
	cfg.SchemaRegistry = &kafka.SchemaRegistry{URL: reg.URL()}
	if err := cfg.CheckFormat("avro", true); err != nil {
		t.Fatal(err)
	}
	s := kafka.New(cfg)
	s.Checkpoints()
	if _, err := s.Checkpoints().Load(t.Context(), "fulfillment"); err != nil {
		t.Fatal(err)
	}
	if err := s.Open(t.Context(), nil); err != nil {
		t.Fatal(err)
	}
	defer s.Close()

	dbz := &encode.Debezium{Name: "fulfillment"}
	raw := func(d bson.D) []byte {
		b, err := bson.Marshal(d)
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	key := raw(bson.D{{Key: "_id", Value: int64(1004)}})
	doc := raw(bson.D{{Key: "_id", Value: int64(1004)}, {Key: "name", Value: "Anne"}, {Key: "tags", Value: bson.A{"a", "b"}}})
	upd := raw(bson.D{{Key: "updatedFields", Value: bson.D{{Key: "name", Value: "Anne Marie"}}}, {Key: "removedFields", Value: bson.A{"tags"}}, {Key: "truncatedArrays", Value: bson.A{}}})
	evs := []cdc.Event{
		{Op: cdc.OpInsert, FullDocument: doc},
		{Op: cdc.OpUpdate, UpdateDesc: upd, PreImage: doc},
		{Op: cdc.OpDelete, PreImage: doc},
	}
	var batch []cdc.Record
	var want []map[string]any
	for i, ev := range evs {
		ev.Namespace, ev.DocumentKey, ev.Pos = "inventory.customers", key, cdc.Position(fmt.Sprintf(`{"i":%d}`, i))
		ev.ClusterTime, ev.WallTimeMS = cdc.Timestamp{T: 1558965508, I: uint32(i + 1)}, 1558965508123
		v, err := dbz.Encode(nil, &ev)
		if err != nil {
			t.Fatal(err)
		}
		batch = append(batch, cdc.Record{Event: ev, Data: v})
		var m map[string]any
		if err := json.Unmarshal(v, &m); err != nil {
			t.Fatal(err)
		}
		want = append(want, m)
	}
	if err := s.Put(t.Context(), batch); err != nil {
		t.Fatal(err)
	}
	if err := s.Commit(t.Context(), cdc.Checkpoint{Source: batch[2].Pos}); err != nil {
		t.Fatal(err)
	}

	recs := readTopic(t, brokers, "fulfillment.inventory.customers")
	var lines bytes.Buffer
	for _, r := range recs {
		v := "null"
		if r.Value != nil {
			v = hex.EncodeToString(r.Value)
		}
		fmt.Fprintf(&lines, "%s %s\n", hex.EncodeToString(r.Key), v)
	}
	in := filepath.Join(t.TempDir(), "records")
	if err := os.WriteFile(in, lines.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(python, "-c", decodeAvro, in, reg.URL())
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("python3 avro: %v\n%s", err, stderr.Bytes())
	}
	got := strings.Split(strings.TrimSpace(string(out)), "\n")
	if len(got) != 4 {
		t.Fatalf("decoded %d records, want 3 and a tombstone:\n%s", len(got), out)
	}
	for i, line := range got {
		var rec struct {
			Key   map[string]any `json:"key"`
			Value map[string]any `json:"value"`
		}
		if err := json.Unmarshal([]byte(line), &rec); err != nil {
			t.Fatal(err)
		}
		if rec.Key["id"] != `{"$numberLong":"1004"}` || len(rec.Key) != 1 {
			t.Errorf("record %d: key %v, want Debezium's {id: {\"$numberLong\":\"1004\"}}", i, rec.Key)
		}
		if i == 3 {
			if rec.Value != nil {
				t.Errorf("record 3: %v, want the delete's tombstone", rec.Value)
			}
			continue
		}
		if !reflect.DeepEqual(rec.Value, want[i]) {
			t.Errorf("record %d decoded as\n%v\nwant Debezium's value\n%v", i, rec.Value, want[i])
		}
	}
}

// avroPython returns a python3 that imports avro (Debian's python3-avro).
// Without one the test skips, or fails in CI (testenv.Need).
func avroPython(t *testing.T) string {
	t.Helper()
	for _, cand := range []string{"python3", "/usr/bin/python3"} {
		if p, err := exec.LookPath(cand); err == nil && exec.Command(p, "-c", "import avro.io").Run() == nil {
			return p
		}
	}
	testenv.Need(t, "pyavro", errors.New("no python3 with Apache Avro's library (Debian: python3-avro)"))
	return ""
}
