package fts

import (
	"math"
	"slices"
	"sync"
	"testing"

	"go.mongodb.org/mongo-driver/v2/bson"
)

// TestScoreFormula: MongoDB's formula on strings whose scores can be
// worked out by hand.
func TestScoreFormula(t *testing.T) {
	en, _ := LookupLanguage("english")
	tests := map[string]struct {
		text   string
		weight float64
		term   string
		want   float64
	}{
		"one of two words":       {"Baking a cake", 1, "cake", 0.75},                       // coeff 0.5*1/2+0.5
		"the whole string":       {"cake", 1, "cake", 1.1},                                 // 1 * 1 * 1.1
		"repeated":               {"coffee coffee tea", 1, "coffe", 1.5 * (0.5*2/3 + 0.5)}, // freq 1 + 1/2
		"three times, weight 10": {"tea tea tea", 10, "tea", 10 * 1.75 * 1 * 1},            // freq 1 + 1/2 + 1/4
	}
	for name, tt := range tests {
		t.Run(name, func(t *testing.T) {
			scores := map[string]float64{}
			en.scoreString(tt.text, tt.weight, scores)
			if got := scores[tt.term]; math.Abs(got-tt.want) > 1e-9 {
				t.Errorf("score of %q in %q = %v, want %v (all: %v)", tt.term, tt.text, got, tt.want, scores)
			}
		})
	}
}

// TestParseQuery: terms, phrases and negations as mongod reads them.
func TestParseQuery(t *testing.T) {
	spec, err := SpecOf(bson.D{{Key: "weights", Value: bson.D{{Key: "a", Value: 1}}}})
	if err != nil {
		t.Fatal(err)
	}
	q, err := ParseQuery(bson.RawValue{Type: bson.TypeEmbeddedDocument, Value: mustRaw(t, bson.D{{Key: "$search", Value: `coffee -shop "green tea" -"iced tea" co-op the`}})}, spec)
	if err != nil {
		t.Fatal(err)
	}
	keys := func(m map[string]bool) []string {
		var out []string
		for k := range m {
			out = append(out, k)
		}
		slices.Sort(out)
		return out
	}
	if got := keys(q.positive); !slices.Equal(got, []string{"co", "coffe", "green", "op", "tea"}) {
		t.Errorf("positive terms %v", got)
	}
	if got := keys(q.negative); !slices.Equal(got, []string{"shop"}) {
		t.Errorf("negative terms %v", got)
	}
	if !slices.Equal(q.phrases, []string{"green tea"}) || !slices.Equal(q.negPhrases, []string{"iced tea"}) {
		t.Errorf("phrases %q, negated %q", q.phrases, q.negPhrases)
	}
}

func mustRaw(t *testing.T, d bson.D) bson.Raw {
	t.Helper()
	b, err := bson.Marshal(d)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestTermCacheConcurrent: the stem cache is shared by every query and
// index of a language. Run with -race.
func TestTermCacheConcurrent(t *testing.T) {
	en, _ := LookupLanguage("english")
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 300 {
				w := []string{"running", "Coffee", "bakeries", "the"}[(g+i)%4]
				got, ok := en.term(w, false, false)
				want, wantOK := en.computeTerm(w, false, false)
				if got != want || ok != wantOK {
					t.Errorf("term(%q) = %q, %v; want %q, %v", w, got, ok, want, wantOK)
					return
				}
			}
		}()
	}
	wg.Wait()
}
