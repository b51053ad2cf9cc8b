package main

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/tide-cdc/tide/internal/testenv"
)

// TestCrashMongoTransformsToRouteFiles streams a MongoDB collection (the
// embedded server, in this process) through a filter, a drop, a mask and
// a route into one file per route, SIGKILLing tide while the writes go
// on. Each route's file ends up holding exactly what a reference
// implementation of the transforms computes from the documents written,
// once each, in the order they were written.
func TestCrashMongoTransformsToRouteFiles(t *testing.T) {
	const key = "route-mask-key"
	srv := testenv.MongoWire(t)
	client := testenv.MongoClient(t, srv.URI())
	coll := client.Database("shop").Collection("orders")
	if err := client.Database("shop").CreateCollection(t.Context(), "orders"); err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	cfg := writePipeline(t, dir, fmt.Sprintf(`
name: routed
source:
  mongo: {uri: %q, database: shop, collection: orders, max_await: 100ms}
sink:
  file: {path: "./out/{route}.jsonl"}
batch: {max_records: 50, commit_interval: 20ms}
transforms:
  - filter: {ops: [insert], where: 'doc.status != "draft"'}
  - drop_fields: [secret]
  - mask_fields: {email: hash}
  - route: 'doc.country in ["DE", "FR"] ? "eu" : "other"'
mask_key: %s
`, srv.URI(), key))

	// The first run takes its start position; writes come after it.
	first := tideCmd(t, dir, "run", "-f", cfg)
	var firstErr bytes.Buffer
	first.Stderr = &firstErr
	if err := first.Start(); err != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(time.Minute); ; time.Sleep(20 * time.Millisecond) { // polls another process
		if out, err := runTide(t, dir, "checkpoint", "show", "-f", cfg); err == nil && strings.Contains(out, "resume_token") {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("no first checkpoint\n%s", firstErr.String())
		}
	}
	first.Process.Signal(syscall.SIGKILL)
	first.Wait()

	const total = 1500
	countries := []string{"DE", "FR", "US", "JP", "BR"}
	mac := func(s string) string {
		h := hmac.New(sha256.New, []byte(key))
		h.Write([]byte(s))
		return hex.EncodeToString(h.Sum(nil))
	}
	want := map[string][]string{}
	for i := 1; i <= total; i++ {
		if i%9 == 0 {
			continue // draft
		}
		country := countries[i%len(countries)]
		route := "other"
		if country == "DE" || country == "FR" {
			route = "eu"
		}
		want[route] = append(want[route], fmt.Sprintf(`{"_id":%d,"status":"paid","email":"%s","country":"%s"}`, i, mac(fmt.Sprintf("u%d@example.com", i)), country))
	}
	written := make(chan error, 1)
	go func() {
		for i := 1; i <= total; i++ {
			status := "paid"
			if i%9 == 0 {
				status = "draft"
			}
			if _, err := coll.InsertOne(context.Background(), bson.D{{Key: "_id", Value: i}, {Key: "status", Value: status},
				{Key: "email", Value: fmt.Sprintf("u%d@example.com", i)}, {Key: "secret", Value: "s"}, {Key: "country", Value: countries[i%len(countries)]}}); err != nil {
				written <- err
				return
			}
		}
		written <- nil
	}()
	sigkillRuns(t, dir, 4, 300*time.Millisecond, 400*time.Millisecond, "run", "-f", cfg)
	if err := <-written; err != nil {
		t.Fatal(err)
	}
	last := tideCmd(t, dir, "run", "-f", cfg)
	var lastErr bytes.Buffer
	last.Stderr = &lastErr
	if err := last.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { last.Process.Signal(syscall.SIGTERM); last.Wait() }()
	for deadline := time.Now().Add(2 * time.Minute); ; time.Sleep(50 * time.Millisecond) {
		done := true
		for route, docs := range want {
			if _, err := os.Stat(filepath.Join(dir, "out", route+".jsonl")); err != nil || len(fullDocuments(t, filepath.Join(dir, "out", route+".jsonl"))) < len(docs) {
				done = false
			}
		}
		if done {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the route files did not fill\n%s", lastErr.String())
		}
	}
	last.Process.Signal(syscall.SIGTERM)
	last.Wait()
	for route, docs := range want {
		got := fullDocuments(t, filepath.Join(dir, "out", route+".jsonl"))
		if len(got) != len(docs) {
			t.Fatalf("%s.jsonl holds %d records, want %d", route, len(got), len(docs))
		}
		for i := range docs {
			if got[i] != docs[i] {
				t.Fatalf("%s.jsonl record %d = %s\nwant %s", route, i, got[i], docs[i])
			}
		}
	}
}
