package main

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"

	"github.com/tide-cdc/tide/internal/testenv"
)

// TestCheckpointCommandsEveryStore: tide checkpoint show, set
// --cluster-time and reset work the same wherever the checkpoint lives:
// the data directory, PostgreSQL's and MongoDB's own tables and Kafka's
// checkpoint topic (checkpoint: sink), and NATS KV. Each is a MongoDB pipeline run, stopped, then
// inspected, moved to a chosen cluster time, and reset.
func TestCheckpointCommandsEveryStore(t *testing.T) {
	t.Parallel()
	stores := map[string]func(t *testing.T) (sink, checkpoint string, env []string){
		"data directory": func(*testing.T) (string, string, []string) {
			return "file: {path: ./out.jsonl}", "file", nil
		},
		"postgres": func(t *testing.T) (string, string, []string) {
			dsn := testenv.Postgres(t)
			return `postgres: {dsn: "${PG_DSN}", mode: append, table: orders_ckpt}`, "sink", []string{"PG_DSN=" + dsn}
		},
		"mongo sink": func(t *testing.T) (string, string, []string) {
			target := testenv.MongoWire(t)
			return fmt.Sprintf("mongo: {uri: %q, mode: append, database: lake, collection: orders}", target.URI()), "sink", nil
		},
		"kafka sink": func(t *testing.T) (string, string, []string) {
			return fmt.Sprintf("kafka: {brokers: [%s]}", kafkaCluster(t, 1)), "sink", nil
		},
		"nats kv": func(t *testing.T) (string, string, []string) {
			nats := testenv.NATS(t)
			return "file: {path: ./out.jsonl}", fmt.Sprintf("{nats_kv: {servers: [%s]}}", nats.ClientURL()), nil
		},
	}
	for name, store := range stores {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			srv := testenv.MongoWire(t)
			client := testenv.MongoClient(t, srv.URI())
			coll := client.Database("shop").Collection("orders")
			insertIDs(t, coll, 1, 2, 3)
			sink, where, env := store(t)
			dir := t.TempDir()
			cfg := writePipeline(t, dir, fmt.Sprintf(`
name: stores
source:
  mongo: {uri: %q, database: shop, collection: orders, max_await: 100ms}
sink:
  %s
checkpoint: %s
batch: {commit_interval: 10ms}
`, srv.URI(), sink, where))
			tide := func(args ...string) (string, error) {
				cmd := tideCmd(t, dir, args...)
				cmd.Env = append(cmd.Env, env...)
				out, err := cmd.CombinedOutput()
				return string(out), err
			}
			if out, err := tide("checkpoint", "show", "-f", cfg); err != nil || !strings.Contains(out, `pipeline "stores" has no checkpoint`) {
				t.Fatalf("checkpoint show before a run: %v\n%s", err, out)
			}

			run := tideCmd(t, dir, "run", "-f", cfg, "--progress", "never")
			run.Env = append(run.Env, env...)
			runWhile(t, run, func() bool {
				out, err := tide("checkpoint", "show", "-f", cfg)
				return err == nil && strings.Contains(out, `"meta"`) && strings.Contains(out, `"collection": "orders"`)
			})
			before, err := tide("checkpoint", "show", "-f", cfg)
			if err != nil {
				t.Fatalf("checkpoint show: %v\n%s", err, before)
			}

			// A write while the pipeline is stopped gives a cluster time
			// in the oplog's window to move the checkpoint to.
			sess, err := client.StartSession()
			if err != nil {
				t.Fatal(err)
			}
			defer sess.EndSession(context.Background())
			if _, err := coll.InsertOne(mongo.NewSessionContext(context.Background(), sess), bson.D{{Key: "_id", Value: 4}}); err != nil {
				t.Fatal(err)
			}
			ts := sess.OperationTime()
			if ts == nil {
				t.Fatal("no operation time")
			}
			at := fmt.Sprintf("Timestamp(%d, %d)", ts.T, ts.I)
			out, err := tide("checkpoint", "set", "-f", cfg, "--cluster-time", at, "--yes")
			if err != nil || !strings.Contains(out, "checkpoint of pipeline \"stores\" written in") {
				t.Fatalf("checkpoint set --cluster-time %s: %v\n%s", at, err, out)
			}
			when := time.Unix(int64(ts.T), 0).UTC().Format("2006-01-02T15:04:05Z")
			if !strings.Contains(out, when) && !strings.Contains(out, fmt.Sprint(ts.T)) {
				t.Errorf("checkpoint set does not show the new point %s (%s):\n%s", at, when, out)
			}
			after, err := tide("checkpoint", "show", "-f", cfg)
			if err != nil || after == before || !strings.Contains(after, `"collection": "orders"`) {
				t.Fatalf("checkpoint show after set: %v; before:\n%s\nafter:\n%s", err, before, after)
			}

			if out, err := tide("checkpoint", "reset", "-f", cfg, "--yes"); err != nil || !strings.Contains(out, `checkpoint of pipeline "stores" reset in`) {
				t.Fatalf("checkpoint reset: %v\n%s", err, out)
			}
			if out, err := tide("checkpoint", "show", "-f", cfg); err != nil || !strings.Contains(out, `pipeline "stores" has no checkpoint`) {
				t.Fatalf("checkpoint show after reset: %v\n%s", err, out)
			}
		})
	}
}
