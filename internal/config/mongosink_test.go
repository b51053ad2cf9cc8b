package config

import "testing"

// TestMongoSinkContract: the sink.mongo keys of the issue parse, with
// their defaults, and checkpoint: sink is accepted for it.
func TestMongoSinkContract(t *testing.T) {
	p, err := Parse([]byte(`name: p
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
`), env(map[string]string{"PW": "pw"}))
	if err != nil {
		t.Fatal(err)
	}
	m := p.Sink.Mongo
	if m.URI != "mongodb://u:pw@h:27017/?replicaSet=rs0" || m.Database != "{db}" || m.Collection != "{coll}" || m.Mode != "mirror" ||
		m.WriteConcern != "majority" || m.Ordered == nil || !*m.Ordered || !m.ApplyDDL || m.OnWriteError != "dead_letter" || m.DeadLetter != "ops.rejects" {
		t.Errorf("sink.mongo = %+v", m.Config)
	}
	if p.Checkpoint != "sink" {
		t.Errorf("checkpoint = %q", p.Checkpoint)
	}
	if got := p.Secrets(); len(got) != 1 || got[0] != "pw" {
		t.Errorf("Secrets = %q, want the URI's password", got)
	}

	p, err = Parse([]byte("name: p\nsource: {generate: {}}\nsink: {mongo: {uri: embedded}}\n"), env(nil))
	if err != nil {
		t.Fatal(err)
	}
	m = p.Sink.Mongo
	if m.Database != "{db}" || m.Collection != "{coll}" || m.Mode != "mirror" || m.WriteConcern != "majority" ||
		m.Ordered != nil || m.OnWriteError != "fail" || m.CheckpointDatabase != "tide" {
		t.Errorf("defaults of sink.mongo = %+v", m.Config)
	}
}
