package mongowire

import (
	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/tide-cdc/tide/mongowire/internal/mongoerr"
	"github.com/tide-cdc/tide/mongowire/internal/mql"
)

// documentsStage evaluates a leading $documents stage: its expression
// (evaluated once, with no input document) must give an array of
// documents, which become the pipeline's input. ok is false when the
// pipeline does not start with $documents; a $documents further down, or
// on a collection, is refused as mongod refuses it.
func documentsStage(coll string, stages []bson.Raw) (docs []bson.Raw, ok bool, err error) {
	for i, st := range stages {
		if st.Index(0).Key() == "$documents" && i > 0 {
			return nil, false, mongoerr.New(40602, "$documents is only valid as the first stage in a pipeline")
		}
	}
	if len(stages) == 0 || stages[0].Index(0).Key() != "$documents" {
		return nil, false, nil
	}
	if coll != "" {
		return nil, false, mongoerr.New(mongoerr.InvalidNamespace, "$documents can only be run with {aggregate: 1}")
	}
	e, err := mql.CompileExpr(stages[0].Index(0).Value())
	if err != nil {
		return nil, false, err
	}
	v, err := e.Eval(bson.Raw{5, 0, 0, 0, 0})
	if err != nil {
		return nil, false, err
	}
	arr, isArr := v.ArrayOK()
	if !isArr {
		return nil, false, mongoerr.New(5858203, "an array is expected")
	}
	vals, _ := arr.Values()
	docs = make([]bson.Raw, len(vals))
	for i, x := range vals {
		d, isDoc := x.DocumentOK()
		if !isDoc {
			return nil, false, mongoerr.New(40228, "'newRoot' expression must evaluate to an object, but resulting value was: %s. Type of resulting value: '%s'.", x, typeName(x.Type))
		}
		docs[i] = d
	}
	return docs, true, nil
}
