package kafka_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kmsg"
	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/tide-cdc/tide/cdc"
	"github.com/tide-cdc/tide/internal/testenv"
	"github.com/tide-cdc/tide/sink/kafka"
)

// kcat returns the path of kcat (librdkafka's command-line client), or
// skips the test (fails it in CI: testenv.Need).
func kcat(t testing.TB) string {
	t.Helper()
	p, err := exec.LookPath("kcat")
	if err != nil {
		testenv.Need(t, "kcat", fmt.Errorf("%w (apt-get install kcat)", err))
	}
	return p
}

// kcatRecord is one record as kcat printed it.
type kcatRecord struct {
	Partition int
	Key       string
	Value     string
	Null      bool // the value is null: a tombstone
	Headers   string
}

// kcatRead reads topic to its end with kcat, read_committed.
func kcatRead(t testing.TB, brokers []string, topic string) []kcatRecord {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	// Fields separated by \x1f, records by \x1e: JSON holds neither.
	cmd := exec.CommandContext(ctx, kcat(t), "-C", "-b", strings.Join(brokers, ","), "-t", topic, "-e", "-q",
		"-X", "isolation.level=read_committed", "-f", "%p\x1f%k\x1f%S\x1f%s\x1f%h\x1e")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("kcat: %v\n%s", err, stderr.Bytes())
	}
	var recs []kcatRecord
	for _, line := range strings.Split(string(out), "\x1e") {
		if line == "" {
			continue
		}
		f := strings.Split(line, "\x1f")
		if len(f) != 5 {
			t.Fatalf("kcat printed %q", line)
		}
		var r kcatRecord
		fmt.Sscan(f[0], &r.Partition)
		r.Key, r.Value, r.Null, r.Headers = f[1], f[3], f[2] == "-1", f[4]
		recs = append(recs, r)
	}
	return recs
}

// murmur2 is the Java client's hash of a key (org.apache.kafka.common.
// utils.Utils.murmur2), written here from its definition, so that the
// test checks the sink's partitions against Java's, not against the Go
// client's idea of them.
func murmur2(data []byte) int32 {
	const seed, m, r = uint32(0x9747b28c), uint32(0x5bd1e995), 24
	n := len(data)
	h := seed ^ uint32(n)
	for i := 0; i+4 <= n; i += 4 {
		k := uint32(data[i]) | uint32(data[i+1])<<8 | uint32(data[i+2])<<16 | uint32(data[i+3])<<24
		k *= m
		k ^= k >> r
		k *= m
		h *= m
		h ^= k
	}
	tail := data[n&^3:]
	switch len(tail) {
	case 3:
		h ^= uint32(tail[2]) << 16
		fallthrough
	case 2:
		h ^= uint32(tail[1]) << 8
		fallthrough
	case 1:
		h ^= uint32(tail[0])
		h *= m
	}
	h ^= h >> 13
	h *= m
	h ^= h >> 15
	return int32(h)
}

// javaPartition is where Kafka's Java producer puts a record with key
// among n partitions.
func javaPartition(key []byte, n int) int { return int(murmur2(key)&0x7fffffff) % n }

// TestMurmur2MatchesJava checks the reference hash against the values of
// Kafka's own tests of Utils.murmur2.
func TestMurmur2MatchesJava(t *testing.T) {
	for key, want := range map[string]int32{
		"21": -973932308, "foobar": -790332482, "a-little-bit-long-string": -985981536,
		"a-little-bit-longer-string": -1486304829, "lkjh234lh9fiuh90y23oiuhsafujhadof229phr9h19h89h8": -58897971, "abc": 479470107,
	} {
		if got := murmur2([]byte(key)); got != want {
			t.Errorf("murmur2(%q) = %d, want %d", key, got, want)
		}
	}
}

// doc returns a record of namespace for the document {_id: id, n: id}.
func doc(t testing.TB, ns string, op cdc.Op, id int32, pos int) cdc.Record {
	t.Helper()
	key, err := bson.Marshal(bson.D{{Key: "_id", Value: id}})
	if err != nil {
		t.Fatal(err)
	}
	return cdc.Record{
		Event: cdc.Event{Pos: cdc.Position(fmt.Sprintf(`{"i":%d}`, pos)), Op: op, Namespace: ns, DocumentKey: key,
			ClusterTime: cdc.Timestamp{T: 1700000000, I: uint32(pos)}},
		Data: fmt.Appendf(nil, `{"_id":%d,"op":%q,"pos":%d}`, id, op, pos),
	}
}

func openSink(t testing.TB, cfg kafka.Config) *kafka.Sink {
	t.Helper()
	s := kafka.New(cfg)
	if err := s.Open(t.Context(), nil); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

// TestKeysPartitionsHeadersTombstones writes changes of documents at
// least once, and reads them back with kcat: every record of a document
// has Debezium's key and lands in the partition Java's partitioner
// picks, in order; a delete is followed by a tombstone; the headers say
// what the change was.
func TestKeysPartitionsHeadersTombstones(t *testing.T) {
	t.Parallel()
	brokers := cluster(t)
	cfg := kafka.DefaultConfig()
	cfg.Brokers, cfg.Pipeline, cfg.Logger = brokers, "fulfillment", testLogger(t)
	cfg.Topic, cfg.Partitions, cfg.Format, cfg.Compression = "tide.{db}.{coll}", 6, "debezium", "zstd"
	s := openSink(t, cfg)
	var batch []cdc.Record
	pos := 0
	for round := range 3 {
		for id := range int32(40) {
			op := cdc.OpInsert
			if round > 0 {
				op = cdc.OpUpdate
			}
			if round == 2 && id%10 == 0 {
				op = cdc.OpDelete
			}
			batch = append(batch, doc(t, "inventory.customers", op, id, pos))
			pos++
		}
	}
	if err := s.Put(t.Context(), batch); err != nil {
		t.Fatal(err)
	}
	if err := s.Commit(t.Context(), cdc.Checkpoint{Source: batch[len(batch)-1].Pos}); err != nil {
		t.Fatal(err)
	}

	recs := kcatRead(t, brokers, "tide.inventory.customers")
	if want := len(batch) + 4; len(recs) != want {
		t.Fatalf("kcat read %d records, want %d (%d changes and 4 tombstones)", len(recs), want, len(batch))
	}
	last := map[string]int{} // key -> pos of its last change read
	tomb := map[string]bool{}
	for _, r := range recs {
		var id int
		if _, err := fmt.Sscanf(r.Key, `{"id":"%d"}`, &id); err != nil {
			t.Fatalf("key %q is not Debezium's {\"id\":\"<_id>\"}", r.Key)
		}
		if p := javaPartition([]byte(r.Key), 6); r.Partition != p {
			t.Errorf("key %s in partition %d; Java's partitioner puts it in %d", r.Key, r.Partition, p)
		}
		if r.Null {
			if last[r.Key] == 0 || tomb[r.Key] {
				t.Errorf("tombstone of %s not right after its delete", r.Key)
			}
			tomb[r.Key] = true
			continue
		}
		var gotID, p int
		var op string
		if _, err := fmt.Sscanf(r.Value, `{"_id":%d,"op":%q,"pos":%d}`, &gotID, &op, &p); err != nil || gotID != id {
			t.Fatalf("value %q under key %s", r.Value, r.Key)
		}
		if prev, ok := last[r.Key]; ok && p <= prev {
			t.Errorf("key %s: change %d read after change %d", r.Key, p, prev)
		}
		last[r.Key] = p
		wantHeaders := fmt.Sprintf(`tide-op=%s,tide-namespace=inventory.customers,tide-position={"i":%d},tide-cluster-time=1700000000.%d`, op, p, p)
		if r.Headers != wantHeaders {
			t.Errorf("headers %q, want %q", r.Headers, wantHeaders)
		}
	}
	if len(tomb) != 4 {
		t.Errorf("%d tombstones, want 4", len(tomb))
	}
}

// TestNoHeadersNoKey: headers: false and key: none write bare records.
func TestNoHeadersNoKey(t *testing.T) {
	t.Parallel()
	brokers := cluster(t)
	cfg := kafka.DefaultConfig()
	no := false
	cfg.Brokers, cfg.Pipeline, cfg.Logger, cfg.Headers, cfg.Key = brokers, "p", testLogger(t), &no, kafka.KeyNone
	s := openSink(t, cfg)
	batch := []cdc.Record{doc(t, "db.c", cdc.OpInsert, 1, 1), doc(t, "db.c", cdc.OpDelete, 1, 2)}
	if err := s.Put(t.Context(), batch); err != nil {
		t.Fatal(err)
	}
	if err := s.Commit(t.Context(), cdc.Checkpoint{}); err != nil {
		t.Fatal(err)
	}
	recs := readTopic(t, brokers, "p.db.c")
	if len(recs) != 2 { // json format: no tombstone
		t.Fatalf("%d records, want 2", len(recs))
	}
	for _, r := range recs {
		if r.Key != nil || len(r.Headers) != 0 {
			t.Errorf("record with key %q and headers %v", r.Key, r.Headers)
		}
	}
}

// TestPermanentErrors: a record the cluster refuses for good fails the
// batch at once, as a *RecordError naming its topic and key.
func TestPermanentErrors(t *testing.T) {
	t.Parallel()
	brokers := cluster(t)
	for name, tc := range map[string]struct {
		change func(*kafka.Config)
		record func() cdc.Record
		want   string
	}{
		"missing topic, creation off": {
			change: func(c *kafka.Config) { no := false; c.CreateTopics = &no },
			record: func() cdc.Record { return doc(t, "shop.orders", cdc.OpInsert, 7, 1) },
			want:   `topic "p.shop.orders" does not exist, and create_topics is false`,
		},
		"record too large": {
			record: func() cdc.Record {
				r := doc(t, "shop.big", cdc.OpInsert, 8, 1)
				r.Data = bytes.Repeat([]byte("x"), 2<<20)
				return r
			},
			want: `topic "p.shop.big", key {"id":"8"}`,
		},
	} {
		t.Run(name, func(t *testing.T) {
			cfg := kafka.DefaultConfig()
			cfg.Brokers, cfg.Pipeline, cfg.Logger = brokers, "p", testLogger(t)
			if tc.change != nil {
				tc.change(&cfg)
			}
			s := openSink(t, cfg)
			start := time.Now()
			err := s.Put(t.Context(), []cdc.Record{tc.record()})
			if err == nil {
				err = s.Commit(t.Context(), cdc.Checkpoint{})
			}
			var re *kafka.RecordError
			if !errors.As(err, &re) || !strings.Contains(err.Error(), tc.want) || re.Index != 0 {
				t.Fatalf("error %v; want a *RecordError of record 0 containing %q", err, tc.want)
			}
			if d := time.Since(start); d > 20*time.Second {
				t.Errorf("took %s: a permanent error must not wait for max_outage", d)
			}
		})
	}
}

// TestTopicNotAuthorized: a user who may see a topic but not write to it
// gets a *RecordError naming the topic, the key and the authorization
// failure, at once.
func TestTopicNotAuthorized(t *testing.T) {
	t.Parallel()
	describe := kfake.ACL{Resource: kmsg.ACLResourceTypeTopic, Name: "p.db.locked", Pattern: kmsg.ACLResourcePatternTypeLiteral, Operation: kmsg.ACLOperationDescribe, Allow: true}
	idempotent := kfake.ACL{Resource: kmsg.ACLResourceTypeCluster, Name: "kafka-cluster", Pattern: kmsg.ACLResourcePatternTypeLiteral, Operation: kmsg.ACLOperationIdempotentWrite, Allow: true}
	brokers := cluster(t, kfake.EnableSASL(), kfake.EnableACLs(), kfake.Superuser("PLAIN", "admin", "admin-pw"),
		kfake.User("PLAIN", "tide", "tide-pw", describe, idempotent), kfake.SeedTopics(1, "p.db.locked"))
	cfg := kafka.DefaultConfig()
	no := false
	cfg.Brokers, cfg.Pipeline, cfg.Logger, cfg.CreateTopics = brokers, "p", testLogger(t), &no
	cfg.SASL = &kafka.SASL{Mechanism: "PLAIN", User: "tide", Password: "tide-pw"}
	s := openSink(t, cfg)
	start := time.Now()
	err := s.Put(t.Context(), []cdc.Record{doc(t, "db.locked", cdc.OpInsert, 3, 1)})
	if err == nil {
		err = s.Commit(t.Context(), cdc.Checkpoint{})
	}
	var re *kafka.RecordError
	if !errors.As(err, &re) || re.Topic != "p.db.locked" || !strings.Contains(err.Error(), `key {"id":"3"}`) || !strings.Contains(err.Error(), "TOPIC_AUTHORIZATION_FAILED") {
		t.Fatalf("error %v; want a *RecordError naming topic p.db.locked, the key and an authorization failure", err)
	}
	t.Logf("refused: %v", err)
	if strings.Contains(err.Error(), "tide-pw") {
		t.Errorf("the error holds the password: %v", err)
	}
	if d := time.Since(start); d > 20*time.Second {
		t.Errorf("took %s: a permanent error must not wait for max_outage", d)
	}
}

// TestMaxOutage: with the cluster gone, Commit fails after max_outage,
// saying so; Open of an unreachable cluster too.
func TestMaxOutage(t *testing.T) {
	t.Parallel()
	c, err := kfake.NewCluster(kfake.NumBrokers(1))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	cfg := kafka.DefaultConfig()
	cfg.Brokers, cfg.Pipeline, cfg.Logger, cfg.MaxOutage = c.ListenAddrs(), "p", testLogger(t), time.Second
	s := openSink(t, cfg)
	if err := s.Put(t.Context(), []cdc.Record{doc(t, "db.c", cdc.OpInsert, 1, 1)}); err != nil {
		t.Fatal(err)
	}
	if err := s.Commit(t.Context(), cdc.Checkpoint{}); err != nil {
		t.Fatal(err)
	}
	c.Close()
	start := time.Now()
	err = s.Put(t.Context(), []cdc.Record{doc(t, "db.c", cdc.OpInsert, 2, 2)})
	if err == nil {
		err = s.Commit(t.Context(), cdc.Checkpoint{})
	}
	if err == nil || !strings.Contains(err.Error(), "max_outage") {
		t.Fatalf("Commit with the cluster gone: %v; want an error naming max_outage", err)
	}
	if d := time.Since(start); d < 900*time.Millisecond || d > 30*time.Second {
		t.Errorf("gave up after %s; max_outage is 1s", d)
	}

	cfg.Brokers = []string{"127.0.0.1:1"}
	err = kafka.New(cfg).Open(t.Context(), nil)
	if err == nil || !strings.Contains(err.Error(), "127.0.0.1:1") || !strings.Contains(err.Error(), "max_outage") {
		t.Fatalf("Open of an unreachable cluster: %v; want an error naming the brokers and max_outage", err)
	}
}

// TestCredentialsNotInErrors: a refused SASL login fails Open without
// the password in the error; the right one works.
func TestCredentialsNotInErrors(t *testing.T) {
	t.Parallel()
	for _, mech := range []string{"PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"} {
		t.Run(mech, func(t *testing.T) {
			brokers := cluster(t, kfake.EnableSASL(), kfake.Superuser(mech, "tide", "right-password"))
			cfg := kafka.DefaultConfig()
			cfg.Brokers, cfg.Pipeline, cfg.Logger, cfg.MaxOutage = brokers, "p", testLogger(t), 2*time.Second
			cfg.SASL = &kafka.SASL{Mechanism: mech, User: "tide", Password: "wrong-Secret-42"}
			err := kafka.New(cfg).Open(t.Context(), nil)
			if err == nil {
				t.Fatal("Open with a wrong password succeeded")
			}
			t.Logf("Open: %v", err)
			if strings.Contains(err.Error(), "wrong-Secret-42") {
				t.Fatalf("the error holds the password: %v", err)
			}
			cfg.SASL.Password = "right-password"
			s := openSink(t, cfg)
			if err := s.Put(t.Context(), []cdc.Record{doc(t, "db.c", cdc.OpInsert, 1, 1)}); err != nil {
				t.Fatal(err)
			}
			if err := s.Commit(t.Context(), cdc.Checkpoint{}); err != nil {
				t.Fatal(err)
			}
		})
	}
}

func TestValidate(t *testing.T) {
	for name, tc := range map[string]struct {
		change func(*kafka.Config)
		want   string
	}{
		"broker without port": {func(c *kafka.Config) { c.Brokers = []string{"localhost"} }, `brokers[0]: "localhost" is not host:port`},
		"unknown placeholder": {func(c *kafka.Config) { c.Topic = "x.{table}" }, "topic: \"x.{table}\": unknown placeholder {table}"},
		"illegal topic text":  {func(c *kafka.Config) { c.Topic = "a/b.{coll}" }, `"a/b." cannot be part of a topic name`},
		"key":                 {func(c *kafka.Config) { c.Key = "id" }, `key: "id" is not one of document_key, none`},
		"compression":         {func(c *kafka.Config) { c.Compression = "brotli" }, `compression: "brotli" is not one of none, gzip, snappy, lz4, zstd`},
		"partitions":          {func(c *kafka.Config) { c.Partitions = -3 }, "partitions: -3"},
		"replication":         {func(c *kafka.Config) { c.ReplicationFactor = -2 }, "replication_factor: -2"},
		"outage":              {func(c *kafka.Config) { c.MaxOutage = -time.Second }, "max_outage: must not be negative"},
		"sasl mechanism":      {func(c *kafka.Config) { c.SASL = &kafka.SASL{Mechanism: "GSSAPI", User: "u", Password: "p"} }, `sasl.mechanism: "GSSAPI" is not one of`},
		"sasl password":       {func(c *kafka.Config) { c.SASL = &kafka.SASL{Mechanism: "PLAIN", User: "u"} }, "sasl.password: required"},
		"tls pair":            {func(c *kafka.Config) { c.TLS = &kafka.TLS{CertFile: "c.pem"} }, "tls: cert_file and key_file go together"},
		"schema registry":     {func(c *kafka.Config) { c.SchemaRegistry = &kafka.SchemaRegistry{URL: "ftp://u:pw@x"} }, `schema_registry.url: "ftp://u:xxxxx@x" is not an http:// or https:// URL`},
		"checkpoint topic":    {func(c *kafka.Config) { c.CheckpointTopic = "a b" }, `checkpoint_topic: "a b" is not a legal topic name`},
	} {
		t.Run(name, func(t *testing.T) {
			c := kafka.DefaultConfig()
			tc.change(&c)
			err := c.Validate()
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("Validate = %v, want an error containing %q", err, tc.want)
			}
		})
	}
	if err := kafka.DefaultConfig().Validate(); err != nil {
		t.Errorf("DefaultConfig().Validate() = %v", err)
	}
}

// TestCheckFormat: avro needs a schema registry, and only avro uses one.
func TestCheckFormat(t *testing.T) {
	reg := &kafka.SchemaRegistry{URL: "http://127.0.0.1:8081"}
	for name, tc := range map[string]struct {
		format   string
		registry *kafka.SchemaRegistry
		want     string // "" for no error
	}{
		"json":                {"json", nil, ""},
		"debezium":            {"debezium", nil, ""},
		"avro":                {"avro", reg, ""},
		"avro, no registry":   {"avro", nil, "avro needs sink.kafka.schema_registry"},
		"registry, not avro":  {"debezium", reg, "debezium does not use sink.kafka.schema_registry"},
		"an unknown encoding": {"xml", nil, `not "xml"`},
	} {
		t.Run(name, func(t *testing.T) {
			c := kafka.DefaultConfig()
			c.SchemaRegistry = tc.registry
			err := c.CheckFormat(tc.format, true)
			switch {
			case tc.want == "" && err != nil:
				t.Errorf("CheckFormat(%q) = %v", tc.format, err)
			case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
				t.Errorf("CheckFormat(%q) = %v, want an error containing %q", tc.format, err, tc.want)
			case err == nil && c.Format != tc.format:
				t.Errorf("CheckFormat(%q) kept format %q", tc.format, c.Format)
			}
		})
	}
}

// TestTopicTemplate: namespaces of every source become topics, with the
// characters a topic name cannot hold replaced, and {op} splitting by
// operation.
func TestTopicTemplate(t *testing.T) {
	t.Parallel()
	brokers := cluster(t)
	for tmpl, want := range map[string][]string{
		"{pipeline}.{db}.{coll}": {"p.orders.eu.paris", "p.my_db.coll_x", "p.gen.events"},
		"cdc-{namespace}-{op}":   {"cdc-orders.eu.paris-insert", "cdc-my_db.coll_x-insert", "cdc-gen.events-delete"},
		// {route}, from a route transform: one namespace, three topics.
		"r.{route}": {"r.orders_eu", "r.orders_other", "r._"},
	} {
		cfg := kafka.DefaultConfig()
		cfg.Brokers, cfg.Pipeline, cfg.Logger, cfg.Topic = brokers, "p", testLogger(t), tmpl
		s := openSink(t, cfg)
		batch := []cdc.Record{
			doc(t, "orders.eu.paris", cdc.OpInsert, 1, 1), // a NATS subject
			doc(t, "my db.coll$x", cdc.OpInsert, 2, 2),
			doc(t, "gen.events", cdc.OpDelete, 3, 3),
		}
		if strings.Contains(tmpl, "{route}") {
			for i, route := range []string{"orders_eu", "orders_other", ""} {
				batch[i].Namespace, batch[i].Route = "shop.orders", route
			}
		}
		if err := s.Put(t.Context(), batch); err != nil {
			t.Fatal(err)
		}
		if err := s.Commit(t.Context(), cdc.Checkpoint{}); err != nil {
			t.Fatal(err)
		}
		for i, topic := range want {
			recs := readTopic(t, brokers, topic)
			if len(recs) != 1 || string(recs[0].Value) != string(batch[i].Data) {
				t.Errorf("template %s: topic %s holds %d records, want record %d", tmpl, topic, len(recs), i)
			}
		}
	}
}
