package mongowire

import (
	"context"
	"fmt"
	"strings"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/tide-cdc/tide/mongowire/internal/fts"
	"github.com/tide-cdc/tide/mongowire/internal/mongoerr"
	"github.com/tide-cdc/tide/mongowire/internal/store"
)

// cmdCreateIndexes: {createIndexes: "c", indexes: [{key, name, unique, sparse, ...}]}.
func (s *Server) cmdCreateIndexes(ctx context.Context, _ *conn, r *request) (bson.D, error) {
	ns, err := collNS(r)
	if err != nil {
		return nil, err
	}
	a := newArgs(r)
	specs := a.docs("indexes")
	if a.err != nil {
		return nil, a.err
	}
	if len(specs) == 0 {
		return nil, mongoerr.New(mongoerr.BadValue, "Must specify at least one index to create")
	}
	out := make([]store.IndexSpec, 0, len(specs))
	for _, raw := range specs {
		spec, err := parseIndexSpec(raw)
		if err != nil {
			return nil, err
		}
		out = append(out, spec)
	}
	created, before, after, err := s.data(ctx).CreateIndexes(ns, out)
	if err != nil {
		return nil, err
	}
	reply := bson.D{
		{Key: "numIndexesBefore", Value: int32(before)},
		{Key: "numIndexesAfter", Value: int32(after)},
		{Key: "createdCollectionAutomatically", Value: created},
		{Key: "commitQuorum", Value: "votingMembers"},
	}
	if before == after {
		reply = append(reply, bson.E{Key: "note", Value: "all indexes already exist"})
	}
	return reply, nil
}

func parseIndexSpec(raw bson.Raw) (store.IndexSpec, error) {
	var spec store.IndexSpec
	elems, err := raw.Elements()
	if err != nil {
		return spec, mongoerr.New(mongoerr.InvalidBSON, "index specification: %v", err)
	}
	var textOpts bson.D // text index options, kept only for a text key
	for _, e := range elems {
		v := e.Value()
		switch e.Key() {
		case "key":
			kd, ok := v.DocumentOK()
			if !ok {
				return spec, mongoerr.New(mongoerr.TypeMismatch, "The field 'key' must be an object, but got %s", typeName(v.Type))
			}
			if err := bson.Unmarshal(kd, &spec.Key); err != nil {
				return spec, mongoerr.New(mongoerr.InvalidBSON, "index key: %v", err)
			}
			for _, k := range spec.Key {
				if k.Key == "" {
					return spec, mongoerr.New(mongoerr.CannotCreateIndex, "Error in specification %s :: caused by :: Index keys cannot be an empty field", raw)
				}
			}
		case "name":
			n, ok := v.StringValueOK()
			if !ok {
				return spec, mongoerr.New(mongoerr.TypeMismatch, "The field 'name' must be a string, but got %s", typeName(v.Type))
			}
			spec.Name = n
		case "unique":
			spec.Unique = truthy(v)
		case "sparse":
			spec.Sparse = truthy(v)
		case "v", "ns":
			// The version is ours to choose; ns is legacy.
		default:
			switch {
			case honouredIndexOptions[e.Key()]:
				spec.Options = append(spec.Options, bson.E{Key: e.Key(), Value: v})
			case textIndexOptions[e.Key()]:
				textOpts = append(textOpts, bson.E{Key: e.Key(), Value: v})
			case unsupportedIndexOptions[e.Key()]:
				return spec, mongoerr.New(mongoerr.CommandNotSupported, "index option '%s' is not supported by this server (geo and wildcard indexes are not)", e.Key())
			default:
				return spec, mongoerr.New(codeInvalidIndexSpecificationOption, "The field '%s' is not valid for an index specification. Specification: %s", e.Key(), raw)
			}
		}
	}
	isText := fts.IsTextKey(spec.Key)
	for _, k := range spec.Key {
		if (k.Key == "$**" || strings.HasSuffix(k.Key, ".$**")) && !isText {
			return spec, mongoerr.New(mongoerr.CommandNotSupported, "wildcard indexes are not supported by this server (wildcard text indexes are)")
		}
	}
	if len(textOpts) > 0 && !isText {
		return spec, mongoerr.New(codeInvalidIndexSpecificationOption, "The field '%s' is not valid for an index specification other than a text index. Specification: %s", textOpts[0].Key, raw)
	}
	spec.Options = append(spec.Options, textOpts...)
	if hidden, _ := lookupOption(spec.Options, "hidden"); hidden && spec.Name == "_id_" {
		return spec, mongoerr.New(mongoerr.BadValue, "can't hide _id index")
	}
	if len(spec.Key) == 0 {
		return spec, mongoerr.New(mongoerr.FailedToParse, "Error in specification %s :: caused by :: The 'key' field is a required property of an index specification", raw)
	}
	if spec.Name == "" {
		spec.Name = indexName(spec.Key)
	}
	return spec, nil
}

// indexName is MongoDB's default name: "a_1_b_-1".
func indexName(key bson.D) string {
	var b strings.Builder
	for i, k := range key {
		if i > 0 {
			b.WriteByte('_')
		}
		b.WriteString(k.Key)
		b.WriteByte('_')
		if rv, ok := k.Value.(bson.RawValue); ok && rv.Type == bson.TypeString {
			b.WriteString(rv.StringValue()) // {a: "text"} is a_text
			continue
		}
		fmt.Fprint(&b, k.Value)
	}
	return b.String()
}

// codeInvalidIndexSpecificationOption is mongod's answer to an index
// field it does not know.
const codeInvalidIndexSpecificationOption int32 = 197

// honouredIndexOptions are the index fields this server implements
// (hidden and prepareUnique in the planner and the unique checks,
// expireAfterSeconds in the TTL monitor), keeps for listIndexes (background
// and storageEngine, which change nothing on mongod 4.2+ either), or
// refuses where it matters (collation, before this is reached).
var honouredIndexOptions = map[string]bool{
	"partialFilterExpression": true, "expireAfterSeconds": true, "hidden": true,
	"prepareUnique": true, "background": true, "storageEngine": true, "collation": true,
}

// unsupportedIndexOptions belong to index types this server lacks.
var unsupportedIndexOptions = map[string]bool{
	"2dsphereIndexVersion": true, "bits": true, "min": true, "max": true, "bucketSize": true,
	"wildcardProjection": true, "coarsestIndexedLevel": true, "finestIndexedLevel": true,
}

// textIndexOptions are the options of a text index (fts.Normalise).
var textIndexOptions = map[string]bool{
	"weights": true, "default_language": true, "language_override": true, "textIndexVersion": true,
}

// lookupOption returns an index option's truth and whether it is set.
func lookupOption(opts bson.D, key string) (bool, bool) {
	for _, o := range opts {
		if o.Key == key {
			switch v := o.Value.(type) {
			case bool:
				return v, true
			case bson.RawValue:
				return truthy(v), true
			}
			return false, true
		}
	}
	return false, false
}
