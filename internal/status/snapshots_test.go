package status

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"

	"github.com/tide-cdc/tide"
	"github.com/tide-cdc/tide/cdc"
)

// TestAPISnapshots drives /api/snapshots of a running pipeline whose
// source is the embedded MongoDB-compatible server.
func TestAPISnapshots(t *testing.T) {
	dir := t.TempDir()
	srv, stop := serve(t, Config{Addr: "127.0.0.1:0"})
	defer stop()
	tr := NewTracker()
	yaml := fmt.Sprintf("name: shop\ndata_dir: %s\nsource: {mongo: {uri: embedded, database: shop, collections: [\"*\"], snapshot: never}}\nsink: {file: {path: %s}}\nbatch: {commit_interval: 20ms}\n",
		filepath.Join(dir, "data"), filepath.Join(dir, "out.jsonl"))
	p, err := buildSpec(context.Background(), []byte(yaml), tide.Options{Observer: tr})
	if err != nil {
		t.Fatal(err)
	}
	tr.Attach(p.Name, p, p.Source, p.Redact)
	srv.Add(tr)
	client, err := mongo.Connect(options.Client().ApplyURI(p.Embedded.URI()))
	if err != nil {
		t.Fatal(err)
	}
	defer client.Disconnect(context.Background())
	docs := make([]any, 300)
	for i := range docs {
		docs[i] = bson.D{{Key: "_id", Value: i}, {Key: "status", Value: []string{"open", "closed"}[i%2]}}
	}
	if _, err := client.Database("shop").Collection("orders").InsertMany(context.Background(), docs); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	ran := make(chan error, 1)
	go func() { ran <- p.Run(ctx) }()
	defer func() {
		cancel()
		<-ran
	}()

	base := "http://" + srv.Addr() + "/api/snapshots"
	call := func(method, url, ctype, body string) (int, string) {
		t.Helper()
		req, _ := http.NewRequest(method, url, strings.NewReader(body))
		if ctype != "" {
			req.Header.Set("Content-Type", ctype)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	const js = "application/json"
	// The source is open once the pipeline runs.
	var code int
	var body string
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		code, body = call("POST", base, js, `{"collections": ["shop.orders"], "filter": {"status": "open"}, "chunk": 50}`)
		if code != http.StatusServiceUnavailable || !strings.Contains(body, "not running") || time.Now().After(deadline) {
			break
		}
	}
	if code != http.StatusCreated {
		t.Fatalf("POST: %d %s", code, body)
	}
	var created struct{ ID string }
	if err := json.Unmarshal([]byte(body), &created); err != nil || created.ID == "" {
		t.Fatalf("POST answered %s", body)
	}

	refused := map[string]struct {
		method, url, ctype, body string
		code                     int
		words                    string
	}{
		"not JSON":      {"POST", base, "text/plain", `{"collections": ["shop.orders"]}`, http.StatusUnsupportedMediaType, "Content-Type"},
		"bad body":      {"POST", base, js, `{"collection": "shop.orders"}`, http.StatusBadRequest, "unknown field"},
		"bad filter":    {"POST", base, js, `{"collections": ["shop.orders"], "filter": {"status": {"$nope": 1}}}`, http.StatusBadRequest, "$nope"},
		"missing":       {"POST", base, js, `{"collections": ["shop.gone"]}`, http.StatusBadRequest, "does not exist"},
		"duplicate":     {"POST", base, js, `{"collections": ["shop.orders"]}`, http.StatusConflict, "already being copied"},
		"cancel other":  {"DELETE", base + "/99", js, ``, http.StatusNotFound, "no such snapshot"},
		"other origin":  {"DELETE", base + "/" + created.ID, js, ``, http.StatusForbidden, "Origin"},
		"wrong handler": {"PUT", base, js, `{}`, http.StatusMethodNotAllowed, ""},
	}
	for name, c := range refused {
		req, _ := http.NewRequest(c.method, c.url, strings.NewReader(c.body))
		req.Header.Set("Content-Type", c.ctype)
		if name == "other origin" {
			req.Header.Set("Origin", "http://evil.example")
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != c.code || !bytes.Contains(b, []byte(c.words)) {
			t.Errorf("%s: %d %s, want %d mentioning %q", name, resp.StatusCode, b, c.code, c.words)
		}
	}

	var list []cdc.SnapshotInfo
	for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		code, body = call("GET", base, "", "")
		if code != 200 {
			t.Fatalf("GET: %d %s", code, body)
		}
		if err := json.Unmarshal([]byte(body), &list); err != nil {
			t.Fatal(err)
		}
		if len(list) == 1 && list[0].State == cdc.SnapshotDone {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("not done: %s", body)
		}
	}
	if got := list[0]; got.ID != created.ID || got.DoneDocuments != 150 || got.TotalDocuments != 150 || got.Collections[0] != "shop.orders" {
		t.Errorf("GET: %+v", got)
	}
	if code, body = call("DELETE", base+"/"+created.ID, js, ""); code != http.StatusConflict || !strings.Contains(body, "already done") {
		t.Errorf("DELETE of a done snapshot: %d %s", code, body)
	}
}
