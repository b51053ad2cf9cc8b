package mql

import (
	"sync"
	"testing"

	"go.mongodb.org/mongo-driver/v2/bson"
)

func collationOf(t *testing.T, d bson.D) *Collation {
	t.Helper()
	raw, err := bson.Marshal(d)
	if err != nil {
		t.Fatal(err)
	}
	c, err := ParseCollation(bson.RawValue{Type: bson.TypeEmbeddedDocument, Value: raw})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// TestCollationShared: parsing the same collation twice, however
// spelled, gives one Collation, and it is safe for concurrent use (its
// x/text collators are pooled). Run with -race.
func TestCollationShared(t *testing.T) {
	a := collationOf(t, bson.D{{Key: "locale", Value: "en"}, {Key: "strength", Value: 2}})
	b := collationOf(t, bson.D{{Key: "strength", Value: 2.0}, {Key: "locale", Value: "en"}})
	if a != b || !a.SameAs(b) {
		t.Errorf("two spellings of one collation gave %p and %p", a, b)
	}
	if a.SameAs(collationOf(t, bson.D{{Key: "locale", Value: "en"}})) || a.SameAs(nil) {
		t.Error("SameAs holds for different collations")
	}
	word := bson.RawValue{Type: bson.TypeString, Value: vString("Ping").Value}
	want := a.Transform(word)
	var wg sync.WaitGroup
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range 200 {
				if got := a.Transform(bson.RawValue{Type: bson.TypeString, Value: vString("pInG").Value}); !Equal(got, want) {
					t.Error("case-insensitive keys differ")
					return
				}
			}
		}()
	}
	wg.Wait()
}

// TestCollationOrder: keys order strings as the collation does.
func TestCollationOrder(t *testing.T) {
	key := func(c *Collation, s string) bson.RawValue { return c.Transform(vString(s)) }
	fr := collationOf(t, bson.D{{Key: "locale", Value: "fr"}})
	num := collationOf(t, bson.D{{Key: "locale", Value: "en"}, {Key: "numericOrdering", Value: true}})
	shifted := collationOf(t, bson.D{{Key: "locale", Value: "en"}, {Key: "alternate", Value: "shifted"}})
	tests := map[string]struct {
		c    *Collation
		a, b string
		want int
	}{
		"cafe before cafE":         {fr, "cafe", "cafE", -1},
		"cafE before café":         {fr, "cafE", "café", -1},
		"2 before 10, numerically": {num, "2", "10", -1},
		"shifted ignores spaces":   {shifted, "a b", "ab", 0},
	}
	for name, tt := range tests {
		if got := Compare(key(tt.c, tt.a), key(tt.c, tt.b)); got != tt.want {
			t.Errorf("%s: Compare = %d, want %d", name, got, tt.want)
		}
	}
	// A document's strings are keys too, its field names are not.
	doc := fr.Transform(vDoc(mustDoc(t, bson.D{{Key: "Name", Value: "x"}, {Key: "n", Value: 1}})))
	if lookup(doc.Value, "Name").Type != bson.TypeString || lookup(doc.Value, "n").Int32() != 1 {
		t.Errorf("transformed document %s", bson.Raw(doc.Value))
	}
}

func mustDoc(t *testing.T, d bson.D) bson.Raw {
	t.Helper()
	raw, err := bson.Marshal(d)
	if err != nil {
		t.Fatal(err)
	}
	return raw
}
