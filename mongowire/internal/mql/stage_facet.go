package mql

import (
	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/tide-cdc/tide/mongowire/internal/mongoerr"
)

// $facet: sub-pipelines over the same input.

type facetStage struct {
	names []string
	subs  []*Pipeline
}

func compileFacet(v bson.RawValue) (stage, error) {
	if v.Type != bson.TypeEmbeddedDocument {
		return nil, mongoerr.New(15947, "the $facet specification must be a non-empty object")
	}
	s := &facetStage{}
	it := iterDoc(v.Value)
	for {
		k, f, ok := it.next()
		if !ok {
			break
		}
		if f.Type != bson.TypeArray {
			return nil, mongoerr.New(40170, "arguments to $facet must be arrays, %s is type %s", k, typeName(f.Type))
		}
		var stages []bson.Raw
		for _, st := range arrayValues(f.Value) {
			if st.Type != bson.TypeEmbeddedDocument {
				return nil, mongoerr.New(40171, "elements of arrays in $facet spec must be non-empty objects, %s argument contained an element of type %s", k, typeName(st.Type))
			}
			name := ""
			if it := iterDoc(st.Value); true {
				kk, _, _ := it.next()
				name = string(kk)
			}
			if name == "$facet" {
				return nil, mongoerr.New(40600, "$facet is not allowed to be used within a $facet stage")
			}
			stages = append(stages, st.Value)
		}
		p, err := CompilePipeline(stages)
		if err != nil {
			return nil, err
		}
		s.names = append(s.names, string(k))
		s.subs = append(s.subs, p)
	}
	if len(s.names) == 0 {
		return nil, mongoerr.New(40169, "the $facet specification must be a non-empty object")
	}
	return s, nil
}

func (s *facetStage) run(c *runCtx, in []bson.Raw) ([]bson.Raw, error) {
	d := newDoc(256)
	for i, p := range s.subs {
		res, err := p.collect(c, in)
		if err != nil {
			return nil, err
		}
		vals := make([]bson.RawValue, len(res))
		for j, r := range res {
			vals[j] = vDoc(r)
		}
		d.add(s.names[i], vArray(vals))
	}
	return []bson.Raw{d.done()}, nil
}
