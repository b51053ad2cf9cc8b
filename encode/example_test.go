package encode_test

import (
	"fmt"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/tide-cdc/tide/cdc"
	"github.com/tide-cdc/tide/encode"
)

// Envelope turns an event, whose documents are raw BSON, into one JSON
// line of the CDC envelope, documents as relaxed Extended JSON.
func ExampleEnvelope() {
	key, _ := bson.Marshal(bson.D{{Key: "_id", Value: 7}})
	doc, _ := bson.Marshal(bson.D{{Key: "_id", Value: 7}, {Key: "item", Value: "tea"}})
	ev := cdc.Event{
		Op: cdc.OpInsert, Namespace: "shop.orders",
		ClusterTime: cdc.Timestamp{T: 1700000000, I: 1},
		DocumentKey: key, FullDocument: doc,
	}
	line, err := encode.Envelope(nil, &ev)
	if err != nil {
		panic(err)
	}
	fmt.Println(string(line))
	// Output: {"_namespace":"shop.orders","_op":"insert","_document_key":{"_id":7},"_cluster_time_s":1700000000,"_cluster_time_i":1,"_wall_time_ms":0,"_full_document":{"_id":7,"item":"tea"},"_update_desc":null,"_resume_token":null}
}
