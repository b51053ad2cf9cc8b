package store

import (
	"cmp"
	"slices"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/x/bsonx/bsoncore"

	"github.com/tide-cdc/tide/mongowire/internal/fts"
	"github.com/tide-cdc/tide/mongowire/internal/mongoerr"
	"github.com/tide-cdc/tide/mongowire/internal/mql"
)

// splitText takes a top-level $text out of a filter: its argument and
// the rest of the filter. ok is false when the filter has none.
func splitText(filter bson.Raw) (text bson.RawValue, rest bson.Raw, ok bool) {
	v, err := filter.LookupErr("$text")
	if err != nil {
		return bson.RawValue{}, filter, false
	}
	elems, _ := filter.Elements()
	idx, b := bsoncore.AppendDocumentStart(nil)
	for _, e := range elems {
		if e.Key() != "$text" {
			b = append(b, e...)
		}
	}
	b, _ = bsoncore.AppendDocumentEnd(b, idx)
	return v, b, true
}

// textScored is a document that matched a $text query, with its score.
type textScored struct {
	doc   bson.Raw
	score float64
}

// textMatch runs a query holding $text: the rest of the filter selects
// candidates as usual, the collection's text index matches and scores
// them (fts). Without a text index it fails as mongod does (27); a
// compound text index needs equalities on its fields before the text
// ones.
func (s *Store) textMatch(rd *Txn, ns Namespace, text bson.RawValue, rest bson.Raw, coll *mql.Collation) ([]textScored, error) {
	var spec *fts.Spec
	var prefix []string
	_ = s.read(func() error {
		if c := s.collLocked(ns); c != nil {
			for _, ix := range c.indexes {
				if ix.text == nil {
					continue
				}
				spec = ix.text
				for _, e := range ix.spec.Key {
					if e.Key == "_fts" {
						break
					}
					prefix = append(prefix, e.Key)
				}
			}
		}
		return nil
	})
	if spec == nil {
		return nil, mongoerr.New(mongoerr.IndexNotFound, "text index required for $text query")
	}
	for _, p := range prefix {
		v, err := rest.LookupErr(p)
		if err != nil || v.Type == bson.TypeEmbeddedDocument && len(v.Document()) > 5 && v.Document().Index(0).Key()[0] == '$' {
			return nil, mongoerr.New(mongoerr.BadValue, "error processing query: planner returned error :: caused by :: failed to use text index to satisfy $text query (if text index is compound, are equality predicates given for all prefix fields?)")
		}
	}
	q, err := fts.ParseQuery(text, spec)
	if err != nil {
		return nil, err
	}
	f, err := compileQuery(rest, coll)
	if err != nil {
		return nil, err
	}
	docs, _, err := s.match(rd, ns, f, 0)
	if err != nil {
		return nil, err
	}
	var out []textScored
	for _, d := range docs {
		if score, ok := q.Match(spec, d); ok {
			out = append(out, textScored{doc: d, score: score})
		}
	}
	return out, nil
}

// isTextScore reports whether v is {$meta: "textScore"}.
func isTextScore(v bson.RawValue) bool {
	d, ok := v.DocumentOK()
	if !ok {
		return false
	}
	m, err := d.LookupErr("$meta")
	return err == nil && m.StringValue() == "textScore"
}

// findText is find for a filter holding $text: its sort and projection
// may use {$meta: "textScore"} (a score sorts descending; a projected
// score comes after the document's fields, as mongod places computed
// fields).
func (s *Store) findText(rd *Txn, ns Namespace, spec FindSpec, text bson.RawValue, rest bson.Raw, coll *mql.Collation) ([]bson.Raw, error) {
	hits, err := s.textMatch(rd, ns, text, rest, coll)
	if err != nil {
		return nil, err
	}
	// The sort: each key is the score or a field.
	type sortKey struct {
		score bool
		s     *mql.Sort
	}
	var keys []sortKey
	sortElems, _ := spec.Sort.Elements()
	for _, e := range sortElems {
		if isTextScore(e.Value()) {
			keys = append(keys, sortKey{score: true})
			continue
		}
		one, _ := bson.Marshal(bson.D{{Key: e.Key(), Value: e.Value()}})
		srt, err := mql.CompileSortCollated(one, coll)
		if err != nil {
			return nil, err
		}
		keys = append(keys, sortKey{s: srt})
	}
	var scoreFields []string
	var projRest bson.D
	projElems, _ := spec.Projection.Elements()
	for _, e := range projElems {
		if isTextScore(e.Value()) {
			scoreFields = append(scoreFields, e.Key())
			continue
		}
		projRest = append(projRest, bson.E{Key: e.Key(), Value: e.Value()})
	}
	var proj *mql.Projection
	if len(projRest) > 0 {
		raw, _ := bson.Marshal(projRest)
		if proj, err = mql.CompileProjection(raw); err != nil {
			return nil, err
		}
	}
	if len(keys) > 0 {
		slices.SortStableFunc(hits, func(a, b textScored) int {
			for _, k := range keys {
				var c int
				if k.score {
					c = cmp.Compare(b.score, a.score)
				} else {
					c = k.s.Compare(a.doc, b.doc)
				}
				if c != 0 {
					return c
				}
			}
			return 0
		})
	}
	limit := spec.Limit
	if limit < 0 {
		limit = -limit
	}
	hits = window(hits, max(spec.Skip, 0), limit)
	out := make([]bson.Raw, len(hits))
	for i, h := range hits {
		d := h.doc
		if proj != nil {
			if d, err = proj.Apply(d, -1); err != nil {
				return nil, err
			}
		}
		if len(scoreFields) > 0 {
			d = withFields(d, scoreFields, h.score)
		}
		out[i] = d
	}
	return out, nil
}

// withFields appends fields holding the double v to doc.
func withFields(doc bson.Raw, names []string, v float64) bson.Raw {
	b := make([]byte, 0, len(doc)+16*len(names))
	b = append(b, doc[:len(doc)-1]...)
	for _, n := range names {
		b = bsoncore.AppendDoubleElement(b, n, v)
	}
	b = append(b, 0)
	bsoncore.UpdateLength(b, 0, int32(len(b)))
	return b
}

// textScoreField carries each document's text score through the stages
// after a $text $match; {$meta: "textScore"} in them reads it, and a
// last $unset removes it.
const textScoreField = "__tide_textScore"

// aggregateText runs a pipeline whose first stage is a $match with
// $text: the matches, scored, go through the other stages, in which
// {$meta: "textScore"} is the score ($sort: descending).
func (s *Store) aggregateText(rd *Txn, ns Namespace, text bson.RawValue, rest bson.Raw, stages []bson.Raw, lim mql.Limits, coll *mql.Collation) ([]bson.Raw, error) {
	hits, err := s.textMatch(rd, ns, text, rest, coll)
	if err != nil {
		return nil, err
	}
	rewritten := make([]bson.Raw, 0, len(stages)+1)
	for _, st := range stages {
		var d bson.D
		if err := bson.Unmarshal(st, &d); err != nil {
			return nil, mongoerr.New(mongoerr.InvalidBSON, "invalid pipeline stage: %v", err)
		}
		if len(d) == 1 && d[0].Key == "$sort" {
			if keys, ok := d[0].Value.(bson.D); ok {
				for i, k := range keys {
					if isTextScoreGo(k.Value) {
						keys[i] = bson.E{Key: textScoreField, Value: int32(-1)}
					}
				}
			}
		} else {
			d = rewriteTextScore(d).(bson.D)
		}
		raw, err := bson.Marshal(d)
		if err != nil {
			return nil, err
		}
		rewritten = append(rewritten, raw)
	}
	unset, _ := bson.Marshal(bson.D{{Key: "$unset", Value: textScoreField}})
	rewritten = append(rewritten, unset)
	p, err := mql.CompilePipelineCollated(rewritten, coll)
	if err != nil {
		return nil, err
	}
	input := make([]bson.Raw, len(hits))
	for i, h := range hits {
		input[i] = withFields(h.doc, []string{textScoreField}, h.score)
	}
	return p.RunLimited(env{s: s, db: ns.DB, rd: rd}, input, lim)
}

func isTextScoreGo(v any) bool {
	d, ok := v.(bson.D)
	return ok && len(d) == 1 && d[0].Key == "$meta" && d[0].Value == "textScore"
}

// rewriteTextScore replaces each {$meta: "textScore"} expression in v
// with a reference to textScoreField.
func rewriteTextScore(v any) any {
	switch x := v.(type) {
	case bson.D:
		if isTextScoreGo(x) {
			return "$" + textScoreField
		}
		for i := range x {
			x[i].Value = rewriteTextScore(x[i].Value)
		}
		return x
	case bson.A:
		for i := range x {
			x[i] = rewriteTextScore(x[i])
		}
		return x
	}
	return v
}
