package store

import (
	"bytes"
	"strconv"
	"strings"

	"go.mongodb.org/mongo-driver/v2/bson"
)

// diffDocs describes how after differs from before, as a change stream's
// updateDescription does: a change is reported at the shallowest path where
// before and after differ, descending into documents (and arrays) present on
// both sides; fields gone from after are removed; arrays that shrank are
// truncated, with changed or added elements reported as "arr.N". An array
// whose every kept element (two or more) changed is reported whole. DisambiguatedPaths
// lists the paths that contain a numeric-looking or dotted field name, with
// array indexes as int32, and is nil when there are none.
func diffDocs(before, after bson.Raw) *UpdateDescription {
	d := &differ{ud: &UpdateDescription{UpdatedFields: bson.D{}, RemovedFields: []string{}, TruncatedArrays: []TruncatedArray{}}}
	d.doc(nil, before, after)
	return d.ud
}

// pathComp is one component of a path: a field name, or an array index.
type pathComp struct {
	field string
	index int
	isIdx bool
}

type differ struct {
	ud *UpdateDescription
}

func (d *differ) path(p []pathComp) string {
	var b strings.Builder
	ambiguous := false
	for i, c := range p {
		if i > 0 {
			b.WriteByte('.')
		}
		if c.isIdx {
			b.WriteString(strconv.Itoa(c.index))
			continue
		}
		b.WriteString(c.field)
		if strings.Contains(c.field, ".") || isNumeric(c.field) {
			ambiguous = true
		}
	}
	s := b.String()
	if ambiguous {
		comps := make(bson.A, len(p))
		for i, c := range p {
			if c.isIdx {
				comps[i] = int32(c.index)
			} else {
				comps[i] = c.field
			}
		}
		d.ud.DisambiguatedPaths = append(d.ud.DisambiguatedPaths, bson.E{Key: s, Value: comps})
	}
	return s
}

func isNumeric(s string) bool {
	if s == "" {
		return false
	}
	for _, r := range s {
		if r < '0' || r > '9' {
			return false
		}
	}
	return true
}

func sameValue(a, b bson.RawValue) bool {
	return a.Type == b.Type && bytes.Equal(a.Value, b.Value)
}

func with(p []pathComp, c pathComp) []pathComp {
	return append(p[:len(p):len(p)], c)
}

func (d *differ) doc(p []pathComp, before, after bson.Raw) {
	bElems, _ := before.Elements()
	aElems, _ := after.Elements()
	inAfter := make(map[string]struct{}, len(aElems))
	for _, e := range aElems {
		inAfter[e.Key()] = struct{}{}
	}
	old := make(map[string]bson.RawValue, len(bElems))
	pos := make(map[string]int, len(bElems))
	for i, e := range bElems {
		old[e.Key()] = e.Value()
		pos[e.Key()] = i
	}
	// Field changes can only express an order where the kept fields stay in
	// place and new fields come last; a nested document reordered any other
	// way is reported whole.
	if len(p) > 0 && !appendOnly(aElems, pos) {
		d.set(p, bson.RawValue{Type: bson.TypeEmbeddedDocument, Value: after})
		return
	}
	for _, e := range bElems {
		if _, ok := inAfter[e.Key()]; !ok {
			d.ud.RemovedFields = append(d.ud.RemovedFields, d.path(with(p, pathComp{field: e.Key()})))
		}
	}
	for _, e := range aElems {
		av := e.Value()
		fp := with(p, pathComp{field: e.Key()})
		bv, ok := old[e.Key()]
		switch {
		case !ok:
			d.set(fp, av)
		case sameValue(bv, av):
		default:
			d.value(fp, bv, av)
		}
	}
}

// value reports a changed value at p.
func (d *differ) value(p []pathComp, bv, av bson.RawValue) {
	switch {
	case bv.Type == bson.TypeEmbeddedDocument && av.Type == bson.TypeEmbeddedDocument:
		d.doc(p, bv.Document(), av.Document())
	case bv.Type == bson.TypeArray && av.Type == bson.TypeArray:
		d.array(p, bv.Array(), av.Array())
	default:
		d.set(p, av)
	}
}

func (d *differ) set(p []pathComp, v bson.RawValue) {
	d.ud.UpdatedFields = append(d.ud.UpdatedFields, bson.E{Key: d.path(p), Value: v})
}

func (d *differ) array(p []pathComp, before, after bson.RawArray) {
	bv, _ := before.Values()
	av, _ := after.Values()
	common := min(len(bv), len(av))
	changed := 0
	for i := range common {
		if !sameValue(bv[i], av[i]) {
			changed++
		}
	}
	if common > 1 && changed == common {
		d.set(p, bson.RawValue{Type: bson.TypeArray, Value: after})
		return
	}
	for i := range common {
		if !sameValue(bv[i], av[i]) {
			d.value(with(p, pathComp{index: i, isIdx: true}), bv[i], av[i])
		}
	}
	for i := common; i < len(av); i++ {
		d.set(with(p, pathComp{index: i, isIdx: true}), av[i])
	}
	if len(av) < len(bv) {
		d.ud.TruncatedArrays = append(d.ud.TruncatedArrays, TruncatedArray{Field: d.path(p), NewSize: int32(len(av))})
	}
}

// appendOnly reports whether the fields of after that were in before keep
// their relative order and come before every new field.
func appendOnly(after []bson.RawElement, pos map[string]int) bool {
	last, added := -1, false
	for _, e := range after {
		i, ok := pos[e.Key()]
		switch {
		case !ok:
			added = true
		case added || i < last:
			return false
		default:
			last = i
		}
	}
	return true
}
