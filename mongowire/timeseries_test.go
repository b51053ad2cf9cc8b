package mongowire_test

import (
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"

	"github.com/tide-cdc/tide/mongowire"
)

// TestTimeseriesCollection: create's timeseries options as mongod 7.0
// lists them, measurements read back as documents (duplicate _ids
// included, as the collection-management spec's case), system.buckets
// listed, and the writes mongod refuses refused with its errors.
func TestTimeseriesCollection(t *testing.T) {
	_, c := setup(t)
	ctx := t.Context()
	db := c.Database("ts")
	err := db.CreateCollection(ctx, "weather", options.CreateCollection().
		SetTimeSeriesOptions(options.TimeSeries().SetTimeField("timestamp").SetMetaField("metadata").SetGranularity("hours")).
		SetExpireAfterSeconds(86400))
	if err != nil {
		t.Fatal(err)
	}
	list := run(t, db, bson.D{{Key: "listCollections", Value: 1}})
	vals, _ := list.Lookup("cursor", "firstBatch").Array().Values()
	types := map[string]string{}
	for _, v := range vals {
		d := v.Document()
		types[d.Lookup("name").StringValue()] = d.Lookup("type").StringValue()
		if d.Lookup("name").StringValue() == "weather" {
			ts := d.Lookup("options", "timeseries").Document()
			if ts.Lookup("granularity").StringValue() != "hours" || ts.Lookup("bucketMaxSpanSeconds").AsInt64() != 2592000 || ts.Lookup("metaField").StringValue() != "metadata" {
				t.Errorf("timeseries options %s, want granularity hours, bucketMaxSpanSeconds 2592000", ts)
			}
			if d.Lookup("options", "expireAfterSeconds").AsInt64() != 86400 {
				t.Errorf("options %s, want expireAfterSeconds 86400", d.Lookup("options"))
			}
		}
	}
	if types["weather"] != "timeseries" || types["system.buckets.weather"] != "collection" {
		t.Errorf("listCollections types %v, want weather: timeseries and system.buckets.weather: collection", types)
	}

	// The example of MongoDB's time-series documentation.
	coll := db.Collection("weather")
	at := func(h int) time.Time { return time.Date(2021, 5, 18, h, 0, 0, 0, time.UTC) }
	docs := []any{
		bson.D{{Key: "metadata", Value: bson.D{{Key: "sensorId", Value: 5578}, {Key: "type", Value: "temperature"}}}, {Key: "timestamp", Value: at(0)}, {Key: "temp", Value: 12}},
		bson.D{{Key: "metadata", Value: bson.D{{Key: "sensorId", Value: 5578}, {Key: "type", Value: "temperature"}}}, {Key: "timestamp", Value: at(4)}, {Key: "temp", Value: 11}},
		bson.D{{Key: "metadata", Value: bson.D{{Key: "sensorId", Value: 5579}, {Key: "type", Value: "temperature"}}}, {Key: "timestamp", Value: at(8)}, {Key: "temp", Value: 15}},
	}
	if _, err := coll.InsertMany(ctx, docs); err != nil {
		t.Fatal(err)
	}
	var got []bson.M
	cur, err := coll.Find(ctx, bson.D{{Key: "metadata.sensorId", Value: 5578}}, options.Find().SetSort(bson.D{{Key: "timestamp", Value: -1}}))
	if err == nil {
		err = cur.All(ctx, &got)
	}
	if err != nil || len(got) != 2 || got[0]["temp"] != int32(11) {
		t.Errorf("find = %v, %v; want the two measurements of sensor 5578, latest first", got, err)
	}
	var avg []bson.M
	cur, err = coll.Aggregate(ctx, mongo.Pipeline{{{Key: "$group", Value: bson.D{{Key: "_id", Value: "$metadata.sensorId"}, {Key: "avg", Value: bson.D{{Key: "$avg", Value: "$temp"}}}}}}, {{Key: "$sort", Value: bson.D{{Key: "_id", Value: 1}}}}})
	if err == nil {
		err = cur.All(ctx, &avg)
	}
	if err != nil || len(avg) != 2 || avg[0]["avg"] != 11.5 {
		t.Errorf("aggregate = %v, %v; want sensor 5578 at 11.5", avg, err)
	}

	// Duplicate _ids are measurements like any other.
	dup := []any{bson.D{{Key: "_id", Value: 1}, {Key: "timestamp", Value: at(1)}}, bson.D{{Key: "_id", Value: 1}, {Key: "timestamp", Value: at(2)}}}
	if _, err := coll.InsertMany(ctx, dup); err != nil {
		t.Fatalf("duplicate _ids: %v", err)
	}
	if n, _ := coll.CountDocuments(ctx, bson.D{{Key: "_id", Value: 1}}); n != 2 {
		t.Errorf("%d measurements with _id 1, want 2", n)
	}
	_, err = coll.InsertOne(ctx, bson.D{{Key: "temp", Value: 1}})
	wantCode(t, err, 2, "'timestamp' must be present and contain a valid BSON UTC datetime value")

	// Updates: the metaField only, multi, no upsert (mongod 7.0).
	onMeta := bson.D{{Key: "metadata.sensorId", Value: 5579}}
	setMeta := bson.D{{Key: "$set", Value: bson.D{{Key: "metadata.type", Value: "celsius"}}}}
	if r, err := coll.UpdateMany(ctx, onMeta, setMeta); err != nil || r.ModifiedCount != 1 {
		t.Errorf("update on the metaField = %+v, %v; want 1 modified", r, err)
	}
	_, err = coll.UpdateOne(ctx, onMeta, setMeta)
	wantCode(t, err, 72, "non-multi")
	_, err = coll.UpdateMany(ctx, onMeta, setMeta, options.UpdateMany().SetUpsert(true))
	wantCode(t, err, 72, "upsert")
	_, err = coll.UpdateMany(ctx, bson.D{{Key: "temp", Value: 15}}, setMeta)
	wantCode(t, err, 72, "queries a field that is not the metaField")
	_, err = coll.UpdateMany(ctx, onMeta, bson.D{{Key: "$set", Value: bson.D{{Key: "temp", Value: 0}}}})
	wantCode(t, err, 72, "updates a field that is not the metaField")
	// Deletes take any filter (7.0).
	if r, err := coll.DeleteMany(ctx, bson.D{{Key: "temp", Value: bson.D{{Key: "$gt", Value: 11}}}}); err != nil || r.DeletedCount != 2 {
		t.Errorf("delete by a measurement field = %+v, %v; want 2", r, err)
	}

	_, err = coll.Watch(ctx, mongo.Pipeline{})
	wantCode(t, err, 166, "timeseries")
	// The buckets, as mongodump reads them: one uncompressed bucket per
	// measurement; written back (as mongorestore does), they are
	// measurements again.
	buckets := db.Collection("system.buckets.weather")
	var bucket bson.Raw
	if bucket, err = buckets.FindOne(ctx, bson.D{{Key: "meta.sensorId", Value: 5578}}).Raw(); err != nil {
		t.Fatal(err)
	}
	if bucket.Lookup("control", "version").AsInt64() != 1 || bucket.Lookup("data", "temp", "0").AsInt64() != 11 || bucket.Lookup("control", "min", "timestamp").Time().Minute() != 0 {
		t.Errorf("bucket %s, want version 1 with the measurement of 11 and a rounded minimum time", bucket)
	}
	restored := db.Collection("restored")
	if err := db.CreateCollection(ctx, "restored", options.CreateCollection().SetTimeSeriesOptions(options.TimeSeries().SetTimeField("timestamp").SetMetaField("metadata"))); err != nil {
		t.Fatal(err)
	}
	if _, err := db.Collection("system.buckets.restored").InsertOne(ctx, bucket); err != nil {
		t.Fatal(err)
	}
	var m bson.M
	if err := restored.FindOne(ctx, bson.D{}).Decode(&m); err != nil || m["temp"] != int32(11) || m["metadata"].(bson.D)[0].Value != int32(5578) {
		t.Errorf("unpacked %v, %v; want the measurement back", m, err)
	}
	_, err = db.Collection("system.buckets.nothing").InsertOne(ctx, bucket)
	wantCode(t, err, 73, "cannot write to")
	cur, err = coll.Indexes().List(ctx)
	var specs []bson.M
	if err == nil {
		err = cur.All(ctx, &specs)
	}
	if err != nil || len(specs) != 0 {
		t.Errorf("indexes %v, %v; want none (no _id index on a time-series collection)", specs, err)
	}
}

// TestTimeseriesOptions: bucketing options and the errors of bad ones.
func TestTimeseriesOptions(t *testing.T) {
	_, c := setup(t)
	ctx := t.Context()
	db := c.Database("ts")
	create := func(name string, ts bson.D) error {
		return db.RunCommand(ctx, bson.D{{Key: "create", Value: name}, {Key: "timeseries", Value: ts}}).Err()
	}
	if err := create("b", bson.D{{Key: "timeField", Value: "t"}, {Key: "bucketMaxSpanSeconds", Value: 3600}, {Key: "bucketRoundingSeconds", Value: 3600}}); err != nil {
		t.Fatal(err)
	}
	tests := map[string]struct {
		ts   bson.D
		code int32
		msg  string
	}{
		"no timeField":   {bson.D{{Key: "metaField", Value: "m"}}, 40414, "timeField"},
		"meta is time":   {bson.D{{Key: "timeField", Value: "t"}, {Key: "metaField", Value: "t"}}, 2, "cannot be the same"},
		"meta is _id":    {bson.D{{Key: "timeField", Value: "t"}, {Key: "metaField", Value: "_id"}}, 2, "_id"},
		"granularity":    {bson.D{{Key: "timeField", Value: "t"}, {Key: "granularity", Value: "days"}}, 2, "granularity"},
		"spans unequal":  {bson.D{{Key: "timeField", Value: "t"}, {Key: "bucketMaxSpanSeconds", Value: 60}, {Key: "bucketRoundingSeconds", Value: 30}}, 72, "must be equal"},
		"span and grain": {bson.D{{Key: "timeField", Value: "t"}, {Key: "granularity", Value: "hours"}, {Key: "bucketMaxSpanSeconds", Value: 60}, {Key: "bucketRoundingSeconds", Value: 60}}, 72, "granularity"},
		"unknown field":  {bson.D{{Key: "timeField", Value: "t"}, {Key: "colour", Value: 1}}, 40415, "colour"},
	}
	for name, tt := range tests {
		t.Run(name, func(t *testing.T) {
			wantCode(t, create("bad", tt.ts), tt.code, tt.msg)
		})
	}
}

// TestTimeseriesTTL: expireAfterSeconds removes measurements older than
// it by their time field.
func TestTimeseriesTTL(t *testing.T) {
	_, c := setup(t, func(cfg *mongowire.Config) { cfg.TTLMonitorInterval = 50 * time.Millisecond })
	ctx := t.Context()
	db := c.Database("ts")
	if err := db.CreateCollection(ctx, "m", options.CreateCollection().SetTimeSeriesOptions(options.TimeSeries().SetTimeField("t")).SetExpireAfterSeconds(3600)); err != nil {
		t.Fatal(err)
	}
	coll := db.Collection("m")
	now := time.Now()
	if _, err := coll.InsertMany(ctx, []any{bson.D{{Key: "t", Value: now.Add(-2 * time.Hour)}}, bson.D{{Key: "t", Value: now}}}); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		n, err := coll.CountDocuments(ctx, bson.D{})
		if err != nil {
			t.Fatal(err)
		}
		if n == 1 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d measurements left, want 1", n)
		}
		time.Sleep(20 * time.Millisecond)
	}
}
