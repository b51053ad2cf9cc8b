package main

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"reflect"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/tide-cdc/tide/internal/testenv"
)

// TestCrashMongoTransformsToPostgres streams a MongoDB collection (the
// embedded server, in this process) through a filter, a drop, a mask and
// a set into a PostgreSQL table whose CHECK constraint some rows break,
// with the checkpoint in the sink and on_error: dead_letter, and
// SIGKILLs tide while the writes go on. In the end the table holds what
// a reference implementation of the transforms computes from the
// documents written, and tide_dead_letters every refused row, once.
func TestCrashMongoTransformsToPostgres(t *testing.T) {
	const key = "pg-mask-key"
	dsn := testenv.Postgres(t)
	srv := testenv.MongoWire(t)
	client := testenv.MongoClient(t, srv.URI())
	coll := client.Database("shop").Collection("orders")
	if err := client.Database("shop").CreateCollection(t.Context(), "orders"); err != nil {
		t.Fatal(err)
	}
	pg, err := pgx.Connect(t.Context(), dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer pg.Close(context.Background())

	dir := t.TempDir()
	cfg := writePipeline(t, dir, fmt.Sprintf(`
name: shaped_pg
source:
  mongo: {uri: %q, database: shop, collection: orders, max_await: 100ms, full_document: update_lookup}
sink:
  postgres: {dsn: %q, table: orders_shaped, create_table: true, columns: document}
checkpoint: sink
batch: {max_records: 50, commit_interval: 20ms}
transforms:
  - filter: {ops: [insert], where: 'doc.status != "draft"'}
  - drop_fields: [secret]
  - mask_fields: {email: hash}
  - set: {region: 'doc.country in ["DE", "FR"] ? "eu" : "other"'}
mask_key: %s
on_error: dead_letter
`, srv.URI(), dsn, key))

	// The first run creates the table; then the constraint some rows break.
	first := tideCmd(t, dir, "run", "-f", cfg)
	var firstErr bytes.Buffer
	first.Stderr = &firstErr
	if err := first.Start(); err != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(time.Minute); ; time.Sleep(20 * time.Millisecond) {
		var n int
		if err := pg.QueryRow(t.Context(), `SELECT count(*) FROM tide_checkpoints WHERE pipeline = 'shaped_pg'`).Scan(&n); err == nil && n == 1 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("no first checkpoint\n%s", firstErr.String())
		}
	}
	first.Process.Signal(syscall.SIGKILL)
	first.Wait()
	if _, err := pg.Exec(t.Context(), `ALTER TABLE orders_shaped ADD CONSTRAINT qty_not_negative CHECK ((doc->>'qty')::int >= 0)`); err != nil {
		t.Fatal(err)
	}

	const total = 1500
	countries := []string{"DE", "FR", "US", "JP"}
	mac := func(s string) string {
		h := hmac.New(sha256.New, []byte(key))
		h.Write([]byte(s))
		return hex.EncodeToString(h.Sum(nil))
	}
	want := map[int]map[string]any{}
	var refused []int
	written := make(chan error, 1)
	go func() {
		for i := 1; i <= total; i++ {
			status, qty := "paid", i%13
			if i%11 == 0 {
				status = "draft"
			}
			if i%17 == 0 {
				qty = -1
			}
			country := countries[i%len(countries)]
			email := fmt.Sprintf("user%d@example.com", i)
			if _, err := coll.InsertOne(context.Background(), bson.D{{Key: "_id", Value: i}, {Key: "status", Value: status}, {Key: "qty", Value: qty},
				{Key: "email", Value: email}, {Key: "secret", Value: "s"}, {Key: "country", Value: country}}); err != nil {
				written <- err
				return
			}
		}
		written <- nil
	}()
	for i := 1; i <= total; i++ {
		status, qty := "paid", i%13
		if i%11 == 0 {
			continue
		}
		if i%17 == 0 {
			refused = append(refused, i)
			continue
		}
		country := countries[i%len(countries)]
		region := "other"
		if country == "DE" || country == "FR" {
			region = "eu"
		}
		want[i] = map[string]any{"_id": float64(i), "status": status, "qty": float64(qty), "email": mac(fmt.Sprintf("user%d@example.com", i)), "country": country, "region": region}
	}

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
	defer func() {
		if last.ProcessState == nil {
			last.Process.Signal(syscall.SIGTERM)
			last.Wait()
		}
	}()
	for deadline := time.Now().Add(2 * time.Minute); ; time.Sleep(50 * time.Millisecond) {
		var rows, letters int
		pg.QueryRow(t.Context(), `SELECT count(*) FROM orders_shaped`).Scan(&rows)
		pg.QueryRow(t.Context(), `SELECT count(*) FROM tide_dead_letters WHERE pipeline = 'shaped_pg'`).Scan(&letters)
		if rows >= len(want) && letters >= len(refused) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d rows (want %d), %d dead letters (want %d)\n%s", rows, len(want), letters, len(refused), lastErr.String())
		}
	}

	got := map[int]map[string]any{}
	rows, err := pg.Query(t.Context(), `SELECT doc::text FROM orders_shaped`)
	if err != nil {
		t.Fatal(err)
	}
	for rows.Next() {
		var text string
		if err := rows.Scan(&text); err != nil {
			t.Fatal(err)
		}
		var doc map[string]any
		if err := json.Unmarshal([]byte(text), &doc); err != nil {
			t.Fatal(err)
		}
		got[int(doc["_id"].(float64))] = doc
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	if len(got) != len(want) {
		t.Fatalf("orders_shaped holds %d rows, want %d", len(got), len(want))
	}
	for id, w := range want {
		if !reflect.DeepEqual(got[id], w) {
			t.Fatalf("row %d = %v\nwant %v", id, got[id], w)
		}
	}
	var letters, sinkStage int
	pg.QueryRow(t.Context(), `SELECT count(*), count(*) FILTER (WHERE stage = 'sink') FROM tide_dead_letters WHERE pipeline = 'shaped_pg'`).Scan(&letters, &sinkStage)
	if letters != len(refused) || sinkStage != len(refused) {
		t.Fatalf("tide_dead_letters: %d letters, %d of stage sink; want %d", letters, sinkStage, len(refused))
	}
	var ids []int
	r2, err := pg.Query(t.Context(), `SELECT (change->'full_document'->'_id'->>'$numberInt')::int FROM tide_dead_letters WHERE pipeline = 'shaped_pg' ORDER BY 1`)
	if err != nil {
		t.Fatal(err)
	}
	for r2.Next() {
		var id int
		if err := r2.Scan(&id); err != nil {
			t.Fatal(err)
		}
		ids = append(ids, id)
	}
	if !reflect.DeepEqual(ids, refused) {
		t.Fatalf("dead letters of %v, want %v", ids, refused)
	}

	// list reads them from the table; after the fix (no constraint), a
	// replay writes them, as transformed when they were refused.
	last.Process.Signal(syscall.SIGTERM)
	last.Wait()
	out, err := runTide(t, dir, "dead-letters", "list", "-f", cfg)
	if err != nil || bytes.Count([]byte(out), []byte("qty_not_negative")) != len(refused) {
		t.Fatalf("dead-letters list: %v, want %d letters\n%s", err, len(refused), out)
	}
	if _, err := pg.Exec(t.Context(), `ALTER TABLE orders_shaped DROP CONSTRAINT qty_not_negative`); err != nil {
		t.Fatal(err)
	}
	if out, err := runTide(t, dir, "dead-letters", "replay", "-f", cfg); err != nil {
		t.Fatalf("dead-letters replay: %v\n%s", err, out)
	}
	var text string
	if err := pg.QueryRow(t.Context(), `SELECT doc::text FROM orders_shaped WHERE (doc->>'_id')::int = $1`, refused[0]).Scan(&text); err != nil {
		t.Fatal(err)
	}
	var doc map[string]any
	json.Unmarshal([]byte(text), &doc)
	if doc["email"] != mac(fmt.Sprintf("user%d@example.com", refused[0])) || doc["qty"] != float64(-1) || doc["secret"] != nil {
		t.Fatalf("replayed row = %s", text)
	}
}

func isKilled(err error) bool {
	return err != nil && (err.Error() == "signal: killed")
}
