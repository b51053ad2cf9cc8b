package fts

import (
	"strings"
	"unicode"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/tide-cdc/tide/mongowire/internal/mongoerr"
)

// Query is a parsed $text: {$search, $language, $caseSensitive,
// $diacriticSensitive}.
type Query struct {
	lang                              *Language
	caseSensitive, diacriticSensitive bool
	positive, negative                map[string]bool // folded, stemmed terms
	sensitive, negSensitive           map[string]bool // terms as the query's sensitivity folds them
	phrases, negPhrases               []string
}

// ParseQuery parses the argument of $text against a text index.
func ParseQuery(v bson.RawValue, spec *Spec) (*Query, error) {
	d, ok := v.DocumentOK()
	if !ok {
		return nil, mongoerr.New(mongoerr.BadValue, "$text expects an object")
	}
	q := &Query{lang: spec.DefaultLanguage, positive: map[string]bool{}, negative: map[string]bool{}, sensitive: map[string]bool{}, negSensitive: map[string]bool{}}
	search, hasSearch := "", false
	elems, _ := d.Elements()
	for _, e := range elems {
		ev := e.Value()
		switch e.Key() {
		case "$search":
			s, ok := ev.StringValueOK()
			if !ok {
				return nil, mongoerr.New(mongoerr.TypeMismatch, "$search requires a string value")
			}
			search, hasSearch = s, true
		case "$language":
			s, ok := ev.StringValueOK()
			if !ok {
				return nil, mongoerr.New(mongoerr.TypeMismatch, "$language requires a string value")
			}
			l, err := LookupLanguage(s)
			if err != nil {
				return nil, err
			}
			q.lang = l
		case "$caseSensitive":
			b, ok := ev.BooleanOK()
			if !ok {
				return nil, mongoerr.New(mongoerr.TypeMismatch, "$caseSensitive requires a boolean value")
			}
			q.caseSensitive = b
		case "$diacriticSensitive":
			b, ok := ev.BooleanOK()
			if !ok {
				return nil, mongoerr.New(mongoerr.TypeMismatch, "$diacriticSensitive requires a boolean value")
			}
			q.diacriticSensitive = b
		default:
			return nil, mongoerr.New(mongoerr.BadValue, "extra fields in $text")
		}
	}
	if !hasSearch {
		return nil, mongoerr.New(mongoerr.BadValue, "$search required")
	}
	q.parse(search)
	return q, nil
}

// parse reads terms, "phrases" and negations (-term, -"phrase"): a '-'
// negates when it starts the search or follows whitespace; the words of a
// positive phrase are positive terms too.
func (q *Query) parse(s string) {
	rs := []rune(s)
	addTerms := func(text string, negated bool) {
		for _, w := range words(text) {
			t, ok := q.lang.term(w, false, false)
			if !ok {
				continue
			}
			if negated {
				q.negative[t] = true
				if st, ok := q.lang.term(w, q.caseSensitive, q.diacriticSensitive); ok {
					q.negSensitive[st] = true
				}
				continue
			}
			q.positive[t] = true
			if st, ok := q.lang.term(w, q.caseSensitive, q.diacriticSensitive); ok {
				q.sensitive[st] = true
			}
		}
	}
	negate := false
	for i := 0; i < len(rs); {
		r := rs[i]
		switch {
		case r == '"':
			end := i + 1
			for end < len(rs) && rs[end] != '"' {
				end++
			}
			phrase := string(rs[i+1 : min(end, len(rs))])
			if negate {
				q.negPhrases = append(q.negPhrases, phrase)
			} else {
				q.phrases = append(q.phrases, phrase)
				addTerms(phrase, false)
			}
			negate = false
			i = end + 1
		case r == '-' && (i == 0 || unicode.IsSpace(rs[i-1])):
			negate = true
			i++
		case isDelimiter(r):
			negate = false
			i++
		default:
			end := i
			for end < len(rs) && !isDelimiter(rs[end]) {
				end++
			}
			addTerms(string(rs[i:end]), negate)
			negate = false
			i = end
		}
	}
}

// Match reports whether doc matches the query under spec, and its score:
// a positive term in an indexed string, no negated term or phrase, and
// every positive phrase present.
func (q *Query) Match(spec *Spec, doc bson.Raw) (float64, bool) {
	if len(q.positive) == 0 {
		return 0, false
	}
	lang, err := spec.docLanguage(doc)
	if err != nil {
		return 0, false
	}
	// Most documents hold none of the terms: find that out before
	// scoring anything.
	candidate := false
	spec.strings(doc, func(s string, _ float64) {
		if !candidate && lang.hasWord(s, q.positive, false, false) {
			candidate = true
		}
	})
	if !candidate {
		return 0, false
	}
	scores := map[string]float64{}
	var texts []string
	spec.strings(doc, func(s string, w float64) {
		lang.scoreString(s, w, scores)
		texts = append(texts, s)
	})
	score := 0.0
	found := false
	for t := range q.positive {
		if sc, ok := scores[t]; ok {
			score += sc
			found = true
		}
	}
	if !found {
		return 0, false
	}
	for _, s := range texts {
		if len(q.negative) > 0 && lang.hasWord(s, q.negSensitive, q.caseSensitive, q.diacriticSensitive) {
			return 0, false
		}
	}
	for _, p := range q.negPhrases {
		if q.phraseIn(p, texts) {
			return 0, false
		}
	}
	for _, p := range q.phrases {
		if !q.phraseIn(p, texts) {
			return 0, false
		}
	}
	if q.caseSensitive || q.diacriticSensitive {
		ok := false
		for _, s := range texts {
			if lang.hasWord(s, q.sensitive, q.caseSensitive, q.diacriticSensitive) {
				ok = true
				break
			}
		}
		if !ok {
			return 0, false
		}
	}
	return score, true
}

// phraseIn reports whether one of texts holds phrase, compared as the
// query's sensitivity folds them.
func (q *Query) phraseIn(phrase string, texts []string) bool {
	p := fold(phrase, q.caseSensitive, q.diacriticSensitive)
	for _, s := range texts {
		if strings.Contains(fold(s, q.caseSensitive, q.diacriticSensitive), p) {
			return true
		}
	}
	return false
}
