package fts

import (
	"sort"
	"strings"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/tide-cdc/tide/mongowire/internal/mongoerr"
)

// Spec is a text index: the weight of each indexed field ("$**" for
// every string field), its default language and the field naming a
// document's own language.
type Spec struct {
	Weights          map[string]float64
	DefaultLanguage  *Language
	LanguageOverride string
	wildcard         float64 // weight of "$**", 0 when the index is not a wildcard one
}

// IsTextKey reports whether an index key pattern holds a text field, in
// the form a user gives ({a: "text"}) or the form mongod lists
// ({_fts: "text", _ftsx: 1}).
func IsTextKey(key bson.D) bool {
	for _, e := range key {
		if s, ok := KeyString(e.Value); ok && s == "text" {
			return true
		}
	}
	return false
}

// KeyString reads an index key pattern's value that is a string ("text",
// "hashed"), as a Go string or a BSON value; the store uses it too.
func KeyString(v any) (string, bool) {
	switch x := v.(type) {
	case string:
		return x, true
	case bson.RawValue:
		return x.StringValueOK()
	}
	return "", false
}

func number(v any) (float64, bool) {
	switch x := v.(type) {
	case int32:
		return float64(x), true
	case int64:
		return float64(x), true
	case float64:
		return x, true
	case int:
		return float64(x), true
	case bson.RawValue:
		return x.AsFloat64OK()
	}
	return 0, false
}

func lookup(d bson.D, key string) (any, bool) {
	for _, e := range d {
		if e.Key == key {
			return e.Value, true
		}
	}
	return nil, false
}

// docD reads a document option given as bson.D, bson.Raw or a raw value.
func docD(v any) (bson.D, bool) {
	switch x := v.(type) {
	case bson.D:
		return x, true
	case bson.Raw:
		var d bson.D
		return d, bson.Unmarshal(x, &d) == nil
	case bson.RawValue:
		raw, ok := x.DocumentOK()
		if !ok {
			return nil, false
		}
		var d bson.D
		return d, bson.Unmarshal(raw, &d) == nil
	}
	return nil, false
}

// Normalise turns a text index's key and options into mongod's stored
// form: key {<prefix fields>, _fts: "text", _ftsx: 1, <suffix fields>},
// and options weights (sorted by field), default_language,
// language_override and textIndexVersion 3. It accepts both the user's
// form and the stored one (as mongorestore sends it).
func Normalise(key, options bson.D) (bson.D, bson.D, error) {
	weights := map[string]float64{}
	if w, ok := lookup(options, "weights"); ok {
		d, ok := docD(w)
		if !ok {
			return nil, nil, mongoerr.New(mongoerr.TypeMismatch, "text index option 'weights' must be an object")
		}
		for _, e := range d {
			n, ok := number(e.Value)
			if !ok || n <= 0 || n >= 100000 {
				return nil, nil, mongoerr.New(mongoerr.CannotCreateIndex, "text index weight must be in the exclusive interval (0,99999) but found: %v", e.Value)
			}
			weights[e.Key] = n
		}
	}
	var out bson.D
	text := false
	for _, e := range key {
		s, isString := KeyString(e.Value)
		switch {
		case e.Key == "_fts" || e.Key == "_ftsx":
			if !text {
				out = append(out, bson.E{Key: "_fts", Value: "text"}, bson.E{Key: "_ftsx", Value: int32(1)})
				text = true
			}
		case isString && s == "text":
			if _, ok := weights[e.Key]; !ok {
				weights[e.Key] = 1
			}
			if !text {
				out = append(out, bson.E{Key: "_fts", Value: "text"}, bson.E{Key: "_ftsx", Value: int32(1)})
				text = true
			}
		case isString:
			return nil, nil, mongoerr.New(mongoerr.CannotCreateIndex, "Unknown index plugin '%s'", s)
		default:
			out = append(out, e)
		}
	}
	if len(weights) == 0 {
		return nil, nil, mongoerr.New(mongoerr.CannotCreateIndex, "text index has no fields")
	}
	lang := "english"
	if v, ok := lookup(options, "default_language"); ok {
		s, ok := KeyString(v)
		if !ok {
			return nil, nil, mongoerr.New(mongoerr.TypeMismatch, "default_language needs a string type")
		}
		if _, err := LookupLanguage(s); err != nil {
			return nil, nil, err
		}
		lang = s
	}
	override := "language"
	if v, ok := lookup(options, "language_override"); ok {
		s, ok := KeyString(v)
		if !ok || s == "" {
			return nil, nil, mongoerr.New(mongoerr.TypeMismatch, "language_override needs a non-empty string")
		}
		override = s
	}
	if v, ok := lookup(options, "textIndexVersion"); ok {
		if n, _ := number(v); n != 3 {
			return nil, nil, mongoerr.New(mongoerr.CannotCreateIndex, "Currently only textIndexVersion 3 is supported, not %v", v)
		}
	}
	fields := make([]string, 0, len(weights))
	for f := range weights {
		fields = append(fields, f)
	}
	sort.Strings(fields)
	w := make(bson.D, len(fields))
	for i, f := range fields {
		w[i] = bson.E{Key: f, Value: int32(weights[f])}
		if weights[f] != float64(int32(weights[f])) {
			w[i].Value = weights[f]
		}
	}
	opts := bson.D{}
	for _, o := range options {
		switch o.Key {
		case "weights", "default_language", "language_override", "textIndexVersion":
		default:
			opts = append(opts, o)
		}
	}
	opts = append(opts,
		bson.E{Key: "weights", Value: w},
		bson.E{Key: "default_language", Value: lang},
		bson.E{Key: "language_override", Value: override},
		bson.E{Key: "textIndexVersion", Value: int32(3)},
	)
	return out, opts, nil
}

// SpecOf reads a normalised text index's options.
func SpecOf(options bson.D) (*Spec, error) {
	s := &Spec{Weights: map[string]float64{}, LanguageOverride: "language"}
	if w, ok := lookup(options, "weights"); ok {
		d, _ := docD(w)
		for _, e := range d {
			n, _ := number(e.Value)
			if e.Key == "$**" {
				s.wildcard = n
				continue
			}
			s.Weights[e.Key] = n
		}
	}
	lang := "english"
	if v, ok := lookup(options, "default_language"); ok {
		lang, _ = KeyString(v)
	}
	l, err := LookupLanguage(lang)
	if err != nil {
		return nil, err
	}
	s.DefaultLanguage = l
	if v, ok := lookup(options, "language_override"); ok {
		s.LanguageOverride, _ = KeyString(v)
	}
	return s, nil
}

// docLanguage is the language of a document: its language_override
// field, else the index's default.
func (s *Spec) docLanguage(doc bson.Raw) (*Language, error) {
	v, err := doc.LookupErr(s.LanguageOverride)
	if err != nil {
		return s.DefaultLanguage, nil
	}
	name, ok := v.StringValueOK()
	if !ok {
		return nil, mongoerr.New(17261, "found language override field in document with non-string type")
	}
	l, err := LookupLanguage(name)
	if err != nil {
		if e, ok := mongoerr.As(err); ok && e.Code == mongoerr.BadValue {
			return nil, mongoerr.New(17262, "language override unsupported: %s", name)
		}
		return nil, err
	}
	return l, nil
}

// CheckDocument reports the error mongod gives when indexing doc: a
// language override it cannot use.
func (s *Spec) CheckDocument(doc bson.Raw) error {
	_, err := s.docLanguage(doc)
	return err
}

// strings calls fn with each indexed string of doc and its weight.
func (s *Spec) strings(doc bson.Raw, fn func(str string, weight float64)) {
	var walk func(prefix string, d bson.Raw)
	var value func(path string, v bson.RawValue)
	weightOf := func(path string) float64 {
		if w, ok := s.Weights[path]; ok {
			return w
		}
		return s.wildcard
	}
	value = func(path string, v bson.RawValue) {
		switch v.Type {
		case bson.TypeString:
			if w := weightOf(path); w > 0 {
				fn(v.StringValue(), w)
			}
		case bson.TypeEmbeddedDocument:
			walk(path+".", v.Document())
		case bson.TypeArray:
			vals, _ := v.Array().Values()
			for _, e := range vals {
				value(path, e)
			}
		}
	}
	walk = func(prefix string, d bson.Raw) {
		elems, _ := d.Elements()
		for _, e := range elems {
			path := prefix + e.Key()
			if s.wildcard == 0 && !s.under(path) {
				continue
			}
			value(path, e.Value())
		}
	}
	walk("", doc)
}

// under reports whether path is an indexed field or leads to one.
func (s *Spec) under(path string) bool {
	for f := range s.Weights {
		if f == path || strings.HasPrefix(f, path+".") {
			return true
		}
	}
	return false
}
