package store

import (
	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/tide-cdc/tide/mongowire/internal/mongoerr"
	"github.com/tide-cdc/tide/mongowire/internal/mql"
)

// Views: {create: "v", viewOn: "src", pipeline: [...]}. A view is a
// catalog entry without documents; reads of it (find, count, distinct,
// aggregate, $lookup) run its pipeline over its source, which may itself
// be a view, then the query. Writes are refused with
// CommandNotSupportedOnView (166).

const (
	codeViewDepthLimitExceeded    int32 = 165
	codeCommandNotSupportedOnView int32 = 166
	codeOptionNotSupportedOnView  int32 = 167
	maxViewDepth                        = 20 // mongod's ViewGraph::kMaxViewDepth
	codeGraphContainsCycle        int32 = 93
)

// viewDef is what a view reads.
type viewDef struct {
	on       string // collection or view of the same database
	pipeline []bson.Raw
	coll     *mql.Collation // the view's default collation (nil: simple), never its source's
}

// parseView reads viewOn and pipeline from create options; nil when the
// options define no view.
func parseView(options bson.D) (*viewDef, error) {
	var v *viewDef
	var pipeline bson.RawValue
	hasPipeline := false
	for _, o := range options {
		rv, _ := rawOption(o.Value)
		switch o.Key {
		case "viewOn":
			s, ok := rv.StringValueOK()
			if !ok {
				return nil, mongoerr.New(mongoerr.TypeMismatch, "BSON field 'create.viewOn' is the wrong type '%s', expected type 'string'", typeNameOf(rv.Type))
			}
			if s == "" {
				return nil, mongoerr.New(mongoerr.BadValue, "'viewOn' cannot be empty")
			}
			v = &viewDef{on: s}
		case "pipeline":
			pipeline, hasPipeline = rv, true
		}
	}
	if v == nil {
		if hasPipeline {
			return nil, mongoerr.New(mongoerr.BadValue, "'pipeline' requires 'viewOn' to also be specified")
		}
		return nil, nil
	}
	for _, o := range options {
		switch o.Key {
		case "viewOn", "pipeline", "collation", "writeConcern", "comment":
		case "capped", "size", "max", "validator", "validationLevel", "validationAction", "clusteredIndex",
			"changeStreamPreAndPostImages", "timeseries", "expireAfterSeconds", "storageEngine", "indexOptionDefaults", "idIndex":
			return nil, mongoerr.New(mongoerr.InvalidOptions, "option not supported on a view: %s", o.Key)
		}
	}
	if hasPipeline {
		if pipeline.Type != bson.TypeArray {
			return nil, mongoerr.New(mongoerr.TypeMismatch, "BSON field 'create.pipeline' is the wrong type '%s', expected type 'array'", typeNameOf(pipeline.Type))
		}
		vals, _ := pipeline.Array().Values()
		for _, sv := range vals {
			d, ok := sv.DocumentOK()
			if !ok {
				return nil, mongoerr.New(mongoerr.TypeMismatch, "Each element of the 'pipeline' array must be an object")
			}
			if first, err := d.IndexErr(0); err == nil {
				switch first.Key() {
				case "$out", "$merge":
					return nil, mongoerr.New(codeOptionNotSupportedOnView, "%s cannot be used in a view definition", first.Key())
				case "$changeStream":
					return nil, mongoerr.New(codeOptionNotSupportedOnView, "$changeStream cannot be used in a view definition")
				}
			}
			v.pipeline = append(v.pipeline, d)
		}
	}
	if c := lookupD(options, "collation"); c != nil {
		coll, err := parseCollationOption(c)
		if err != nil {
			return nil, err
		}
		v.coll = coll
	}
	if _, err := mql.CompilePipelineCollated(v.pipeline, v.coll); err != nil {
		return nil, err
	}
	return v, nil
}

// IsView reports whether ns is a view.
func (s *Store) IsView(ns Namespace) bool {
	isView := false
	_ = s.read(func() error {
		c := s.collLocked(ns)
		isView = c != nil && c.view != nil
		return nil
	})
	return isView
}

// refuseViewLocked fails a write to a view.
func refuseViewLocked(ns Namespace, c *collection) error {
	if c != nil && c.view != nil {
		return mongoerr.New(codeCommandNotSupportedOnView, "Namespace %s is a view, not a collection", ns)
	}
	return nil
}

// checkViewGraphLocked refuses a view whose chain of sources is too deep
// or loops back to itself.
func (s *Store) checkViewGraphLocked(ns Namespace, v *viewDef) error {
	seen := map[string]bool{ns.Coll: true}
	on := v.on
	for depth := 1; ; depth++ {
		if seen[on] {
			return mongoerr.New(codeGraphContainsCycle, "View cycle detected: %s", ns)
		}
		if depth > maxViewDepth {
			return mongoerr.New(codeViewDepthLimitExceeded, "View depth too deep or view cycle detected; maximum depth is %d", maxViewDepth)
		}
		c := s.collLocked(Namespace{DB: ns.DB, Coll: on})
		if c == nil || c.view == nil {
			return nil
		}
		seen[on] = true
		on = c.view.on
	}
}

// viewDocs returns the documents a view shows, and whether ns is a view.
func (s *Store) viewDocs(rd *Txn, ns Namespace) ([]bson.Raw, bool, error) {
	if docs, ok := s.bucketsView(rd, ns); ok { // timeseries.go
		return docs, true, nil
	}
	var chain []*viewDef
	var docs []bson.Raw
	err := s.read(func() error {
		cur := ns
		for depth := 0; ; depth++ {
			c := s.collLocked(cur)
			if c == nil {
				return nil
			}
			if c.view == nil {
				if len(chain) > 0 {
					docs = s.docsAsLocked(rd, cur, c)
				}
				return nil
			}
			if depth >= maxViewDepth {
				return mongoerr.New(codeViewDepthLimitExceeded, "View depth too deep or view cycle detected; maximum depth is %d", maxViewDepth)
			}
			chain = append(chain, c.view)
			cur = Namespace{DB: ns.DB, Coll: c.view.on}
		}
	})
	if err != nil || len(chain) == 0 {
		return nil, false, err
	}
	for i := len(chain) - 1; i >= 0; i-- {
		p, err := mql.CompilePipelineCollated(chain[i].pipeline, chain[i].coll)
		if err != nil {
			return nil, true, err
		}
		if docs, err = p.Run(env{s: s, db: ns.DB, rd: rd}, docs); err != nil {
			return nil, true, err
		}
	}
	return docs, true, nil
}

// FindIn answers a find on the documents given (a view's, or a rendered
// collection's): filter, sort, skip, limit, projection, as find does on a
// collection.
func FindIn(docs []bson.Raw, spec FindSpec) ([]bson.Raw, error) {
	return findIn(docs, spec, nil)
}

// findIn is FindIn under a collation (a view's).
func findIn(docs []bson.Raw, spec FindSpec, coll *mql.Collation) ([]bson.Raw, error) {
	f, err := mql.CompileFilterCollated(spec.Filter, coll)
	if err != nil {
		return nil, err
	}
	var out []bson.Raw
	for _, d := range docs {
		if f.Match(d) {
			out = append(out, d)
		}
	}
	if len(spec.Sort) > 0 {
		sorter, err := mql.CompileSortCollated(spec.Sort, coll)
		if err != nil {
			return nil, err
		}
		sorter.SortDocs(out)
	}
	limit := spec.Limit
	if limit < 0 {
		limit = -limit
	}
	out = window(out, max(spec.Skip, 0), limit)
	if len(spec.Projection) > 0 {
		proj, err := mql.CompileProjection(spec.Projection)
		if err != nil {
			return nil, err
		}
		for i, d := range out {
			_, pos := f.MatchPositional(d)
			if out[i], err = proj.Apply(d, pos); err != nil {
				return nil, err
			}
		}
	}
	return out, nil
}
