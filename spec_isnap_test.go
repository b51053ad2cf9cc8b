package tide

import (
	"strings"
	"testing"

	mongosource "github.com/tide-cdc/tide/source/mongo"
)

// TestSpecMongoSignalCollection: source.mongo.signal_collection is off by
// default, names a collection of the database or "db.coll", and is
// refused where it cannot be watched.
func TestSpecMongoSignalCollection(t *testing.T) {
	t.Parallel()
	s, err := parseSpec("name: p\nsource:\n  mongo: {database: shop, collections: ['*'], signal_collection: signals}\nsink: {stdout: {}}\n", nil)
	if err != nil {
		t.Fatal(err)
	}
	if c := sectionConfig[*mongosource.Config](t, s.Source, "mongo"); c.SignalCollection != "signals" {
		t.Errorf("signal_collection = %q", c.SignalCollection)
	}
	s, err = parseSpec("name: p\nsource:\n  mongo: {database: shop, collection: orders}\nsink: {stdout: {}}\n", nil)
	if err != nil {
		t.Fatal(err)
	}
	if c := sectionConfig[*mongosource.Config](t, s.Source, "mongo"); c.SignalCollection != "" {
		t.Errorf("signal_collection defaults to %q, want off", c.SignalCollection)
	}
	bad := map[string]string{
		"itself": "{database: shop, collection: orders, signal_collection: orders}",
		"system": "{database: shop, collection: orders, signal_collection: shop.system.views}",
		"no db":  "{collections: ['shop.*'], signal_collection: signals}",
		"admin":  "{database: shop, collection: orders, signal_collection: admin.signals}",
		"dollar": "{database: shop, collection: orders, signal_collection: 'sig$'}",
	}
	for name, m := range bad {
		_, err := parseSpec("name: p\nsource:\n  mongo: "+m+"\nsink: {stdout: {}}\n", nil)
		if err == nil || !strings.Contains(err.Error(), "source.mongo.signal_collection") {
			t.Errorf("%s: %v, want an error about source.mongo.signal_collection", name, err)
		}
	}
}
