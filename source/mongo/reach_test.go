package mongo

import (
	"context"
	"errors"
	"log/slog"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"

	"github.com/tide-cdc/tide/cdc"
	"github.com/tide-cdc/tide/internal/testenv"
	"github.com/tide-cdc/tide/mongowire"
)

// A source whose server is not there says so within 5 s, in plain words
// (the address and the cause), reports each retry to the pipeline, and
// opens once the server comes: it retries forever by default.
func TestWaitsForServer(t *testing.T) {
	// A data directory with shop.orders, for the server that comes late.
	dir := t.TempDir()
	first := testenv.MongoWire(t, func(c *mongowire.Config) { c.DataDir = dir })
	c, err := mongo.Connect(options.Client().ApplyURI(first.URI()))
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Database("shop").CreateCollection(t.Context(), "orders"); err != nil {
		t.Fatal(err)
	}
	if err := c.Disconnect(t.Context()); err != nil {
		t.Fatal(err)
	}
	if err := first.Close(); err != nil {
		t.Fatal(err)
	}

	// A port where nothing listens.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()

	var logs testenv.Buffer
	var mu sync.Mutex
	var reports []error
	cfg := Config{
		URI: "mongodb://" + addr + "/?replicaSet=rs0", Database: "shop", Collection: "orders",
		Snapshot: "never", MaxAwait: 100 * time.Millisecond, ConnectTimeout: 10 * time.Second,
		Logger: slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelWarn})),
	}
	src := New(cfg)
	src.SetRetry(cdc.RetryPolicy{Initial: 100 * time.Millisecond, Max: time.Second}, func(attempt int, err error) {
		mu.Lock()
		defer mu.Unlock()
		reports = append(reports, err)
	})
	opened := make(chan error, 1)
	start := time.Now()
	go func() { opened <- src.Open(t.Context(), nil) }()
	defer src.Close()

	want := "waiting for MongoDB at " + addr + ": connection refused; retrying"
	for !strings.Contains(logs.String(), want) {
		if time.Since(start) > 5*time.Second {
			t.Fatalf("no %q within 5 s; logs:\n%s", want, logs.String())
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Logf("said %q after %s", want, time.Since(start).Round(time.Millisecond))

	testenv.MongoWire(t, func(c *mongowire.Config) { c.DataDir, c.Addr = dir, addr })
	select {
	case err := <-opened:
		if err != nil {
			t.Fatalf("Open after the server came = %v", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("Open did not return within 30 s of the server's start")
	}
	mu.Lock()
	defer mu.Unlock()
	if len(reports) < 2 || reports[0] == nil || !strings.Contains(reports[0].Error(), "connection refused") {
		t.Fatalf("reports %v, want failures naming the cause, then a recovery", reports)
	}
	if last := reports[len(reports)-1]; last != nil {
		t.Errorf("last report %v, want the recovery (nil)", last)
	}
	var we *waitingError
	if !errors.As(reports[0], &we) || we.addr != addr {
		t.Errorf("report %v is not a waitingError for %s", reports[0], addr)
	}
}

// Cancelling Open while it waits returns at once.
func TestWaitForServerCancelled(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	src := New(Config{URI: "mongodb://" + addr + "/?replicaSet=rs0", Database: "shop", Collection: "orders",
		Snapshot: "never", Logger: testLogger(t)})
	defer src.Close()
	ctx, cancel := context.WithTimeout(t.Context(), time.Second)
	defer cancel()
	start := time.Now()
	err = src.Open(ctx, nil)
	if err == nil || !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("Open = %v, want the context's end", err)
	}
	if took := time.Since(start); took > 5*time.Second {
		t.Errorf("Open took %s after its context ended", took)
	}
}

// PositionTime reads a position's cluster time without a connection: a
// restarted pipeline knows its lag from its checkpoint at once.
func TestPositionTime(t *testing.T) {
	e := newEnv(t)
	src := openSource(t, e.config(t), nil)
	before := time.Now().Add(-time.Second)
	if _, err := e.coll.InsertOne(t.Context(), bson.D{{Key: "_id", Value: 1}}); err != nil {
		t.Fatal(err)
	}
	evs, err := pollUntil(t, src, func(evs []cdc.Event) bool {
		for _, ev := range evs {
			if ev.Op == cdc.OpInsert {
				return true
			}
		}
		return false
	})
	if err != nil {
		t.Fatal(err)
	}
	var pos cdc.Position
	for _, ev := range evs {
		if ev.Op == cdc.OpInsert {
			pos = ev.Pos
		}
	}
	got, ok := New(Config{}).PositionTime(pos)
	if !ok || got.Before(before.Truncate(time.Second)) || got.After(time.Now()) {
		t.Errorf("PositionTime(%s) = %v, %v; want the insert's cluster time, about now", pos, got, ok)
	}
	if _, ok := New(Config{}).PositionTime(cdc.Position(`{"seq": 1}`)); ok {
		t.Error("PositionTime of another source's position is ok")
	}
}
