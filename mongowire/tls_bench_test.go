package mongowire_test

import (
	"context"
	"net/url"
	"sync"
	"testing"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"

	"github.com/tide-cdc/tide/internal/testenv"
	"github.com/tide-cdc/tide/mongowire"
)

// BenchmarkTLS compares, in one run, find by _id from 4 clients over
// plain TCP and over TLS, and the rate of new connections (TCP, then TCP
// plus the TLS handshake) that answer a ping.
func BenchmarkTLS(b *testing.B) {
	certs := testenv.TLSCerts(b)
	tlsCfg, err := mongowire.TLSFiles{CertFile: certs.ServerCertFile, KeyFile: certs.ServerKeyFile}.Config()
	if err != nil {
		b.Fatal(err)
	}
	for _, mode := range []string{"plain", "tls"} {
		s := testenv.MongoWire(b, func(c *mongowire.Config) {
			if mode == "tls" {
				c.TLS = tlsCfg
			}
		})
		uri := s.URI()
		if mode == "tls" {
			uri += "&tlsCAFile=" + url.QueryEscape(certs.CAFile)
		}
		coll := testenv.MongoClient(b, uri).Database("bench").Collection("tls")
		ctx := context.Background()
		for i := range 1000 {
			if _, err := coll.InsertOne(ctx, bson.D{{Key: "_id", Value: i}, {Key: "v", Value: "some value"}}); err != nil {
				b.Fatal(err)
			}
		}
		b.Run("find/"+mode, func(b *testing.B) {
			var wg sync.WaitGroup
			per := b.N/4 + 1
			for w := range 4 {
				wg.Add(1)
				go func() {
					defer wg.Done()
					for i := range per {
						if err := coll.FindOne(ctx, bson.D{{Key: "_id", Value: (w*per + i) % 1000}}).Err(); err != nil {
							b.Error(err)
							return
						}
					}
				}()
			}
			wg.Wait()
			b.ReportMetric(float64(4*per)/b.Elapsed().Seconds(), "ops/s")
		})
		b.Run("connect/"+mode, func(b *testing.B) {
			for b.Loop() {
				c, err := mongo.Connect(options.Client().ApplyURI(uri + "&directConnection=true").SetMaxPoolSize(1))
				if err != nil {
					b.Fatal(err)
				}
				if err := c.Database("admin").RunCommand(ctx, bson.D{{Key: "ping", Value: 1}}).Err(); err != nil {
					b.Fatal(err)
				}
				c.Disconnect(ctx)
			}
			b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "conns/s")
		})
	}
}
