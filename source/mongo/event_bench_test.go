package mongo

import (
	"strings"
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
)

// BenchmarkReaderEvent is the reader's own work for one insert of a
// 1 KiB document, as the split stage hands it over: the copy of the
// driver's document, its conversion to an event and the event's position.
func BenchmarkReaderEvent(b *testing.B) {
	doc := kibDoc(b, 7)
	raw, err := bson.Marshal(bson.D{
		{Key: "_id", Value: bson.D{{Key: "_data", Value: "8265A1B2C3000000012B042C0100296E5A1004" + strings.Repeat("AB", 40) + "0004"}}},
		{Key: "operationType", Value: "insert"},
		{Key: "clusterTime", Value: bson.Timestamp{T: 1700000000, I: 1}},
		{Key: "wallTime", Value: bson.NewDateTimeFromTime(time.UnixMilli(1700000000123))},
		{Key: "fullDocument", Value: doc},
		{Key: "ns", Value: bson.D{{Key: "db", Value: "shop"}, {Key: "coll", Value: "orders"}}},
		{Key: "documentKey", Value: bson.D{{Key: "_id", Value: 7}}},
		{Key: "collectionUUID", Value: bson.Binary{Subtype: 4, Data: make([]byte, 16)}},
	})
	if err != nil {
		b.Fatal(err)
	}
	r := &reader{s: &Source{split: true}}
	b.ReportAllocs()
	b.SetBytes(int64(len(raw)))
	for b.Loop() {
		cp, err := r.copyCurrent(raw)
		if err != nil {
			b.Fatal(err)
		}
		ev, err := changeEvent(cp, &r.lastNS)
		if err != nil {
			b.Fatal(err)
		}
		ev.Pos = r.withEpoch(appendResumePos(cp[len(cp):], ev.ResumeToken))
	}
}
