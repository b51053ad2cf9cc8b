package config

import (
	"encoding"
	"errors"
	"fmt"
	"reflect"
	"regexp"
	"slices"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"
)

// decoder maps a YAML node tree onto Go values by reflection, as yaml.v3
// does, but strictly, interpolating every scalar, and naming the YAML path
// and line of each problem. It keeps going after an error, so one run
// reports every problem in the file.
type decoder struct {
	getenv func(string) (string, bool)
	errs   []error
	lines  map[string]int    // YAML path -> line, for Validate's messages
	raw    map[string]string // YAML path -> a scalar's text before ${VAR} expansion, where it had any
	conns  Connectors
	// late are problems that do not stop the decoding, reported with
	// Validate's.
	late []error
}

var (
	yamlUnmarshaler = reflect.TypeFor[yaml.Unmarshaler]()
	textUnmarshaler = reflect.TypeFor[encoding.TextUnmarshaler]()
	durationType    = reflect.TypeFor[time.Duration]()
	sectionType     = reflect.TypeFor[Section]()
)

func (d *decoder) fail(n *yaml.Node, path, format string, args ...any) {
	d.errs = append(d.errs, fmt.Errorf("line %d: %s: %s", n.Line, displayPath(path), fmt.Sprintf(format, args...)))
}

func displayPath(path string) string {
	if path == "" {
		return "(top level)"
	}
	return path
}

// defaulter is a section of this package with defaults (nats_kv).
type defaulter interface{ setDefaults() }

// setDefaults calls setDefaults on p, a pointer, if it has the method.
func setDefaults(p reflect.Value) {
	if d, ok := p.Interface().(defaulter); ok {
		d.setDefaults()
	}
}

// value decodes n into v, which is settable.
func (d *decoder) value(n *yaml.Node, v reflect.Value, path string) {
	if n.Kind == yaml.AliasNode {
		n = n.Alias
	}
	if _, ok := d.lines[path]; !ok {
		d.lines[path] = n.Line
	}
	t := v.Type()
	switch {
	case t == sectionType:
		d.section(n, v.Addr().Interface().(*Section), path)
	case t == durationType:
		d.duration(n, v, path)
	case t.Kind() == reflect.Pointer:
		if isNull(n) && t.Elem().Kind() != reflect.Struct {
			v.SetZero()
			return
		}
		// A struct pointer is set even by an empty value: "stdout:" or
		// "stdout: {}" selects the stdout sink.
		p := reflect.New(t.Elem())
		setDefaults(p)
		d.value(n, p.Elem(), path)
		v.Set(p)
	case reflect.PointerTo(t).Implements(textUnmarshaler) && !reflect.PointerTo(t).Implements(yamlUnmarshaler):
		if n.Kind != yaml.ScalarNode {
			d.fail(n, path, "expected %s, got %s", describe(t), kindName(n))
			return
		}
		if !d.interpolateTree(n, path) || isNull(n) {
			return // keep the default
		}
		if err := v.Addr().Interface().(encoding.TextUnmarshaler).UnmarshalText([]byte(n.Value)); err != nil {
			d.fail(n, path, "%v", err)
		}
	case reflect.PointerTo(t).Implements(yamlUnmarshaler):
		if !d.interpolateTree(n, path) {
			return
		}
		if isNull(n) {
			return // keep the default
		}
		if err := n.Decode(v.Addr().Interface()); err != nil {
			d.fail(n, path, "%s", cleanYAMLError(err))
		}
	case t.Kind() == reflect.Struct:
		d.structValue(n, v, path)
	case t.Kind() == reflect.Slice:
		if isNull(n) {
			v.SetZero()
			return
		}
		if n.Kind != yaml.SequenceNode {
			d.fail(n, path, "expected a list, got %s", kindName(n))
			return
		}
		s := reflect.MakeSlice(t, len(n.Content), len(n.Content))
		for i, item := range n.Content {
			d.value(item, s.Index(i), fmt.Sprintf("%s[%d]", path, i))
		}
		v.Set(s)
	case t.Kind() == reflect.Map && t.Key().Kind() == reflect.String:
		if isNull(n) {
			v.SetZero()
			return
		}
		if n.Kind != yaml.MappingNode {
			d.fail(n, path, "expected a mapping, got %s", kindName(n))
			return
		}
		m := reflect.MakeMapWithSize(t, len(n.Content)/2)
		seen := map[string]int{}
		for i := 0; i+1 < len(n.Content); i += 2 {
			k, val := n.Content[i], n.Content[i+1]
			kpath := joinPath(path, k.Value)
			if line, dup := seen[k.Value]; dup {
				d.fail(k, kpath, "duplicate key (first at line %d)", line)
				continue
			}
			seen[k.Value] = k.Line
			e := reflect.New(t.Elem()).Elem()
			d.value(val, e, kpath)
			m.SetMapIndex(reflect.ValueOf(k.Value).Convert(t.Key()), e)
		}
		v.Set(m)
	default:
		d.scalar(n, v, path)
	}
}

// duration decodes a time.Duration written as Go writes durations: 1s,
// 500ms, 1m30s. A number without a unit is an error, except 0.
func (d *decoder) duration(n *yaml.Node, v reflect.Value, path string) {
	if n.Kind != yaml.ScalarNode {
		d.fail(n, path, "expected a duration such as 1s or 500ms, got %s", kindName(n))
		return
	}
	if !d.interpolateTree(n, path) || isNull(n) {
		return
	}
	dur, err := time.ParseDuration(strings.TrimSpace(n.Value))
	if err != nil {
		d.fail(n, path, "%q is not a duration: use a number with a unit, such as 500ms, 1s or 2m", n.Value)
		return
	}
	v.SetInt(int64(dur))
}

// section decodes source: or sink:, a mapping of one connector's key to
// its settings, into the Config the connector's registration makes.
func (d *decoder) section(n *yaml.Node, sec *Section, path string) {
	if isNull(n) {
		return // Validate says it is required
	}
	if n.Kind != yaml.MappingNode {
		d.fail(n, path, "expected a mapping of one %s to its settings, got %s", path, kindName(n))
		return
	}
	factories := d.conns.Sources
	if path == "sink" {
		factories = d.conns.Sinks
	}
	known := map[string]reflect.Value{}
	for k := range factories {
		known[k] = reflect.Value{}
	}
	var set []string
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, val := n.Content[i], n.Content[i+1]
		kpath := joinPath(path, k.Value)
		newConfig, ok := factories[k.Value]
		if !ok {
			d.fail(k, kpath, "unknown key%s", suggest(k.Value, known))
			continue
		}
		if slices.Contains(set, k.Value) {
			d.fail(k, kpath, "duplicate key (first at line %d)", d.lines[kpath])
			continue
		}
		set = append(set, k.Value)
		d.lines[kpath] = k.Line
		cfg := newConfig()
		rv := reflect.ValueOf(cfg)
		if rv.Kind() != reflect.Pointer || rv.Elem().Kind() != reflect.Struct {
			d.fail(k, kpath, "the registration of %s %q makes a %T, not a pointer to a struct", path, k.Value, cfg)
			continue
		}
		if val.Kind == yaml.AliasNode {
			val = val.Alias
		}
		d.value(val, rv.Elem(), kpath)
		if sec.Key == "" {
			sec.Key, sec.Config = k.Value, cfg
		}
	}
	if len(set) > 1 {
		// At the line of the section's key, where the choice is made.
		d.fail(&yaml.Node{Line: d.lines[path]}, path, "%s are set; a pipeline has exactly one %s", strings.Join(set, " and "), path)
	}
}

// scalar decodes a scalar of a basic type through yaml.v3.
func (d *decoder) scalar(n *yaml.Node, v reflect.Value, path string) {
	if n.Kind != yaml.ScalarNode {
		d.fail(n, path, "expected %s, got %s", describe(v.Type()), kindName(n))
		return
	}
	if !d.interpolateTree(n, path) {
		return
	}
	if isNull(n) {
		v.SetZero()
		return
	}
	def := ""
	if v.Kind() == reflect.String {
		def = v.String()
	}
	if err := n.Decode(v.Addr().Interface()); err != nil {
		d.fail(n, path, "%q is not %s", n.Value, describe(v.Type()))
		return
	}
	// A key with a default, written empty, would be taken for its
	// default by the connector: say so instead.
	if def != "" && v.String() == "" {
		d.late = append(d.late, fmt.Errorf("%s: must not be empty (default %s)", path, def))
	}
}

// structValue decodes a mapping into the struct v: every key must name a
// field.
func (d *decoder) structValue(n *yaml.Node, v reflect.Value, path string) {
	if isNull(n) {
		return // keep the defaults
	}
	if n.Kind != yaml.MappingNode {
		d.fail(n, path, "expected a mapping, got %s", kindName(n))
		return
	}
	fields := yamlFields(v)
	seen := map[string]int{}
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, val := n.Content[i], n.Content[i+1]
		kpath := joinPath(path, k.Value)
		if k.Value == "<<" {
			d.fail(k, kpath, "merge keys are not supported")
			continue
		}
		if line, dup := seen[k.Value]; dup {
			d.fail(k, kpath, "duplicate key (first at line %d)", line)
			continue
		}
		seen[k.Value] = k.Line
		if m, ok := v.Addr().Interface().(mappingForms); ok {
			if f, ok := m.mappingForm(k.Value, val); ok {
				d.lines[kpath] = k.Line
				d.value(val, f, kpath)
				continue
			}
		}
		f, ok := fields[k.Value]
		if !ok {
			d.fail(k, kpath, "unknown key%s", suggest(k.Value, fields))
			continue
		}
		d.lines[kpath] = k.Line
		d.value(val, f, kpath)
	}
}

// mappingForms is a section with a key that takes a scalar or a mapping,
// such as checkpoint: sink and checkpoint: {nats_kv: ...}. For a mapping
// value, mappingForm returns what to decode it into.
type mappingForms interface {
	mappingForm(key string, val *yaml.Node) (reflect.Value, bool)
}

// yamlFields maps the YAML keys of struct v to its fields, following
// yaml.v3's conventions: the yaml tag's name, or the lower-cased field
// name; "-" skips a field; ",inline" merges an embedded struct's keys.
func yamlFields(v reflect.Value) map[string]reflect.Value {
	fields := map[string]reflect.Value{}
	t := v.Type()
	for i := range t.NumField() {
		sf := t.Field(i)
		if !sf.IsExported() {
			continue
		}
		tag := sf.Tag.Get("yaml")
		name, opts, _ := strings.Cut(tag, ",")
		if name == "-" {
			continue
		}
		if slices.Contains(strings.Split(opts, ","), "inline") && sf.Type.Kind() == reflect.Struct {
			for k, f := range yamlFields(v.Field(i)) {
				fields[k] = f
			}
			continue
		}
		if name == "" {
			name = strings.ToLower(sf.Name)
		}
		fields[name] = v.Field(i)
	}
	return fields
}

type taggedField struct {
	key    string
	value  reflect.Value
	secret string // the field's secret tag
}

// yamlFieldsTagged is yamlFields with each field's secret tag, in the
// order the fields are declared.
func yamlFieldsTagged(v reflect.Value) []taggedField {
	var fields []taggedField
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
		if slices.Contains(strings.Split(opts, ","), "inline") && sf.Type.Kind() == reflect.Struct {
			fields = append(fields, yamlFieldsTagged(v.Field(i))...)
			continue
		}
		if name == "" {
			name = strings.ToLower(sf.Name)
		}
		fields = append(fields, taggedField{name, v.Field(i), sf.Tag.Get("secret")})
	}
	return fields
}

// interpolateTree expands variables in every scalar under n, reporting
// errors; it returns false if there were any.
func (d *decoder) interpolateTree(n *yaml.Node, path string) bool {
	ok := true
	switch n.Kind {
	case yaml.ScalarNode:
		if !strings.Contains(n.Value, "$") {
			return true
		}
		s, err := interpolate(n.Value, d.getenv)
		if err != nil {
			d.fail(n, path, "%v", err)
			return false
		}
		if d.raw != nil {
			d.raw[path] = n.Value
		}
		n.Value = s
		// An unquoted, untagged value is typed again from its new text, so
		// that count: ${N} is a number.
		if n.Style&(yaml.TaggedStyle|yaml.SingleQuotedStyle|yaml.DoubleQuotedStyle|yaml.LiteralStyle|yaml.FoldedStyle) == 0 {
			n.Tag = ""
		}
	case yaml.SequenceNode, yaml.MappingNode:
		for _, c := range n.Content {
			ok = d.interpolateTree(c, path) && ok
		}
	}
	return ok
}

func isNull(n *yaml.Node) bool {
	return n.Kind == yaml.ScalarNode && n.ShortTag() == "!!null"
}

func joinPath(path, key string) string {
	if path == "" {
		return key
	}
	return path + "." + key
}

func kindName(n *yaml.Node) string {
	switch n.Kind {
	case yaml.MappingNode:
		return "a mapping"
	case yaml.SequenceNode:
		return "a list"
	case yaml.ScalarNode:
		return fmt.Sprintf("%q", n.Value)
	}
	return "something else"
}

func describe(t reflect.Type) string {
	if t == durationType {
		return "a duration such as 1s or 500ms"
	}
	switch t.Kind() {
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		return "an integer"
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return "a non-negative integer"
	case reflect.Float32, reflect.Float64:
		return "a number"
	case reflect.Bool:
		return "true or false"
	case reflect.String:
		return "a string"
	}
	return "a " + t.String()
}

// suggest names the closest known key, or lists them all.
func suggest(key string, fields map[string]reflect.Value) string {
	names := make([]string, 0, len(fields))
	for k := range fields {
		names = append(names, k)
	}
	slices.Sort(names)
	best, bestDist := "", 3
	for _, k := range names {
		if dist := editDistance(key, k); dist < bestDist {
			best, bestDist = k, dist
		}
	}
	if best != "" {
		return fmt.Sprintf(" (did you mean %s?)", best)
	}
	if len(names) == 0 {
		return " (this section takes no keys)"
	}
	return " (known keys: " + strings.Join(names, ", ") + ")"
}

func editDistance(a, b string) int {
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev, cur = cur, prev
	}
	return prev[len(b)]
}

var yamlLinePrefix = regexp.MustCompile(`^(yaml: )?(unmarshal errors:\s*)?(line \d+: )?`)

// cleanYAMLError strips yaml.v3's prefixes; our messages carry the line.
func cleanYAMLError(err error) string {
	var te *yaml.TypeError
	if errors.As(err, &te) {
		msgs := make([]string, len(te.Errors))
		for i, m := range te.Errors {
			msgs[i] = yamlLinePrefix.ReplaceAllString(m, "")
		}
		return strings.Join(msgs, "; ")
	}
	return yamlLinePrefix.ReplaceAllString(err.Error(), "")
}
