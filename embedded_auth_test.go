package tide

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/tide-cdc/tide/internal/testenv"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"

	"github.com/tide-cdc/tide/mongowire"
)

// requireAuth fails the test unless mongowire enforces authentication:
// with Config.Auth, an unauthenticated insert must be refused with code
// 13 Unauthorized. Accepting it is a security regression, never a reason
// to skip.
func requireAuth(t *testing.T) {
	t.Helper()
	srv := mongowire.New(mongowire.Config{Addr: "127.0.0.1:0", Auth: true, AdminUser: "probe", AdminPassword: "probe-password"})
	if err := srv.Start(); err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	c, err := mongo.Connect(options.Client().ApplyURI(srv.URI()))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Disconnect(context.Background())
	_, err = c.Database("d").Collection("c").InsertOne(t.Context(), bson.D{})
	if err == nil {
		t.Fatal("mongowire with Config.Auth accepted an unauthenticated insert: authentication is not enforced")
	}
	if ce := (mongo.CommandError{}); !errors.As(err, &ce) || ce.Code != 13 {
		t.Fatalf("an unauthenticated insert with Auth: %v, want code 13 Unauthorized", err)
	}
}

// TestEmbeddedAuth: uri: embedded with embedded.auth starts the embedded
// server with authentication, creates the user on a fresh data directory,
// and the source authenticates with the configured password; a wrong one
// later is refused, and neither password is logged or returned.
func TestEmbeddedAuth(t *testing.T) {
	requireAuth(t)
	dir := t.TempDir()
	out := filepath.Join(dir, "out.jsonl")
	text := fmt.Appendf(nil, `name: emb-auth
source:
  mongo:
    uri: embedded
    database: shop
    collection: orders
    embedded: {auth: true, user: tide, password: "${EMB_PW}"}
sink:
  file: {path: %q}
data_dir: %q
batch: {commit_interval: 10ms}
`, out, filepath.Join(dir, "data"))
	const password = "emb-Secret/pw@1"
	logs := &testenv.Buffer{}
	opts := func(pw string) Options {
		return Options{
			Getenv: func(k string) (string, bool) { return pw, k == "EMB_PW" },
			Logger: slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug})),
		}
	}
	p, err := build(t.Context(), text, opts(password))
	if err != nil {
		t.Fatal(err)
	}
	// Without credentials the server refuses data commands.
	anon, err := mongo.Connect(options.Client().ApplyURI(p.Embedded.URI()))
	if err != nil {
		t.Fatal(err)
	}
	defer anon.Disconnect(context.Background())
	if _, err := anon.Database("shop").Collection("orders").InsertOne(t.Context(), bson.D{}); err == nil {
		t.Fatal("the embedded server with auth: true accepted an unauthenticated insert")
	}
	// With them, a client writes, and the pipeline reads the changes.
	cred := options.Credential{Username: "tide", Password: password, AuthSource: "admin"}
	client, err := mongo.Connect(options.Client().ApplyURI(p.Embedded.URI()).SetAuth(cred))
	if err != nil {
		t.Fatal(err)
	}
	defer client.Disconnect(context.Background())
	coll := client.Database("shop").Collection("orders")
	if _, err := coll.InsertOne(t.Context(), bson.D{{Key: "_id", Value: 1}}); err != nil {
		t.Fatalf("insert as the configured user: %v", err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	errc := make(chan error, 1)
	go func() { errc <- p.Run(ctx) }()
	if _, err := coll.InsertOne(ctx, bson.D{{Key: "_id", Value: 2}}); err != nil {
		t.Fatal(err)
	}
	for p.Stats().EventsOut < 2 {
		select {
		case <-time.After(10 * time.Millisecond):
		case err := <-errc:
			t.Fatalf("Run returned early: %v", err)
		case <-ctx.Done():
			t.Fatalf("events committed: %d, want 2", p.Stats().EventsOut)
		}
	}
	client.Disconnect(context.Background())
	anon.Disconnect(context.Background())
	if err := p.Drain(ctx); err != nil {
		t.Fatal(err)
	}
	if err := <-errc; err != nil {
		t.Fatalf("Run after Drain = %v", err)
	}
	if n := lines(t, out); n != 2 {
		t.Errorf("file has %d lines, want 2", n)
	}

	// The user exists now; a wrong password is refused, and not printed.
	const wrong = "wrong-Password-42"
	q, err := build(t.Context(), text, opts(wrong))
	if err != nil {
		t.Fatal(err)
	}
	err = q.Run(ctx)
	if err == nil {
		t.Fatal("a pipeline with a wrong password ran")
	}
	if !strings.Contains(strings.ToLower(err.Error()), "auth") {
		t.Errorf("the error does not say authentication failed: %v", err)
	}
	for _, s := range []string{password, wrong} {
		if strings.Contains(err.Error(), s) || strings.Contains(logs.String(), s) {
			t.Errorf("a password is printed:\nerr: %v\nlogs:\n%s", err, logs)
		}
	}
}
