package configdoc

import (
	"encoding"
	"fmt"
	"io"
	"reflect"
	"slices"
	"strings"
	"time"
)

// Section is one section of a pipeline file: its path ("sink.postgres",
// or "" for the file's top level) and a pointer to its Config holding
// the defaults.
type Section struct {
	Path   string
	Config any
	// Note, if set, is written under the section's title, before its type's
	// doc comment.
	Note string
	// Skip are keys of the section that are documented elsewhere (the
	// top level's source and sink).
	Skip []string
}

// Key is one key of a section, as the reference lists it.
type Key struct {
	Path    string // relative to the section: "batch.max_records"
	Type    string // "string", "duration", "list of string", …
	Default string // "" when none
	Doc     string
}

// Keys returns the keys of a section's Config, in declaration order,
// nested sections flattened with dots, following the rules of the
// pipeline file's decoder: the yaml tag's name or the lower-cased field
// name; "-" hides a field; ",inline" merges an embedded struct.
func Keys(cfg any) []Key {
	v := reflect.ValueOf(cfg)
	for v.Kind() == reflect.Pointer {
		if v.IsNil() {
			v = reflect.New(v.Type().Elem())
		}
		v = v.Elem()
	}
	var keys []Key
	walk(v, "", &keys)
	return keys
}

var (
	durationType  = reflect.TypeFor[time.Duration]()
	textUnmarshal = reflect.TypeFor[encoding.TextUnmarshaler]()
)

// leaf reports whether a value of type t is one key, whatever its shape:
// a duration, or a type that decodes itself (from text, or as yaml.v3's
// Unmarshaler).
func leaf(t reflect.Type) bool {
	if t == durationType || reflect.PointerTo(t).Implements(textUnmarshal) {
		return true
	}
	_, ok := reflect.PointerTo(t).MethodByName("UnmarshalYAML")
	return ok
}

func walk(v reflect.Value, prefix string, keys *[]Key) {
	t := v.Type()
	for i := range t.NumField() {
		sf := t.Field(i)
		if !sf.IsExported() {
			continue
		}
		name, opts, _ := strings.Cut(sf.Tag.Get("yaml"), ",")
		if name == "-" {
			continue
		}
		fv := v.Field(i)
		if slices.Contains(strings.Split(opts, ","), "inline") && sf.Type.Kind() == reflect.Struct {
			walk(fv, prefix, keys)
			continue
		}
		if name == "" {
			name = strings.ToLower(sf.Name)
		}
		doc := comments[t.PkgPath()+"."+t.Name()+"."+sf.Name]
		ft := sf.Type
		st := ft
		if st.Kind() == reflect.Pointer {
			st = st.Elem()
		}
		if st.Kind() == reflect.Struct && !leaf(st) {
			sv := fv
			if sv.Kind() == reflect.Pointer {
				if sv.IsNil() {
					sv = reflect.New(st)
				}
				sv = sv.Elem()
			}
			if doc != "" || comments[st.PkgPath()+"."+st.Name()] != "" {
				if doc == "" {
					doc = comments[st.PkgPath()+"."+st.Name()]
				}
				*keys = append(*keys, Key{Path: prefix + name, Type: "mapping", Doc: doc})
			}
			walk(sv, prefix+name+".", keys)
			continue
		}
		k := Key{Path: prefix + name, Type: typeName(ft), Default: defaultOf(fv), Doc: doc}
		if s := sf.Tag.Get("secret"); s != "" {
			k.Type += " (secret)"
		}
		*keys = append(*keys, k)
	}
}

func typeName(t reflect.Type) string {
	switch {
	case t == durationType:
		return "duration"
	case t.Kind() == reflect.Pointer:
		return typeName(t.Elem())
	case leaf(t) && t.PkgPath() != "":
		return spaced(t.Name())
	}
	switch t.Kind() {
	case reflect.String:
		return "string"
	case reflect.Bool:
		return "bool"
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return "integer"
	case reflect.Float32, reflect.Float64:
		return "number"
	case reflect.Slice, reflect.Array:
		return "list of " + typeName(t.Elem())
	case reflect.Map:
		return "mapping of " + typeName(t.Key()) + " to " + typeName(t.Elem())
	case reflect.Interface:
		return "any"
	case reflect.Struct:
		return "mapping"
	}
	return t.Kind().String()
}

// spaced turns a type name into words: ByteSize is "byte size".
func spaced(name string) string {
	var b strings.Builder
	for i, r := range name {
		if i > 0 && r >= 'A' && r <= 'Z' {
			b.WriteByte(' ')
		}
		b.WriteRune(r)
	}
	return strings.ToLower(b.String())
}

func defaultOf(v reflect.Value) string {
	if v.Kind() == reflect.Pointer {
		if v.IsNil() {
			return ""
		}
		v = v.Elem()
	}
	if v.IsZero() {
		if v.Kind() == reflect.Bool {
			return "false"
		}
		return ""
	}
	if v.Type() == durationType {
		return v.Interface().(time.Duration).String()
	}
	if m, ok := v.Interface().(encoding.TextMarshaler); ok {
		if b, err := m.MarshalText(); err == nil {
			return string(b)
		}
	}
	if s, ok := v.Interface().(fmt.Stringer); ok {
		return s.String()
	}
	switch v.Kind() {
	case reflect.Slice, reflect.Map:
		if v.Len() == 0 {
			return ""
		}
	}
	return fmt.Sprint(v.Interface())
}

// Write writes the reference of sections as Markdown: a title and the
// introduction when all is set (the whole of docs/config.md), then one
// table per section.
func Write(w io.Writer, sections []Section, all bool) error {
	var b strings.Builder
	if all {
		b.WriteString("# Configuration reference\n\n")
		b.WriteString("Every key of a pipeline file, with its type, its default and what it does, generated from the\n")
		b.WriteString("`Config` types of the registered connectors and their doc comments. Do not edit: run\n")
		b.WriteString("`go generate ./internal/configdoc` after adding or documenting a key (a test fails while this\n")
		b.WriteString("file is stale). `tide config reference SECTION` prints one section, for example\n")
		b.WriteString("`tide config reference sink.postgres`.\n\n")
		b.WriteString("Durations are written like `500ms`, `30s` or `1h`; byte sizes like `4MiB`. `${VAR}` in a value is\n")
		b.WriteString("replaced by the environment variable VAR.\n\n")
		b.WriteString("Sections:\n\n")
		for _, s := range sections {
			title := sectionTitle(s.Path)
			fmt.Fprintf(&b, "- [%s](#%s)\n", title, anchor(title))
		}
		b.WriteString("\n")
	}
	for i, s := range sections {
		if i > 0 {
			b.WriteString("\n")
		}
		fmt.Fprintf(&b, "## %s\n\n", sectionTitle(s.Path))
		if s.Note != "" {
			b.WriteString(s.Note + "\n\n")
		}
		t := reflect.TypeOf(s.Config)
		for t.Kind() == reflect.Pointer {
			t = t.Elem()
		}
		if doc := comments[t.PkgPath()+"."+t.Name()]; doc != "" {
			b.WriteString(doc + "\n\n")
		}
		b.WriteString("| key | type | default | description |\n|---|---|---|---|\n")
		for _, k := range Keys(s.Config) {
			if slices.ContainsFunc(s.Skip, func(p string) bool { return k.Path == p || strings.HasPrefix(k.Path, p+".") }) {
				continue
			}
			path := k.Path
			if s.Path != "" {
				path = s.Path + "." + path
			}
			def := ""
			if k.Default != "" {
				def = "`" + cell(k.Default) + "`"
			}
			fmt.Fprintf(&b, "| `%s` | %s | %s | %s |\n", path, k.Type, def, cell(k.Doc))
		}
	}
	_, err := io.WriteString(w, b.String())
	return err
}

func sectionTitle(path string) string {
	if path == "" {
		return "The pipeline file"
	}
	return path
}

// anchor is GitHub's anchor of a heading.
func anchor(title string) string {
	var b strings.Builder
	for _, r := range strings.ToLower(title) {
		switch {
		case r >= 'a' && r <= 'z', r >= '0' && r <= '9', r == '-', r == '_':
			b.WriteRune(r)
		case r == ' ':
			b.WriteByte('-')
		}
	}
	return b.String()
}

// cell makes text safe in a table cell.
func cell(s string) string {
	return strings.NewReplacer("|", `\|`, "\n", " ").Replace(s)
}
