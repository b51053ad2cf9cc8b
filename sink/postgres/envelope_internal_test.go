package postgres

import (
	"strings"
	"testing"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/tide-cdc/tide/cdc"
	"github.com/tide-cdc/tide/encode"
)

// BenchmarkSplitEnvelope: the cost append mode adds per record on this
// side, for a 200-byte document's envelope.
func BenchmarkSplitEnvelope(b *testing.B) {
	key, _ := bson.Marshal(bson.D{{Key: "_id", Value: int64(12345)}})
	doc, _ := bson.Marshal(bson.D{{Key: "_id", Value: int64(12345)}, {Key: "seq", Value: int64(12345)}, {Key: "payload", Value: strings.Repeat("x", 150)}})
	ev := cdc.Event{Op: cdc.OpInsert, Namespace: "gen.events", ClusterTime: cdc.Timestamp{T: 1700000000, I: 12345},
		WallTimeMS: 1700000000123, DocumentKey: key, FullDocument: doc, Pos: cdc.Position(`{"seq":12345}`)}
	env, err := encode.Envelope(nil, &ev)
	if err != nil {
		b.Fatal(err)
	}
	buf := make([]byte, 0, 4096)
	b.SetBytes(int64(len(env)))
	for b.Loop() {
		buf = append(buf[:0], env...)
		var r appendRow
		if buf, err = splitEnvelope(buf, 0, &r); err != nil {
			b.Fatal(err)
		}
	}
}
