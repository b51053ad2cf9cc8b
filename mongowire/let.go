package mongowire

import (
	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/tide-cdc/tide/mongowire/internal/mql"
	"github.com/tide-cdc/tide/mongowire/internal/store"
)

// The command-level let option of find, aggregate, update, delete and
// findAndModify: constants bound once per command, referenced as "$$name"
// by aggregation expressions. They are substituted into the command's
// expressions before the store compiles them: a filter's $expr, a
// projection, a pipeline (sub-pipelines included) and a pipeline-style
// update. A modifier or replacement update, and a filter outside $expr,
// take no variables: there "$$name" is a plain string, as in mongod.

// commandLet reads the let option of a command; nil when absent.
func commandLet(r *request) (bson.Raw, error) {
	a := newArgs(r)
	let := a.doc("let")
	if a.err != nil || len(let) <= 5 {
		return nil, a.err
	}
	// Bad names and expressions fail the command even when nothing
	// refers to them, as in mongod.
	if _, err := mql.BindLet(bson.RawValue{Type: bson.TypeNull}, let); err != nil {
		return nil, err
	}
	return let, nil
}

// letValue binds let in an expression-bearing value (a projection, a
// pipeline, an $expr argument).
func letValue(v bson.RawValue, let bson.Raw) (bson.RawValue, error) {
	if len(let) <= 5 || v.Type == 0 {
		return v, nil
	}
	return mql.BindLet(v, let)
}

// letDoc binds let in a projection document.
func letDoc(d, let bson.Raw) (bson.Raw, error) {
	if d == nil || len(let) <= 5 {
		return d, nil
	}
	v, err := letValue(bson.RawValue{Type: bson.TypeEmbeddedDocument, Value: d}, let)
	return v.Document(), err
}

// letFilter binds let in a filter's $expr, at the top or under $and, $or
// and $nor.
func letFilter(filter, let bson.Raw) (bson.Raw, error) {
	if filter == nil || len(let) <= 5 {
		return filter, nil
	}
	elems, err := filter.Elements()
	if err != nil {
		return filter, nil // the store reports the malformed filter
	}
	out := make(bson.D, 0, len(elems))
	changed := false
	for _, e := range elems {
		v := e.Value()
		switch e.Key() {
		case "$expr":
			if v, err = letValue(v, let); err != nil {
				return nil, err
			}
			changed = true
		case "$and", "$or", "$nor":
			if arr, ok := v.ArrayOK(); ok {
				vals, _ := arr.Values()
				bound := make(bson.A, len(vals))
				for i, x := range vals {
					bound[i] = x
					if d, ok := x.DocumentOK(); ok {
						if bound[i], err = letFilter(d, let); err != nil {
							return nil, err
						}
					}
				}
				out = append(out, bson.E{Key: e.Key(), Value: bound})
				changed = true
				continue
			}
		}
		out = append(out, bson.E{Key: e.Key(), Value: v})
	}
	if !changed {
		return filter, nil
	}
	return bson.Marshal(out)
}

// letUpdate binds let in a pipeline-style update.
func letUpdate(u bson.RawValue, let bson.Raw) (bson.RawValue, error) {
	if u.Type != bson.TypeArray {
		return u, nil
	}
	return letValue(u, let)
}

// letPipeline binds let in every stage of a pipeline.
func letPipeline(stages []bson.Raw, let bson.Raw) ([]bson.Raw, error) {
	if len(let) <= 5 {
		return stages, nil
	}
	out := make([]bson.Raw, len(stages))
	for i, st := range stages {
		d, err := letDoc(st, let)
		if err != nil {
			return nil, err
		}
		out[i] = d
	}
	return out, nil
}

// letFind binds the command's let into a find.
func letFind(r *request, spec *store.FindSpec) error {
	let, err := commandLet(r)
	if err != nil || let == nil {
		return err
	}
	if spec.Filter, err = letFilter(spec.Filter, let); err != nil {
		return err
	}
	spec.Projection, err = letDoc(spec.Projection, let)
	return err
}

// letUpdateSpec binds let into one update statement.
func letUpdateSpec(spec *store.UpdateSpec, let bson.Raw) error {
	var err error
	if spec.Filter, err = letFilter(spec.Filter, let); err != nil {
		return err
	}
	spec.Update, err = letUpdate(spec.Update, let)
	return err
}

// letFindAndModify binds the command's let into a findAndModify.
func letFindAndModify(r *request, spec *store.FindAndModifySpec) error {
	let, err := commandLet(r)
	if err != nil || let == nil {
		return err
	}
	if spec.Filter, err = letFilter(spec.Filter, let); err != nil {
		return err
	}
	if spec.Fields, err = letDoc(spec.Fields, let); err != nil {
		return err
	}
	spec.Update, err = letUpdate(spec.Update, let)
	return err
}
