package config

import (
	"slices"
	"strings"
	"testing"
	"time"
)

func TestMongoCollections(t *testing.T) {
	p, err := Parse([]byte(`name: p
source:
  mongo:
    database: shop
    collections: ["orders", "cust_*"]
    exclude: ["tmp_*"]
    snapshot_parallelism: 4
sink: {stdout: {}}
`), env(nil))
	if err != nil {
		t.Fatal(err)
	}
	m := p.Source.Mongo
	if !slices.Equal(m.Collections, []string{"orders", "cust_*"}) || !slices.Equal(m.Exclude, []string{"tmp_*"}) || m.SnapshotParallelism != 4 {
		t.Errorf("got %+v", m)
	}
	p, err = Parse([]byte("name: p\nsource: {mongo: {collections: ['shop.*', 'crm.customers']}}\nsink: {stdout: {}}\n"), env(nil))
	if err != nil {
		t.Fatalf("cluster-wide: %v", err)
	}
	if p.Source.Mongo.Database != "" || p.Source.Mongo.SnapshotParallelism != 2 {
		t.Errorf("cluster-wide: %+v", p.Source.Mongo)
	}
}

func TestMongoCollectionsBad(t *testing.T) {
	tests := map[string]struct {
		mongo string
		want  []string
	}{
		"both":             {"{database: d, collection: c, collections: [a]}", []string{"source.mongo.collection: collection and collections are both set"}},
		"bad glob":         {"{database: d, collections: [a, 'cust_[x']}", []string{`source.mongo.collections[1]: "cust_[x" is not a valid glob`}},
		"bad exclude":      {"{database: d, collections: ['*'], exclude: ['[']}", []string{`source.mongo.exclude[0]: "[" is not a valid glob`}},
		"cluster no dot":   {"{collections: [orders]}", []string{`source.mongo.collections[0]: "orders": without database, an entry is a "db.coll" glob`}},
		"exclude alone":    {"{database: d, collection: c, exclude: [x]}", []string{"source.mongo.exclude: needs collections"}},
		"empty entry":      {"{database: d, collections: ['']}", []string{"source.mongo.collections[0]: empty"}},
		"parallelism":      {"{database: d, collections: ['*'], snapshot_parallelism: 0}", []string{"source.mongo.snapshot_parallelism: 0 is not between 1 and 64"}},
		"nothing":          {"{database: d}", []string{"source.mongo.collection: required (or collections)"}},
		"no database":      {"{collection: c}", []string{"source.mongo.database: required"}},
		"system still bad": {"{database: d, collection: system.views}", []string{"source.mongo.collection:", "no system collections"}},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			_, err := Parse([]byte("name: p\nsource:\n  mongo: "+tc.mongo+"\nsink: {stdout: {}}\n"), env(nil))
			if err == nil {
				t.Fatal("no error")
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error:\n%v\nwant it to contain %q", err, w)
				}
			}
		})
	}
}

func TestMongoHeadroom(t *testing.T) {
	p, err := Parse([]byte("name: p\nsource: {mongo: {database: d, collection: c}}\nsink: {stdout: {}}\n"), env(nil))
	if err != nil {
		t.Fatal(err)
	}
	if m := p.Source.Mongo; m.HeadroomWarn != Duration(time.Hour) || m.OplogPoll != Duration(30*time.Second) {
		t.Errorf("defaults: headroom_warn %v, oplog_poll %v; want 1h and 30s", m.HeadroomWarn, m.OplogPoll)
	}
	p, err = Parse([]byte("name: p\nsource: {mongo: {database: d, collection: c, headroom_warn: 0s, oplog_poll: 5s}}\nsink: {stdout: {}}\n"), env(nil))
	if err != nil {
		t.Fatal(err)
	}
	if m := p.Source.Mongo; m.HeadroomWarn != 0 || m.OplogPoll != Duration(5*time.Second) {
		t.Errorf("set: headroom_warn %v, oplog_poll %v; want 0 and 5s", m.HeadroomWarn, m.OplogPoll)
	}
	for mongo, want := range map[string]string{
		"{database: d, collection: c, headroom_warn: -1m}": "source.mongo.headroom_warn: -1m0s is negative",
		"{database: d, collection: c, oplog_poll: 10ms}":   "source.mongo.oplog_poll: 10ms is below the minimum of 100ms",
	} {
		_, err := Parse([]byte("name: p\nsource:\n  mongo: "+mongo+"\nsink: {stdout: {}}\n"), env(nil))
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: %v, want %q", mongo, err, want)
		}
	}
}
