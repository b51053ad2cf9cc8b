package mql

import (
	"encoding/binary"
	"strings"
	"sync"
	"sync/atomic"

	"go.mongodb.org/mongo-driver/v2/bson"
	"golang.org/x/text/collate"
	"golang.org/x/text/language"
	"golang.org/x/text/unicode/norm"

	"github.com/tide-cdc/tide/mongowire/internal/mongoerr"
)

// icuVersion is the collation version mongod 7.0 reports (its ICU's).
const icuVersion = "57.1"

// Collation compares strings as a MongoDB collation does, through
// golang.org/x/text/collate. It works by sort keys: Transform replaces
// every string in a value with its collation key, so that the binary
// comparison of transformed values (Compare, appendKey, an index's order)
// is the collation's order. A nil *Collation is the simple (binary)
// collation. It is safe for concurrent use.
type Collation struct {
	spec      bson.D
	id        string // spec, encoded: equal ids collate alike
	tag       language.Tag
	identical bool // strength 5: equal keys are ordered by the NFD code points
	pool      sync.Pool
}

// collator is one x/text collator with its buffer: neither is safe for
// concurrent use, so the Collation pools them.
type collator struct {
	c   *collate.Collator
	buf collate.Buffer
}

// ParseCollation parses a collation document as mongod 7.0 does. The
// simple collation ({locale: "simple"}, or an empty document) gives nil.
// Options that x/text cannot honour are refused with CommandNotSupported
// (115), never approximated: caseLevel: true, caseFirst other than
// "off", maxVariable "space" with alternate "shifted", and locales x/text
// has no tailoring for.
func ParseCollation(v bson.RawValue) (*Collation, error) {
	if v.Type == bson.TypeEmbeddedDocument {
		if c, ok := parsed.Load(string(v.Value)); ok {
			return c.(*Collation), nil
		}
	}
	c, err := parseCollation(v)
	if err == nil && c != nil {
		// Queries name the same few collations again and again: keep
		// each, with its pool of collators, which are costly to build.
		if n := parsedCount.Add(1); n <= maxParsed {
			parsed.Store(string(v.Value), c)
		}
	}
	return c, err
}

// parsed caches parsed collations by their document's bytes, up to
// maxParsed of them.
var (
	parsed      sync.Map
	parsedCount atomic.Int64
)

const maxParsed = 1024

func parseCollation(v bson.RawValue) (*Collation, error) {
	if v.Type != bson.TypeEmbeddedDocument {
		return nil, mongoerr.New(mongoerr.TypeMismatch, "BSON field 'collation' is the wrong type '%s', expected type 'object'", typeName(v.Type))
	}
	doc := bson.Raw(v.Value)
	if elems, _ := doc.Elements(); len(elems) == 0 {
		return nil, nil
	}
	o := struct {
		locale, caseFirst, alternate, maxVariable, version string
		caseLevel, numeric, normalization, backwards       bool
		strength                                           int
		backwardsSet                                       bool
		n                                                  int
	}{caseFirst: "off", alternate: "non-ignorable", maxVariable: "punct", strength: 3}
	hasLocale := false
	it := iterDoc(doc)
	for {
		k, e, ok := it.next()
		if !ok {
			break
		}
		key := string(k)
		o.n++
		wantString := func(dst *string) error {
			if e.Type != bson.TypeString {
				return mongoerr.New(mongoerr.TypeMismatch, "BSON field 'collation.%s' is the wrong type '%s', expected type 'string'", key, typeName(e.Type))
			}
			*dst = str(e)
			return nil
		}
		wantBool := func(dst *bool) error {
			if e.Type != bson.TypeBoolean {
				return mongoerr.New(mongoerr.TypeMismatch, "BSON field 'collation.%s' is the wrong type '%s', expected type 'bool'", key, typeName(e.Type))
			}
			*dst = e.Boolean()
			return nil
		}
		var err error
		switch key {
		case "locale":
			hasLocale = true
			err = wantString(&o.locale)
		case "caseFirst":
			err = wantString(&o.caseFirst)
		case "alternate":
			err = wantString(&o.alternate)
		case "maxVariable":
			err = wantString(&o.maxVariable)
		case "version":
			err = wantString(&o.version)
		case "caseLevel":
			err = wantBool(&o.caseLevel)
		case "numericOrdering":
			err = wantBool(&o.numeric)
		case "normalization":
			err = wantBool(&o.normalization)
		case "backwards":
			o.backwardsSet = true
			err = wantBool(&o.backwards)
		case "strength":
			if !isNumeric(e.Type) {
				return nil, mongoerr.New(mongoerr.TypeMismatch, "BSON field 'collation.strength' is the wrong type '%s', expected types '[long, int, decimal, double]'", typeName(e.Type))
			}
			f := asFloat(e)
			if f != float64(int(f)) || f < 1 || f > 5 {
				return nil, mongoerr.New(mongoerr.FailedToParse, "Field 'strength' must be an integer 1 through 5. Got: %s", shortString(e))
			}
			o.strength = int(f)
		default:
			return nil, mongoerr.New(40415, "BSON field 'collation.%s' is an unknown field.", key)
		}
		if err != nil {
			return nil, err
		}
	}
	if !hasLocale {
		return nil, mongoerr.New(40414, "BSON field 'collation.locale' is missing but a required field")
	}
	if o.locale == "simple" {
		if o.n > 1 {
			return nil, mongoerr.New(mongoerr.FailedToParse, "If 'locale' is set to 'simple', no other fields in the collation spec may be set; got: %s", doc)
		}
		return nil, nil
	}
	switch o.caseFirst {
	case "off":
	case "upper", "lower":
		return nil, notSupported("caseFirst %q", o.caseFirst)
	default:
		return nil, mongoerr.New(mongoerr.FailedToParse, "Field 'caseFirst' must be 'upper', 'lower', or 'off'. Got: %s", o.caseFirst)
	}
	switch o.alternate {
	case "non-ignorable", "shifted":
	default:
		return nil, mongoerr.New(mongoerr.FailedToParse, "Field 'alternate' must be 'non-ignorable' or 'shifted'. Got: %s", o.alternate)
	}
	switch o.maxVariable {
	case "punct":
	case "space":
		if o.alternate == "shifted" {
			return nil, notSupported("maxVariable \"space\"")
		}
	default:
		return nil, mongoerr.New(mongoerr.FailedToParse, "Field 'maxVariable' must be 'punct' or 'space'. Got: %s", o.maxVariable)
	}
	if o.version != "" && o.version != icuVersion {
		return nil, mongoerr.New(263, "Requested collation version %s but the only available collator version was %s. Requested collation spec: %s", o.version, icuVersion, doc)
	}
	if o.caseLevel {
		return nil, notSupported("caseLevel: true")
	}
	tag, ok := localeTag(o.locale)
	if !ok {
		return nil, mongoerr.New(mongoerr.BadValue, "Field 'locale' is invalid in: %s", doc)
	}
	if !o.backwardsSet {
		o.backwards = o.locale == "fr_CA" // ICU's default for Canadian French
	}
	c := &Collation{identical: o.strength == 5}
	set := func(key, value string) {
		if t, err := tag.SetTypeForKey(key, value); err == nil {
			tag = t
		}
	}
	set("ks", [...]string{1: "level1", 2: "level2", 3: "level3", 4: "level4", 5: "identic"}[o.strength])
	if o.numeric {
		set("kn", "true")
	}
	if o.backwards {
		set("kb", "true")
	}
	if o.alternate == "shifted" {
		set("ka", "shifted")
	}
	c.tag = tag
	c.spec = bson.D{
		{Key: "locale", Value: o.locale}, {Key: "caseLevel", Value: o.caseLevel}, {Key: "caseFirst", Value: o.caseFirst},
		{Key: "strength", Value: int32(o.strength)}, {Key: "numericOrdering", Value: o.numeric},
		{Key: "alternate", Value: o.alternate}, {Key: "maxVariable", Value: o.maxVariable},
		{Key: "normalization", Value: o.normalization}, {Key: "backwards", Value: o.backwards},
		{Key: "version", Value: icuVersion},
	}
	c.pool.New = func() any { return &collator{c: collate.New(c.tag)} }
	id, _ := bson.Marshal(c.spec)
	c.id = string(id)
	if c2, ok := byID.LoadOrStore(c.id, c); ok {
		return c2.(*Collation), nil // the same collation, spelled another way
	}
	return c, nil
}

func notSupported(what string, args ...any) error {
	return mongoerr.New(mongoerr.CommandNotSupported, "collation option "+what+" is not supported by this server", args...)
}

// collationVariants maps the "@collation=" keywords of MongoDB's locales
// to their BCP 47 "co" types.
var collationVariants = map[string]string{
	"phonebook": "phonebk", "pinyin": "pinyin", "stroke": "stroke", "traditional": "trad",
	"search": "search", "standard": "standard", "unihan": "unihan", "zhuyin": "zhuyin",
	"big5han": "big5han", "gb2312han": "gb2312", "eor": "eor", "compat": "compat",
}

var supportedLocales = sync.OnceValue(func() map[string]bool {
	m := map[string]bool{}
	for _, t := range collate.Supported() {
		m[t.String()] = true
	}
	return m
})

// localeTag converts a MongoDB (ICU) locale such as "en_US" or
// "de@collation=phonebook" to a language tag that x/text has a collation
// for; a region is accepted when the language (with its script) has one.
func localeTag(locale string) (language.Tag, bool) {
	name, variant, hasVariant := strings.Cut(locale, "@collation=")
	if name == "" || strings.ContainsAny(name, "@-") {
		return language.Tag{}, false
	}
	t, err := language.Parse(strings.ReplaceAll(name, "_", "-"))
	if err != nil {
		return language.Tag{}, false
	}
	base, script, region := t.Raw()
	if variants := t.Variants(); len(variants) > 0 {
		return language.Tag{}, false
	}
	lang, err := language.Compose(base, script)
	if err != nil {
		return language.Tag{}, false
	}
	sup := supportedLocales()
	if hasVariant {
		co, ok := collationVariants[variant]
		if !ok {
			return language.Tag{}, false
		}
		v, err := lang.SetTypeForKey("co", co)
		if err != nil || !sup[v.String()] {
			return language.Tag{}, false
		}
		lang = v
	}
	if !sup[lang.String()] && !sup[strings.SplitN(lang.String(), "-u-", 2)[0]] {
		return language.Tag{}, false
	}
	if region.String() != "ZZ" {
		if withRegion, err := language.Compose(lang, region); err == nil {
			return withRegion, true
		}
	}
	return lang, true
}

// Spec is the collation as mongod reports it, with every field.
func (c *Collation) Spec() bson.D {
	if c == nil {
		return bson.D{{Key: "locale", Value: "simple"}}
	}
	return c.spec
}

// SameAs reports whether c and o collate alike (both nil: simple).
func (c *Collation) SameAs(o *Collation) bool {
	if c == nil || o == nil {
		return c == nil && o == nil
	}
	return c == o || c.id == o.id
}

// byID holds one Collation per distinct specification, so that every
// spelling of a collation shares one pool of collators.
var byID sync.Map

// Key returns the collation key of s: binary order of keys is the
// collation's order of strings.
func (c *Collation) Key(dst, s []byte) []byte {
	cl := c.pool.Get().(*collator)
	dst = append(dst, cl.c.Key(&cl.buf, s)...)
	cl.buf.Reset()
	c.pool.Put(cl)
	if c.identical {
		dst = append(dst, 0)
		dst = norm.NFD.Append(dst, s...)
	}
	return dst
}

// Transform returns v with every string and symbol in it (inside
// documents and arrays too, field names excepted) replaced by a string
// holding its collation key. Values without strings come back as they
// are. With a nil c it returns v.
func (c *Collation) Transform(v bson.RawValue) bson.RawValue {
	if c == nil {
		return v
	}
	switch v.Type {
	case bson.TypeString, bson.TypeSymbol:
		return bson.RawValue{Type: bson.TypeString, Value: c.appendStringValue(nil, stringBytes(v))}
	case bson.TypeEmbeddedDocument, bson.TypeArray:
		if !hasStrings(v.Value) {
			return v
		}
		return bson.RawValue{Type: v.Type, Value: c.transformDoc(nil, v.Value)}
	}
	return v
}

// TransformDoc is Transform for a whole document.
func (c *Collation) TransformDoc(doc bson.Raw) bson.Raw {
	if c == nil || !hasStrings(doc) {
		return doc
	}
	return c.transformDoc(nil, doc)
}

func (c *Collation) appendStringValue(dst, s []byte) []byte {
	at := len(dst)
	dst = append(dst, 0, 0, 0, 0)
	dst = c.Key(dst, s)
	dst = append(dst, 0)
	binary.LittleEndian.PutUint32(dst[at:], uint32(len(dst)-at-4))
	return dst
}

func (c *Collation) transformDoc(dst, doc []byte) []byte {
	at := len(dst)
	dst = append(dst, 0, 0, 0, 0)
	it := iterDoc(doc)
	for {
		k, e, ok := it.next()
		if !ok {
			break
		}
		t := e.Type
		if t == bson.TypeSymbol {
			t = bson.TypeString
		}
		dst = append(dst, byte(t))
		dst = append(append(dst, k...), 0)
		switch e.Type {
		case bson.TypeString, bson.TypeSymbol:
			dst = c.appendStringValue(dst, stringBytes(e))
		case bson.TypeEmbeddedDocument, bson.TypeArray:
			dst = c.transformDoc(dst, e.Value)
		default:
			dst = append(dst, e.Value...)
		}
	}
	dst = append(dst, 0)
	binary.LittleEndian.PutUint32(dst[at:], uint32(len(dst)-at))
	return dst
}

// hasStrings reports whether doc holds a string or symbol at any depth.
func hasStrings(doc []byte) bool {
	it := iterDoc(doc)
	for {
		_, e, ok := it.next()
		if !ok {
			return false
		}
		switch e.Type {
		case bson.TypeString, bson.TypeSymbol:
			return true
		case bson.TypeEmbeddedDocument, bson.TypeArray:
			if hasStrings(e.Value) {
				return true
			}
		}
	}
}

// HasStrings reports whether v is or holds a string or symbol: the
// values whose comparison a collation changes.
func HasStrings(v bson.RawValue) bool {
	switch v.Type {
	case bson.TypeString, bson.TypeSymbol:
		return true
	case bson.TypeEmbeddedDocument, bson.TypeArray:
		return hasStrings(v.Value)
	}
	return false
}
