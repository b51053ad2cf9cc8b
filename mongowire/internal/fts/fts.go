// Package fts is the text search of the embedded server: the text index
// specification, the tokenizer, stop words and Snowball stemmers
// (github.com/kljensen/snowball), the $text query language (terms,
// "phrases", -negations) and MongoDB's score formula.
//
// MongoDB's score of a document for a query is the sum, over the query's
// distinct positive terms, of the document's score for that term. A
// document's score for a term sums, over every indexed string holding it
// (each string of an array counts on its own), weight * freq * coeff *
// adjustment, where freq = 1 + 1/2 + 1/4 + ... over the term's
// occurrences in that string, coeff = 0.5 * occurrences / tokens + 0.5
// (tokens: the string's words that are not stop words), and adjustment is
// 1.1 when the whole string is the term, else 1.
//
// Stop words are the Snowball project's lists, which differ a little from
// mongod's own; the languages are those both MongoDB and the stemmer
// library have (danish, dutch, finnish, german, italian, portuguese,
// romanian and turkish are refused with CommandNotSupported).
package fts

import (
	"strings"
	"sync"
	"sync/atomic"
	"unicode"

	"github.com/kljensen/snowball/english"
	"github.com/kljensen/snowball/french"
	"github.com/kljensen/snowball/hungarian"
	"github.com/kljensen/snowball/norwegian"
	"github.com/kljensen/snowball/russian"
	"github.com/kljensen/snowball/spanish"
	"github.com/kljensen/snowball/swedish"
	"golang.org/x/text/unicode/norm"

	"github.com/tide-cdc/tide/mongowire/internal/mongoerr"
)

// Language stems words and recognises stop words of one language.
type Language struct {
	Name string
	stem func(word string, stemStopWords bool) string
	stop func(word string) bool
	// terms caches the folded term of each word seen (case- and
	// diacritic-insensitive, the index's form), up to maxCachedTerms:
	// stemming is most of the cost of a text query.
	terms sync.Map // word -> cachedTerm
	count atomic.Int64
}

type cachedTerm struct {
	term string
	ok   bool
}

const maxCachedTerms = 200_000

var languages = map[string]*Language{
	"english":   {Name: "english", stem: english.Stem, stop: english.IsStopWord},
	"french":    {Name: "french", stem: french.Stem, stop: french.IsStopWord},
	"hungarian": {Name: "hungarian", stem: hungarian.Stem, stop: hungarian.IsStopWord},
	"norwegian": {Name: "norwegian", stem: norwegian.Stem, stop: norwegian.IsStopWord},
	"russian":   {Name: "russian", stem: russian.Stem, stop: russian.IsStopWord},
	"spanish":   {Name: "spanish", stem: spanish.Stem, stop: spanish.IsStopWord},
	"swedish":   {Name: "swedish", stem: swedish.Stem, stop: swedish.IsStopWord},
	"none":      {Name: "none"},
}

// aliases are the ISO 639-1 codes MongoDB accepts for its languages.
var aliases = map[string]string{
	"en": "english", "fr": "french", "hu": "hungarian", "nb": "norwegian", "ru": "russian",
	"es": "spanish", "sv": "swedish", "da": "danish", "nl": "dutch", "fi": "finnish",
	"de": "german", "it": "italian", "pt": "portuguese", "ro": "romanian", "tr": "turkish",
}

// unimplemented are MongoDB's languages the stemmer library lacks.
var unimplemented = map[string]bool{
	"danish": true, "dutch": true, "finnish": true, "german": true, "italian": true,
	"portuguese": true, "romanian": true, "turkish": true,
}

// LookupLanguage returns a language by MongoDB name or code: BadValue
// for one MongoDB does not know, CommandNotSupported for one it knows and
// this server cannot stem.
func LookupLanguage(name string) (*Language, error) {
	n := strings.ToLower(name)
	if a, ok := aliases[n]; ok {
		n = a
	}
	if l, ok := languages[n]; ok {
		return l, nil
	}
	if unimplemented[n] {
		return nil, mongoerr.New(mongoerr.CommandNotSupported, "text search in %s is not supported by this server", n)
	}
	return nil, mongoerr.New(mongoerr.BadValue, "unsupported language: %q for text index version 3", name)
}

// isDelimiter reports whether r separates words: everything but letters,
// digits and combining marks.
func isDelimiter(r rune) bool {
	if r < 0x80 {
		return !('a' <= r && r <= 'z' || 'A' <= r && r <= 'Z' || '0' <= r && r <= '9')
	}
	return !unicode.IsLetter(r) && !unicode.IsDigit(r) && !unicode.Is(unicode.Mn, r)
}

// fold is the form a word is compared in: without diacritics unless
// diacriticSensitive, lower-cased unless caseSensitive.
func fold(word string, caseSensitive, diacriticSensitive bool) string {
	if !diacriticSensitive && !isASCII(word) {
		var b strings.Builder
		for _, r := range norm.NFD.String(word) {
			if !unicode.Is(unicode.Mn, r) {
				b.WriteRune(r)
			}
		}
		word = b.String()
	}
	if !caseSensitive {
		word = strings.ToLower(word)
	}
	return word
}

// words splits s into its words.
func words(s string) []string {
	return strings.FieldsFunc(s, isDelimiter)
}

// term returns the index term of a word in lang, and false for a stop
// word. A case-sensitive term keeps the case of the word where the stem
// keeps its letters.
func (l *Language) term(word string, caseSensitive, diacriticSensitive bool) (string, bool) {
	if !caseSensitive && !diacriticSensitive {
		if c, ok := l.terms.Load(word); ok {
			ct := c.(cachedTerm)
			return ct.term, ct.ok
		}
		t, ok := l.computeTerm(word, false, false)
		if l.count.Add(1) <= maxCachedTerms {
			l.terms.Store(word, cachedTerm{t, ok})
		}
		return t, ok
	}
	return l.computeTerm(word, caseSensitive, diacriticSensitive)
}

func (l *Language) computeTerm(word string, caseSensitive, diacriticSensitive bool) (string, bool) {
	f := fold(word, caseSensitive, diacriticSensitive)
	lower := strings.ToLower(f)
	if l.stop != nil && l.stop(lower) {
		return "", false
	}
	stem := lower
	if l.stem != nil {
		stem = l.stem(lower, true)
	}
	if !caseSensitive {
		return stem, true
	}
	// Put the word's own case back on the letters the stem kept.
	out := []rune(stem)
	orig := []rune(f)
	for i := range out {
		if i < len(orig) && unicode.ToLower(orig[i]) == out[i] {
			out[i] = orig[i]
		}
	}
	return string(out), true
}

// scoreString adds the scores of one indexed string to scores, as
// mongod's FTSSpec::_scoreStringV2 does.
func (l *Language) scoreString(s string, weight float64, scores map[string]float64) {
	type stat struct {
		count int
		freq  float64
		exp   float64
	}
	terms := map[string]*stat{}
	var order []string
	tokens := 0
	for _, w := range words(s) {
		t, ok := l.term(w, false, false)
		if !ok {
			continue
		}
		st := terms[t]
		if st == nil {
			st = &stat{}
			terms[t] = st
			order = append(order, t)
		}
		if st.exp == 0 {
			st.exp = 1
		} else {
			st.exp *= 2
		}
		st.count++
		st.freq += 1 / st.exp
		tokens++
	}
	for _, t := range order {
		st := terms[t]
		coeff := 0.5*float64(st.count)/float64(tokens) + 0.5
		adjustment := 1.0
		if strings.EqualFold(s, t) {
			adjustment += 0.1
		}
		scores[t] += weight * st.freq * coeff * adjustment
	}
}

// hasWord reports whether s holds a word whose term in lang is in want,
// under the given sensitivity.
func (l *Language) hasWord(s string, want map[string]bool, caseSensitive, diacriticSensitive bool) bool {
	has := func(w string) bool {
		t, ok := l.term(w, caseSensitive, diacriticSensitive)
		return ok && want[t]
	}
	start := -1
	for i, r := range s {
		switch {
		case !isDelimiter(r):
			if start < 0 {
				start = i
			}
		case start >= 0:
			if has(s[start:i]) {
				return true
			}
			start = -1
		}
	}
	return start >= 0 && has(s[start:])
}

func isASCII(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] >= 0x80 {
			return false
		}
	}
	return true
}
