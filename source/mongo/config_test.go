package mongo

import (
	"strings"
	"testing"

	"github.com/tide-cdc/tide/internal/config"
)

// The pipeline file's source.mongo section: defaults, both pipeline
// spellings (kept in order, and hashed the same), and validation that
// names each bad key.
func TestConfigSection(t *testing.T) {
	parse := func(t *testing.T, mongo string) (*Config, error) {
		t.Helper()
		doc := "name: orders\nsource:\n  mongo:\n" + mongo + "sink:\n  stdout: {}\n"
		return parseSection(doc, func(k string) (string, bool) {
			if k == "MONGO_URI" {
				return "mongodb://db.example:27017/?replicaSet=rs0", true
			}
			return "", false
		})
	}
	t.Run("defaults", func(t *testing.T) {
		c, err := parse(t, "    database: shop\n    collection: orders\n")
		if err != nil {
			t.Fatal(err)
		}
		if c.URI != "embedded" || c.FullDocument != "delta" || c.BeforeChange != "off" || c.Snapshot != "initial" ||
			c.MaxBufferedBytes != 64<<20 || c.BatchSize != 1000 {
			t.Fatalf("defaults = %+v", c)
		}
	})
	t.Run("full", func(t *testing.T) {
		c, err := parse(t, `    uri: ${MONGO_URI:-embedded}
    database: shop
    collection: orders
    full_document: update_lookup
    before_change: when_available
    snapshot: never
    max_buffered_bytes: 8MiB
    batch_size: 500
    pipeline:
      - $match: {operationType: {$in: [insert, update]}, "fullDocument.total": {$gt: 10}}
      - $project: {z: 1, a: 1}
`)
		if err != nil {
			t.Fatal(err)
		}
		if c.URI != "mongodb://db.example:27017/?replicaSet=rs0" || c.MaxBufferedBytes != 8<<20 || c.BatchSize != 500 {
			t.Fatalf("parsed %+v", c)
		}
		want := `[{"$match":{"operationType":{"$in":["insert","update"]},"fullDocument.total":{"$gt":10}}},{"$project":{"z":1,"a":1}}]`
		if string(c.Pipeline) != want {
			t.Fatalf("pipeline = %s, want %s", c.Pipeline, want)
		}
		_, yamlCanon, _, err := parsePipeline(string(c.Pipeline))
		if err != nil {
			t.Fatal(err)
		}
		_, jsonCanon, _, err := parsePipeline(`[ {"$match": {"operationType": {"$in": ["insert", "update"]}, "fullDocument.total": {"$gt": 10}}}, {"$project": {"z": 1, "a": 1}} ]`)
		if err != nil {
			t.Fatal(err)
		}
		if string(yamlCanon) != string(jsonCanon) {
			t.Fatalf("the same pipeline in YAML and JSON hashes differently:\n%s\n%s", yamlCanon, jsonCanon)
		}
	})
	t.Run("json string pipeline", func(t *testing.T) {
		c, err := parse(t, "    database: shop\n    collection: orders\n    pipeline: '[{\"$match\": {\"operationType\": \"insert\"}}]'\n")
		if err != nil {
			t.Fatal(err)
		}
		if stages, err := c.Pipeline.Decode(); err != nil || len(stages) != 1 {
			t.Fatalf("stages = %v, %v", stages, err)
		}
	})
	bad := map[string]struct {
		yaml  string
		words []string
	}{
		"missing names":  {"    uri: embedded\n", []string{"source.mongo.database: required", "source.mongo.collection: required"}},
		"bad modes":      {"    database: shop\n    collection: orders\n    full_document: all\n    before_change: yes_please\n    snapshot: sometimes\n", []string{"full_document", "before_change", "snapshot"}},
		"bad uri":        {"    uri: postgres://u:secret@h/db\n    database: shop\n    collection: orders\n", []string{"source.mongo.uri", "xxxxx"}},
		"bad stage":      {"    database: shop\n    collection: orders\n    pipeline: [{$group: {_id: 1}}]\n", []string{"source.mongo.pipeline[0]", "$group"}},
		"tiny buffer":    {"    database: shop\n    collection: orders\n    max_buffered_bytes: 1KiB\n", []string{"max_buffered_bytes"}},
		"system coll":    {"    database: shop\n    collection: system.views\n", []string{"source.mongo.collection"}},
		"unknown key":    {"    database: shop\n    collection: orders\n    full_documnet: delta\n", []string{"full_documnet"}},
		"not a pipeline": {"    database: shop\n    collection: orders\n    pipeline: 'match everything'\n", []string{"pipeline"}},
	}
	for name, tc := range bad {
		t.Run(name, func(t *testing.T) {
			_, err := parse(t, tc.yaml)
			if err == nil {
				t.Fatal("accepted")
			}
			for _, w := range tc.words {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not mention %q", err, w)
				}
			}
			if strings.Contains(err.Error(), "secret") {
				t.Errorf("error %q shows a password", err)
			}
		})
	}
}

// parseSection parses a pipeline file whose source is source.mongo, as
// package tide does, and returns the section's Config.
func parseSection(doc string, getenv func(string) (string, bool)) (*Config, error) {
	p, err := config.Parse([]byte(doc), getenv, config.Connectors{
		Sources: map[string]func() any{"mongo": func() any { c := DefaultConfig(); return &c }},
		Sinks:   map[string]func() any{"stdout": func() any { return &struct{}{} }},
	})
	if err != nil {
		return nil, err
	}
	return p.Source.Config.(*Config), nil
}
