package encode

import (
	"encoding/hex"
	"fmt"
	"strings"
	"testing"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/tide-cdc/tide/cdc"
)

// changeEvent builds an insert event shaped as a MongoDB change stream
// delivers it, with a full document padded (with order lines) until the
// event's BSON fields reach about size bytes.
func changeEvent(tb testing.TB, size int) cdc.Event {
	tb.Helper()
	id, _ := bson.ObjectIDFromHex("65a1b2c3d4e5f60718293a4b")
	at := bson.DateTime(1700000000123)
	token := "82" + strings.ToUpper(hex.EncodeToString([]byte("6565a1b2000000012b022c0100296e5a1004a3c1e1f0b5d64f5f9a6f3b1c2d3e4f5046645f696400646565a1b2c3d4e5f60718293a4b0004")))
	ev := cdc.Event{
		Op:          cdc.OpInsert,
		Namespace:   "shop.customers",
		ClusterTime: cdc.Timestamp{T: 1700000000, I: 1},
		WallTimeMS:  1700000000123,
		DocumentKey: mustMarshal(tb, bson.D{{Key: "_id", Value: id}}),
		ResumeToken: mustMarshal(tb, bson.D{{Key: "_data", Value: token}}),
	}
	doc := bson.D{
		{Key: "_id", Value: id},
		{Key: "name", Value: "Ada Lovelace"},
		{Key: "email", Value: "ada@example.com"},
		{Key: "age", Value: int32(36)},
		{Key: "balance", Value: 1234.56},
		{Key: "visits", Value: int64(987654321)},
		{Key: "active", Value: true},
		{Key: "createdAt", Value: at},
		{Key: "address", Value: bson.D{
			{Key: "street", Value: "12 St James's Square"},
			{Key: "city", Value: "London"},
			{Key: "zip", Value: "SW1Y 4JH"},
			{Key: "geo", Value: bson.A{-0.1357, 51.5073}},
		}},
		{Key: "tags", Value: bson.A{"vip", "newsletter", "beta"}},
		{Key: "note", Value: "Prefers \"analytical engine\" updates by e-mail.\nCall after 5pm."},
	}
	var orders bson.A
	for n := 0; ; n++ {
		full := append(doc, bson.E{Key: "orders", Value: orders})
		ev.FullDocument = mustMarshal(tb, full)
		if len(ev.FullDocument)+len(ev.DocumentKey)+len(ev.ResumeToken) >= size || n > 1000 {
			return ev
		}
		orders = append(orders, bson.D{
			{Key: "sku", Value: fmt.Sprintf("SKU-%05d", n)},
			{Key: "qty", Value: int32(n%7 + 1)},
			{Key: "price", Value: 9.99 + float64(n)},
			{Key: "at", Value: at + bson.DateTime(n*60000)},
		})
	}
}

func eventSize(ev *cdc.Event) int {
	return len(ev.FullDocument) + len(ev.DocumentKey) + len(ev.ResumeToken) + len(ev.UpdateDesc) + len(ev.PreImage)
}
