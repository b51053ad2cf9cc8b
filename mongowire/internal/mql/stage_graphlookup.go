package mql

import (
	"slices"
	"strings"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/tide-cdc/tide/mongowire/internal/mongoerr"
)

// $graphLookup: a breadth-first search of another collection. As mongod,
// each round queries {connectToField: {$in: <values>}} (with
// restrictSearchWithMatch), a document is found once (by _id), and the
// next round's values are the connectFromField values of the documents
// just found.

type graphLookupStage struct {
	from, as    string
	startWith   *Expr
	connectFrom []string
	connectTo   string
	depthField  []string
	maxDepth    int64 // -1: no limit
	restrict    *Filter
	asPath      []string
}

func compileGraphLookup(v bson.RawValue) (stage, error) {
	if v.Type != bson.TypeEmbeddedDocument {
		return nil, mongoerr.New(mongoerr.FailedToParse, "the $graphLookup stage specification must be an object, but found %s", typeName(v.Type))
	}
	s := &graphLookupStage{maxDepth: -1}
	var from, connectFrom string
	it := iterDoc(v.Value)
	for {
		k, f, ok := it.next()
		if !ok {
			break
		}
		name := string(k)
		switch name {
		case "from", "as", "connectFromField", "connectToField", "depthField":
			if f.Type != bson.TypeString {
				return nil, mongoerr.New(40103, "expected string as argument for %s, found: %s", name, shortString(f))
			}
			val := str(f)
			if name != "from" {
				if err := checkGraphPath(val); err != nil {
					return nil, err
				}
			}
			switch name {
			case "from":
				from = val
			case "as":
				s.as = val
			case "connectFromField":
				connectFrom = val
			case "connectToField":
				s.connectTo = val
			default:
				s.depthField = strings.Split(val, ".")
			}
		case "startWith":
			e, err := CompileExpr(f)
			if err != nil {
				return nil, err
			}
			s.startWith = e
		case "maxDepth":
			if !isNumeric(f.Type) {
				return nil, mongoerr.New(40100, "maxDepth must be numeric, found type: %s", typeName(f.Type))
			}
			n, ok := integral(f)
			if !ok {
				return nil, mongoerr.New(40102, "maxDepth could not be represented as a long long: %s", shortString(f))
			}
			if n < 0 {
				return nil, mongoerr.New(40101, "maxDepth requires a nonnegative argument, found: %s", shortString(f))
			}
			s.maxDepth = n
		case "restrictSearchWithMatch":
			if f.Type != bson.TypeEmbeddedDocument {
				return nil, mongoerr.New(40185, "restrictSearchWithMatch must be an object, found %s", typeName(f.Type))
			}
			m, err := CompileFilter(f.Value)
			if err != nil {
				return nil, err
			}
			s.restrict = m
		default:
			return nil, mongoerr.New(40104, "Unknown argument to $graphLookup: %s", name)
		}
	}
	switch {
	case from == "":
		return nil, mongoerr.New(mongoerr.FailedToParse, "must specify 'from' field for a $graphLookup")
	case s.startWith == nil || connectFrom == "" || s.connectTo == "" || s.as == "":
		return nil, mongoerr.New(40105, "$graphLookup requires 'startWith', 'connectFromField', 'connectToField', and 'as' to be specified.")
	}
	s.from = from
	s.connectFrom = strings.Split(connectFrom, ".")
	s.asPath = strings.Split(s.as, ".")
	return s, nil
}

// checkGraphPath refuses a field path argument mongod's FieldPath refuses.
func checkGraphPath(p string) error {
	if strings.HasPrefix(p, "$") {
		return mongoerr.New(16410, "FieldPath field names may not start with '$'. Consider using $getField or $setField.")
	}
	return checkPathParts(strings.Split(p, "."))
}

func (s *graphLookupStage) run(c *runCtx, in []bson.Raw) ([]bson.Raw, error) {
	var foreign []bson.Raw
	if c.env != nil {
		var err error
		if foreign, err = c.env.Collection(s.from); err != nil {
			return nil, err
		}
	}
	if s.restrict != nil {
		kept := foreign[:0:0]
		for _, f := range foreign {
			if s.restrict.Match(f) {
				kept = append(kept, f)
			}
		}
		foreign = kept
	}
	var idx graphIndex
	if !strings.Contains(s.connectTo, ".") && len(in) > 0 {
		idx = newGraphIndex(foreign, s.connectTo)
	}
	out := make([]bson.Raw, len(in))
	for i, d := range in {
		start, err := c.eval(s.startWith, d)
		if err != nil {
			return nil, err
		}
		found, err := s.search(start, foreign, idx)
		if err != nil {
			return nil, err
		}
		root := rawNode(vDoc(d))
		root.load()
		setField(root, s.asPath, vArray(found))
		out[i] = root.encodeDoc(make([]byte, 0, len(d)+64))
	}
	return out, nil
}

// search runs the breadth-first search from the startWith value.
func (s *graphLookupStage) search(start bson.RawValue, foreign []bson.Raw, idx graphIndex) ([]bson.RawValue, error) {
	var frontier []bson.RawValue
	queried := map[string]bool{}
	var key []byte
	addValue := func(v bson.RawValue) {
		if v.Type == 0 {
			v = nullValue
		}
		vals := []bson.RawValue{v}
		if v.Type == bson.TypeArray {
			vals = arrayValues(v.Value)
		}
		for _, e := range vals {
			if e.Type == bson.TypeUndefined {
				continue // $in refuses undefined; it matches nothing
			}
			key = appendKey(key[:0], e)
			if !queried[string(key)] {
				queried[string(key)] = true
				frontier = append(frontier, e)
			}
		}
	}
	addValue(start)
	seen := map[string]bool{}
	taken := make([]bool, len(foreign))
	var found []bson.RawValue
	for depth := int64(0); len(frontier) > 0 && (s.maxDepth < 0 || depth <= s.maxDepth); depth++ {
		op, err := parseIn("$in", vArray(frontier))
		if err != nil {
			return nil, err
		}
		n := newFieldNode(s.connectTo, op)
		candidates := idx.lookup(frontier)
		frontier = nil
		take := func(j int) {
			f := foreign[j]
			taken[j] = true
			id := lookup(f, "_id")
			if id.Type != 0 {
				key = appendKey(key[:0], id)
				if seen[string(key)] {
					return
				}
				seen[string(key)] = true
			}
			doc := f
			if s.depthField != nil {
				root := rawNode(vDoc(f))
				root.load()
				setField(root, s.depthField, vInt64(depth))
				doc = root.encodeDoc(make([]byte, 0, len(f)+32))
			}
			found = append(found, vDoc(doc))
			addValue(evalPath(vDoc(f), s.connectFrom))
		}
		if candidates != nil {
			for _, j := range candidates {
				if !taken[j] && n.match(foreign[j], nil) {
					take(j)
				}
			}
			continue
		}
		for j, f := range foreign {
			if !taken[j] && n.match(f, nil) {
				take(j)
			}
		}
	}
	return found, nil
}

// graphIndex maps the keys of a top-level connectToField's values (each
// element of an array; null for a missing field) to the positions of the
// documents holding them, so a round looks up its values instead of
// testing every document. Candidates are still tested with the query.
type graphIndex map[string][]int

func newGraphIndex(docs []bson.Raw, field string) graphIndex {
	idx := graphIndex{}
	var key []byte
	add := func(v bson.RawValue, j int) {
		key = appendKey(key[:0], v)
		if l := idx[string(key)]; len(l) == 0 || l[len(l)-1] != j {
			idx[string(key)] = append(l, j)
		}
	}
	for j, d := range docs {
		switch v := lookup(d, field); v.Type {
		case 0:
			add(nullValue, j)
		case bson.TypeArray:
			for _, e := range arrayValues(v.Value) {
				add(e, j)
			}
		default:
			add(v, j)
		}
	}
	return idx
}

// lookup returns the positions, in collection order, of the documents
// that may match one of vals, or nil when the index cannot answer (no
// index, or an array or regex value, which match other than by equality).
func (idx graphIndex) lookup(vals []bson.RawValue) []int {
	if idx == nil {
		return nil
	}
	var key []byte
	out := []int{}
	for _, v := range vals {
		if v.Type == bson.TypeArray || v.Type == bson.TypeRegex {
			return nil
		}
		key = appendKey(key[:0], v)
		out = append(out, idx[string(key)]...)
	}
	slices.Sort(out)
	return slices.Compact(out)
}
