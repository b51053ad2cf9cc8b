package tide

import (
	"bytes"
	"context"
	"encoding/binary"
	"fmt"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/sr"
	"github.com/twmb/franz-go/pkg/sr/srfake"
	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"

	"github.com/tide-cdc/tide/internal/dbzconsumer"
	"github.com/tide-cdc/tide/internal/testenv"
)

// kcatRecord is a record as kcat printed it: its key, and its value or
// null (a tombstone).
type kcatRecord struct {
	Key, Value string
	Null       bool
}

// kcatTopic reads topic with kcat (librdkafka), read_committed.
func kcatTopic(t *testing.T, brokers, topic string) []kcatRecord {
	t.Helper()
	kcat, err := exec.LookPath("kcat")
	if err != nil {
		testenv.Need(t, "kcat", fmt.Errorf("%w (apt-get install kcat)", err))
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, kcat, "-C", "-b", brokers, "-t", topic, "-e", "-q",
		"-X", "isolation.level=read_committed", "-f", "%k\x1f%S\x1f%s\x1e")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("kcat -t %s: %v\n%s", topic, err, stderr.Bytes())
	}
	var recs []kcatRecord
	for _, r := range strings.Split(string(out), "\x1e") {
		if f := strings.Split(r, "\x1f"); len(f) == 3 {
			recs = append(recs, kcatRecord{Key: f[0], Null: f[1] == "-1", Value: f[2]})
		}
	}
	return recs
}

// TestMongoToKafkaDebezium runs the embedded MongoDB server into Kafka
// (kfake) with encode.format: debezium and checkpoint: sink, for two
// collections, and reads every topic with kcat as a Debezium consumer
// would: the topics are Debezium's (<name>.<db>.<coll>), the keys are
// the MongoDB connector's {"id": "<_id in strict JSON>"}, every value is
// read by the consumer written from Debezium's documented fields, and
// each delete is followed by a tombstone.
func TestMongoToKafkaDebezium(t *testing.T) {
	t.Parallel()
	kc, err := kfake.NewCluster(kfake.NumBrokers(1))
	if err != nil {
		t.Fatal(err)
	}
	defer kc.Close()
	brokers := strings.Join(kc.ListenAddrs(), ",")

	srv := testenv.MongoWire(t)
	client, err := mongo.Connect(options.Client().ApplyURI(srv.URI()))
	if err != nil {
		t.Fatal(err)
	}
	defer client.Disconnect(context.Background())
	ctx := t.Context()
	db := client.Database("inventory")
	for _, c := range []string{"customers", "orders"} {
		if err := db.RunCommand(ctx, bson.D{{Key: "create", Value: c},
			{Key: "changeStreamPreAndPostImages", Value: bson.D{{Key: "enabled", Value: true}}}}).Err(); err != nil {
			t.Fatal(err)
		}
	}
	customers, orders := db.Collection("customers"), db.Collection("orders")
	if _, err := customers.InsertOne(ctx, bson.D{{Key: "_id", Value: int64(1001)}, {Key: "name", Value: "Sally"}}); err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	text := fmt.Appendf(nil, `name: fulfillment
source:
  mongo:
    uri: %s
    database: inventory
    collections: [customers, orders]
    before_change: when_available
sink:
  kafka: {brokers: [%s], partitions: 1}
encode: {format: debezium}
checkpoint: sink
data_dir: %q
batch: {commit_interval: 10ms}
`, srv.URI(), brokers, filepath.Join(dir, "data"))
	p, err := build(ctx, text, Options{})
	if err != nil {
		t.Fatal(err)
	}
	rctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	errc := make(chan error, 1)
	go func() { errc <- p.Run(rctx) }()
	wait := func(n int64) {
		for p.Stats().EventsOut < n || p.Stats().LastCheckpoint.Source == nil {
			select {
			case <-time.After(10 * time.Millisecond):
			case err := <-errc:
				t.Fatalf("Run returned early: %v", err)
			case <-rctx.Done():
				t.Fatalf("events committed: %d, want %d", p.Stats().EventsOut, n)
			}
		}
	}
	wait(1)
	must := func(_ any, err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(customers.InsertOne(ctx, bson.D{{Key: "_id", Value: int64(1002)}, {Key: "name", Value: "George"}}))
	must(orders.InsertOne(ctx, bson.D{{Key: "_id", Value: "A-1"}, {Key: "qty", Value: int32(2)}}))
	must(customers.UpdateOne(ctx, bson.D{{Key: "_id", Value: int64(1001)}}, bson.D{{Key: "$set", Value: bson.D{{Key: "name", Value: "Sally Ann"}}}}))
	must(orders.UpdateOne(ctx, bson.D{{Key: "_id", Value: "A-1"}}, bson.D{{Key: "$inc", Value: bson.D{{Key: "qty", Value: int32(1)}}}}))
	must(customers.ReplaceOne(ctx, bson.D{{Key: "_id", Value: int64(1002)}}, bson.D{{Key: "name", Value: "Jorge"}}))
	must(customers.DeleteOne(ctx, bson.D{{Key: "_id", Value: int64(1001)}}))
	must(orders.DeleteOne(ctx, bson.D{{Key: "_id", Value: "A-1"}}))
	wait(8)
	if err := p.Drain(rctx); err != nil {
		t.Fatal(err)
	}
	if err := <-errc; err != nil {
		t.Fatalf("Run after Drain = %v", err)
	}

	for topic, want := range map[string][]struct{ key, op string }{
		"fulfillment.inventory.customers": {
			{`{"id":"{\"$numberLong\":\"1001\"}"}`, "r"},
			{`{"id":"{\"$numberLong\":\"1002\"}"}`, "c"},
			{`{"id":"{\"$numberLong\":\"1001\"}"}`, "u"},
			{`{"id":"{\"$numberLong\":\"1002\"}"}`, "u"},
			{`{"id":"{\"$numberLong\":\"1001\"}"}`, "d"},
			{`{"id":"{\"$numberLong\":\"1001\"}"}`, "tombstone"},
		},
		"fulfillment.inventory.orders": {
			{`{"id":"\"A-1\""}`, "c"},
			{`{"id":"\"A-1\""}`, "u"},
			{`{"id":"\"A-1\""}`, "d"},
			{`{"id":"\"A-1\""}`, "tombstone"},
		},
	} {
		recs := kcatTopic(t, brokers, topic)
		if len(recs) != len(want) {
			t.Fatalf("%s: kcat read %d records, want %d: %+v", topic, len(recs), len(want), recs)
		}
		coll := topic[strings.LastIndexByte(topic, '.')+1:]
		for i, r := range recs {
			if r.Key != want[i].key {
				t.Errorf("%s record %d: key %s, want %s", topic, i, r.Key, want[i].key)
			}
			if want[i].op == "tombstone" {
				if !r.Null {
					t.Errorf("%s record %d: %q, want a tombstone", topic, i, r.Value)
				}
				continue
			}
			ev, err := dbzconsumer.Parse([]byte(r.Value))
			if err != nil {
				t.Fatalf("%s record %d: %v\n%s", topic, i, err, r.Value)
			}
			if ev.Op != want[i].op || ev.Source.Name != "fulfillment" || ev.Source.DB != "inventory" || ev.Source.Collection != coll {
				t.Errorf("%s record %d: op %s source %+v, want op %s", topic, i, ev.Op, ev.Source, want[i].op)
			}
		}
	}
}

// TestKafkaAvroFromYAML: encode.format: avro with sink.kafka's
// schema_registry, from a pipeline file: every record is in the
// Confluent wire format with the schema the registry has under
// <topic>-value (and the key under <topic>-key).
func TestKafkaAvroFromYAML(t *testing.T) {
	t.Parallel()
	kc, err := kfake.NewCluster(kfake.NumBrokers(1))
	if err != nil {
		t.Fatal(err)
	}
	defer kc.Close()
	reg := srfake.New()
	defer reg.Close()
	srv := testenv.MongoWire(t)
	client, err := mongo.Connect(options.Client().ApplyURI(srv.URI()))
	if err != nil {
		t.Fatal(err)
	}
	defer client.Disconnect(context.Background())
	ctx := t.Context()
	coll := client.Database("inventory").Collection("customers")
	for i := range 3 {
		if _, err := coll.InsertOne(ctx, bson.D{{Key: "_id", Value: int64(1001 + i)}, {Key: "name", Value: "Sally"}}); err != nil {
			t.Fatal(err)
		}
	}
	text := fmt.Appendf(nil, `name: fulfillment
source:
  mongo: {uri: %q, database: inventory, collection: customers}
sink:
  kafka: {brokers: [%s], schema_registry: {url: %q}}
encode: {format: avro}
checkpoint: sink
data_dir: %q
batch: {commit_interval: 10ms}
`, srv.URI(), strings.Join(kc.ListenAddrs(), ","), reg.URL(), filepath.Join(t.TempDir(), "data"))
	p, err := build(ctx, text, Options{})
	if err != nil {
		t.Fatal(err)
	}
	rctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	errc := make(chan error, 1)
	go func() { errc <- p.Run(rctx) }()
	for p.Stats().EventsOut < 3 {
		select {
		case <-time.After(10 * time.Millisecond):
		case err := <-errc:
			t.Fatalf("Run returned early: %v", err)
		case <-rctx.Done():
			t.Fatalf("events committed: %d, want 3", p.Stats().EventsOut)
		}
	}
	if err := p.Drain(rctx); err != nil {
		t.Fatal(err)
	}
	if err := <-errc; err != nil {
		t.Fatalf("Run after Drain = %v", err)
	}

	rc, err := sr.NewClient(sr.URLs(reg.URL()))
	if err != nil {
		t.Fatal(err)
	}
	ids := map[string]int{}
	for _, subject := range []string{"fulfillment.inventory.customers-key", "fulfillment.inventory.customers-value"} {
		s, err := rc.SchemaByVersion(ctx, subject, -1)
		if err != nil {
			t.Fatalf("schema of %s: %v", subject, err)
		}
		ids[subject] = s.ID
	}
	cl, err := kgo.NewClient(kgo.SeedBrokers(kc.ListenAddrs()...), kgo.ConsumeTopics("fulfillment.inventory.customers"),
		kgo.FetchIsolationLevel(kgo.ReadCommitted()))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	var recs []*kgo.Record
	for len(recs) < 3 && rctx.Err() == nil {
		recs = append(recs, cl.PollFetches(rctx).Records()...)
	}
	if len(recs) != 3 {
		t.Fatalf("%d records, want 3", len(recs))
	}
	for _, r := range recs {
		for what, b := range map[string][]byte{"fulfillment.inventory.customers-key": r.Key, "fulfillment.inventory.customers-value": r.Value} {
			if len(b) < 5 || b[0] != 0 || int(binary.BigEndian.Uint32(b[1:5])) != ids[what] {
				t.Errorf("%s: % x is not framed with magic byte 0 and schema id %d", what, b[:min(len(b), 5)], ids[what])
			}
		}
	}
}

// TestKafkaBuildFenced: a worker's BuildFenced of a pipeline whose
// checkpoint sink.kafka keeps takes its transactional id over: the
// pipeline still running elsewhere fails at its next commit, fenced.
func TestKafkaBuildFenced(t *testing.T) {
	t.Parallel()
	kc, err := kfake.NewCluster(kfake.NumBrokers(1))
	if err != nil {
		t.Fatal(err)
	}
	defer kc.Close()
	text := func(dataDir string) []byte {
		return fmt.Appendf(nil, `name: leased
source:
  generate: {rate: 2000}
sink:
  kafka: {brokers: [%s]}
checkpoint: sink
data_dir: %q
batch: {commit_interval: 10ms}
`, strings.Join(kc.ListenAddrs(), ","), dataDir)
	}
	ctx := t.Context()
	old, err := build(ctx, text(filepath.Join(t.TempDir(), "a")), Options{})
	if err != nil {
		t.Fatal(err)
	}
	rctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	errc := make(chan error, 1)
	go func() { errc <- old.Run(rctx) }()
	for old.Stats().EventsOut == 0 {
		select {
		case <-time.After(10 * time.Millisecond):
		case err := <-errc:
			t.Fatalf("Run returned early: %v", err)
		case <-rctx.Done():
			t.Fatal("nothing committed")
		}
	}
	p, err := buildFenced(ctx, text(filepath.Join(t.TempDir(), "b")), Options{}, "w2")
	if err != nil {
		t.Fatalf("BuildFenced: %v", err)
	}
	defer p.Close()
	select {
	case err := <-errc:
		if err == nil || !strings.Contains(err.Error(), "fenced") {
			t.Fatalf("the earlier owner's Run: %v, want it fenced", err)
		}
	case <-rctx.Done():
		t.Fatal("the earlier owner kept running after BuildFenced")
	}
}
