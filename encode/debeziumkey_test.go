package encode_test

import (
	"testing"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/tide-cdc/tide/encode"
)

// TestDebeziumKey: the record key Debezium's MongoDB connector writes,
// {"id": <the _id in strict JSON, as a string>}, for the _id types
// Debezium's documentation shows, and a sharded key's other fields left
// out.
func TestDebeziumKey(t *testing.T) {
	oid, _ := bson.ObjectIDFromHex("596e275826f08b2730779e1f")
	for name, tc := range map[string]struct {
		key  bson.D
		want string
	}{
		"int64":    {bson.D{{Key: "_id", Value: int64(1004)}}, `{"id":"{\"$numberLong\":\"1004\"}"}`},
		"int32":    {bson.D{{Key: "_id", Value: int32(7)}}, `{"id":"7"}`},
		"objectid": {bson.D{{Key: "_id", Value: oid}}, `{"id":"{\"$oid\":\"596e275826f08b2730779e1f\"}"}`},
		"string":   {bson.D{{Key: "_id", Value: `a"b`}}, `{"id":"\"a\\\"b\""}`},
		"sharded":  {bson.D{{Key: "region", Value: "eu"}, {Key: "_id", Value: int32(1)}}, `{"id":"1"}`},
		"document": {bson.D{{Key: "_id", Value: bson.D{{Key: "a", Value: int32(1)}}}}, `{"id":"{\"a\":1}"}`},
	} {
		t.Run(name, func(t *testing.T) {
			raw, err := bson.Marshal(tc.key)
			if err != nil {
				t.Fatal(err)
			}
			got, err := encode.DebeziumKey([]byte("prefix"), raw)
			if err != nil {
				t.Fatal(err)
			}
			if string(got) != "prefix"+tc.want {
				t.Errorf("got %s, want %s", got[6:], tc.want)
			}
		})
	}
	raw, _ := bson.Marshal(bson.D{{Key: "x", Value: 1}})
	if got, err := encode.DebeziumKey([]byte("p"), raw); err == nil || string(got) != "p" {
		t.Errorf("a key without _id: %q, %v; want an error and dst unchanged", got, err)
	}
}
