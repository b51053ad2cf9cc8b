package mongowire_test

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"

	"github.com/tide-cdc/tide/internal/testenv"
	"github.com/tide-cdc/tide/mongowire"
)

// BenchmarkAuthConnect measures connection setup: a new client, its
// handshake and one ping, with SCRAM-SHA-256 (deliberately slow: 15000
// PBKDF2 iterations on the client) and without authentication.
//
//	go test ./mongowire -run '^$' -bench 'BenchmarkAuthConnect' -benchtime 50x
func BenchmarkAuthConnect(b *testing.B) {
	s := startAuthB(b)
	for name, uri := range map[string]string{
		"scram-sha-256": "mongodb://svc:svc-pw@" + s.Addr() + "/?directConnection=true&authSource=app&authMechanism=SCRAM-SHA-256",
		"scram-sha-1":   "mongodb://svc:svc-pw@" + s.Addr() + "/?directConnection=true&authSource=app&authMechanism=SCRAM-SHA-1",
		"none":          "mongodb://" + testenv.MongoWire(b).Addr() + "/?directConnection=true",
	} {
		b.Run(name, func(b *testing.B) {
			ctx := context.Background()
			start := time.Now()
			for range b.N {
				c, err := mongo.Connect(options.Client().ApplyURI(uri))
				if err != nil {
					b.Fatal(err)
				}
				if err := c.Ping(ctx, nil); err != nil {
					b.Fatal(err)
				}
				c.Disconnect(ctx)
			}
			b.ReportMetric(float64(b.N)/time.Since(start).Seconds(), "conns/s")
		})
	}
}

// BenchmarkAuthSteadyState compares ops/s with 4 clients against a server
// without authentication and one with it (a readWrite user, so that every
// command goes through the privilege check). The goal is auth/off ≥ 0.95.
// cpu-µs/op, the process's CPU time (client and server) per operation, is
// the steadier figure on a loaded machine.
//
//	go test ./mongowire -run '^$' -bench 'BenchmarkAuthSteadyState' -benchtime 20000x
func BenchmarkAuthSteadyState(b *testing.B) {
	const docs = 10_000
	off := testenv.MongoWire(b)
	on := startAuthB(b)
	clients := map[string]*mongo.Client{
		"off": testenv.MongoClient(b, off.URI()),
		"on":  testenv.MongoClient(b, "mongodb://svc:svc-pw@"+on.Addr()+"/?replicaSet=rs0&authSource=app"),
	}
	ctx := context.Background()
	for _, c := range clients {
		coll := c.Database("app").Collection("docs")
		batch := make([]any, 0, docs)
		for i := range docs {
			batch = append(batch, bson.D{{Key: "_id", Value: i}, {Key: "pad", Value: "0123456789abcdef0123456789abcdef"}})
		}
		if _, err := coll.InsertMany(ctx, batch); err != nil {
			b.Fatal(err)
		}
	}
	// Alternate off and on, so that load from elsewhere hits both alike.
	for _, op := range []string{"find_by_id", "insertOne"} {
		for _, mode := range []string{"off", "on", "off", "on"} {
			b.Run(op+"/"+mode, func(b *testing.B) {
				db := clients[mode].Database("app")
				var seq atomic.Int64
				cpu0 := cpuTime()
				defer func() { b.ReportMetric(float64((cpuTime()-cpu0).Nanoseconds())/float64(b.N)/1e3, "cpu-µs/op") }()
				switch op {
				case "find_by_id":
					coll := db.Collection("docs")
					parallel(b, func() error { return findOne(ctx, coll, bson.D{{Key: "_id", Value: seq.Add(7919) % docs}}) })
				case "insertOne":
					coll := db.Collection("ins")
					parallel(b, func() error {
						_, err := coll.InsertOne(ctx, bson.D{{Key: "n", Value: seq.Add(1)}})
						return err
					})
				}
			})
		}
	}
}

// startAuthB starts a server with Auth and a readWrite user svc in app.
func startAuthB(b *testing.B) *mongowire.Server {
	b.Helper()
	s := testenv.MongoWire(b, func(c *mongowire.Config) { c.Auth = true; c.AdminUser = "admin"; c.AdminPassword = "bench-admin-pw" })
	root := testenv.MongoClient(b, "mongodb://admin:bench-admin-pw@"+s.Addr()+"/?directConnection=true")
	err := root.Database("app").RunCommand(context.Background(), bson.D{{Key: "createUser", Value: "svc"}, {Key: "pwd", Value: "svc-pw"}, {Key: "roles", Value: bson.A{"readWrite"}}}).Err()
	if err != nil {
		b.Fatal(fmt.Errorf("create svc: %w", err))
	}
	return s
}
