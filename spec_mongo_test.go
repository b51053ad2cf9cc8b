package tide

import (
	"slices"
	"strings"
	"testing"
	"time"

	mongosink "github.com/tide-cdc/tide/sink/mongo"
	mongosource "github.com/tide-cdc/tide/source/mongo"
)

func TestSpecMongoCollections(t *testing.T) {
	t.Parallel()
	s, err := parseSpec(`name: p
source:
  mongo:
    database: shop
    collections: ["orders", "cust_*"]
    exclude: ["tmp_*"]
    snapshot_parallelism: 4
sink: {stdout: {}}
`, nil)
	if err != nil {
		t.Fatal(err)
	}
	m := sectionConfig[*mongosource.Config](t, s.Source, "mongo")
	if !slices.Equal(m.Collections, []string{"orders", "cust_*"}) || !slices.Equal(m.Exclude, []string{"tmp_*"}) || m.SnapshotParallelism != 4 {
		t.Errorf("got %+v", m)
	}
	s, err = parseSpec("name: p\nsource: {mongo: {collections: ['shop.*', 'crm.customers']}}\nsink: {stdout: {}}\n", nil)
	if err != nil {
		t.Fatalf("cluster-wide: %v", err)
	}
	if m := sectionConfig[*mongosource.Config](t, s.Source, "mongo"); m.Database != "" || m.SnapshotParallelism != 2 {
		t.Errorf("cluster-wide: %+v", m)
	}
}

func TestSpecMongoCollectionsBad(t *testing.T) {
	t.Parallel()
	tests := map[string]struct {
		mongo string
		want  []string
		skip  string // why the case is skipped, for now
	}{
		"both":                 {"{database: d, collection: c, collections: [a]}", []string{"source.mongo.collection: collection and collections are both set"}, ""},
		"bad glob":             {"{database: d, collections: [a, 'cust_[x']}", []string{`source.mongo.collections[1]: "cust_[x" is not a valid glob`}, ""},
		"bad exclude":          {"{database: d, collections: ['*'], exclude: ['[']}", []string{`source.mongo.exclude[0]: "[" is not a valid glob`}, ""},
		"cluster no dot":       {"{collections: [orders]}", []string{`source.mongo.collections[0]: "orders": without database, an entry is a "db.coll" glob`}, ""},
		"exclude alone":        {"{database: d, collection: c, exclude: [x]}", []string{"source.mongo.exclude: needs collections"}, ""},
		"empty entry":          {"{database: d, collections: ['']}", []string{"source.mongo.collections[0]: empty"}, ""},
		"parallelism":          {"{database: d, collections: ['*'], snapshot_parallelism: 0}", []string{"source.mongo.snapshot_parallelism: 0 is not between 1 and 64"}, ""},
		"parallelism negative": {"{database: d, collections: ['*'], snapshot_parallelism: -1}", []string{"source.mongo.snapshot_parallelism: -1 is not between 1 and 64"}, ""},
		"parallelism too high": {"{database: d, collections: ['*'], snapshot_parallelism: 65}", []string{"source.mongo.snapshot_parallelism: 65 is not between 1 and 64"}, ""},
		"nothing":              {"{database: d}", []string{"source.mongo.collection: required (or collections)"}, ""},
		"no database":          {"{collection: c}", []string{"source.mongo.database: required"}, ""},
		"system still bad":     {"{database: d, collection: system.views}", []string{"source.mongo.collection:", "no system collections"}, ""},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			if tc.skip != "" {
				t.Skip(tc.skip)
			}
			_, err := parseSpec("name: p\nsource:\n  mongo: "+tc.mongo+"\nsink: {stdout: {}}\n", nil)
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

func TestSpecMongoHeadroom(t *testing.T) {
	t.Parallel()
	s, err := parseSpec("name: p\nsource: {mongo: {database: d, collection: c}}\nsink: {stdout: {}}\n", nil)
	if err != nil {
		t.Fatal(err)
	}
	if m := sectionConfig[*mongosource.Config](t, s.Source, "mongo"); m.HeadroomWarn != time.Hour || m.OplogPoll != 30*time.Second {
		t.Errorf("defaults: headroom_warn %v, oplog_poll %v; want 1h and 30s", m.HeadroomWarn, m.OplogPoll)
	}
	s, err = parseSpec("name: p\nsource: {mongo: {database: d, collection: c, headroom_warn: 0s, oplog_poll: 5s}}\nsink: {stdout: {}}\n", nil)
	if err != nil {
		t.Fatal(err)
	}
	if m := sectionConfig[*mongosource.Config](t, s.Source, "mongo"); m.HeadroomWarn != 0 || m.OplogPoll != 5*time.Second {
		t.Errorf("set: headroom_warn %v, oplog_poll %v; want 0 and 5s", m.HeadroomWarn, m.OplogPoll)
	}
	for mongo, want := range map[string]string{
		"{database: d, collection: c, headroom_warn: -1m}": "source.mongo.headroom_warn: -1m0s is negative",
		"{database: d, collection: c, oplog_poll: 10ms}":   "source.mongo.oplog_poll: 10ms is below the minimum of 100ms",
	} {
		_, err := parseSpec("name: p\nsource:\n  mongo: "+mongo+"\nsink: {stdout: {}}\n", nil)
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: %v, want %q", mongo, err, want)
		}
	}
}

// TestSpecMongoSinkContract: the sink.mongo keys of the issue parse, with
// their defaults, and checkpoint: sink is accepted for it.
func TestSpecMongoSinkContract(t *testing.T) {
	t.Parallel()
	s, err := parseSpec(`name: p
source: {mongo: {uri: embedded, database: shop, collection: orders, full_document: update_lookup}}
sink:
  mongo:
    uri: mongodb://u:${PW}@h:27017/?replicaSet=rs0
    database: "{db}"
    collection: "{coll}"
    mode: mirror
    write_concern: majority
    ordered: true
    apply_ddl: true
    on_write_error: dead_letter
    dead_letter: ops.rejects
checkpoint: sink
`, map[string]string{"PW": "pw"})
	if err != nil {
		t.Fatal(err)
	}
	m := sectionConfig[*mongosink.Config](t, s.Sink, "mongo")
	if m.URI != "mongodb://u:pw@h:27017/?replicaSet=rs0" || m.Database != "{db}" || m.Collection != "{coll}" || m.Mode != "mirror" ||
		m.WriteConcern != "majority" || m.Ordered == nil || !*m.Ordered || !m.ApplyDDL || m.OnWriteError != "dead_letter" || m.DeadLetter != "ops.rejects" {
		t.Errorf("sink.mongo = %+v", m)
	}
	if s.Checkpoint != "sink" {
		t.Errorf("checkpoint = %q", s.Checkpoint)
	}
	if got := s.Secrets(); len(got) != 1 || got[0] != "pw" {
		t.Errorf("Secrets = %q, want the URI's password", got)
	}

	s, err = parseSpec("name: p\nsource: {generate: {}}\nsink: {mongo: {uri: embedded}}\n", nil)
	if err != nil {
		t.Fatal(err)
	}
	m = sectionConfig[*mongosink.Config](t, s.Sink, "mongo")
	if m.Database != "{db}" || m.Collection != "{coll}" || m.Mode != "mirror" || m.WriteConcern != "majority" ||
		m.Ordered != nil || m.OnWriteError != "fail" || m.CheckpointDatabase != "tide" {
		t.Errorf("defaults of sink.mongo = %+v", m)
	}
}

func TestSpecEmbeddedSection(t *testing.T) {
	t.Parallel()
	tests := map[string]struct {
		embedded string
		uri      string
		want     string // "" means valid
	}{
		"auth":              {"{auth: true, user: tide, password: x}", "embedded", ""},
		"auth without user": {"{auth: true, password: x}", "embedded", "source.mongo.embedded.user: required with auth: true"},
		"auth without pw":   {"{auth: true, user: u}", "embedded", "source.mongo.embedded.password: required with auth: true"},
		"user without auth": {"{user: u, password: x}", "embedded", "source.mongo.embedded.auth: user and password are set but auth is false"},
		"not embedded":      {"{auth: true, user: u, password: x}", "mongodb://h/", "source.mongo.embedded: applies to uri: embedded only"},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			text := "name: e\nsource:\n  mongo: {uri: '" + tc.uri + "', database: d, collection: c, embedded: " + tc.embedded + "}\nsink: {stdout: {}}\n"
			s, err := parseSpec(text, nil)
			if tc.want == "" {
				if err != nil {
					t.Fatal(err)
				}
				if e := sectionConfig[*mongosource.Config](t, s.Source, "mongo").Embedded; e == nil || !e.Auth || e.User != "tide" || e.Password != "x" {
					t.Errorf("embedded = %+v", e)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("got %v, want an error containing %q", err, tc.want)
			}
		})
	}
}
