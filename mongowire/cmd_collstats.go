package mongowire

import (
	"context"
	"net"
	"os"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/tide-cdc/tide/mongowire/internal/mongoerr"
	"github.com/tide-cdc/tide/mongowire/internal/mql"
	"github.com/tide-cdc/tide/mongowire/internal/store"
)

// storageStats is the storageStats document of $collStats (and the body of
// the collStats command) for ns: the store keeps no page files, so the
// sizes are the BSON sizes of the documents, storage and data alike, and
// index sizes are 0. 26 NamespaceNotFound when the collection is missing.
func (s *Server) storageStats(ctx context.Context, ns store.Namespace, scale int64) (bson.D, error) {
	if ns == oplogNS {
		return s.oplogStats(scale), nil // local_db.go
	}
	info, ok := s.data(ctx).Collection(ns)
	if !ok {
		return nil, mongoerr.New(mongoerr.NamespaceNotFound, "Collection [%s] not found.", ns)
	}
	capped, capSize, capMax := info.Capped()
	docs, err := s.data(ctx).Find(ns, store.FindSpec{})
	if err != nil {
		return nil, err
	}
	var size int64
	for _, d := range docs {
		size += int64(len(d))
	}
	specs, err := s.data(ctx).ListIndexes(ns)
	if err != nil {
		return nil, err
	}
	var avg int64
	if len(docs) > 0 {
		avg = size / int64(len(docs))
	}
	indexSizes := bson.D{}
	for _, sp := range specs {
		indexSizes = append(indexSizes, bson.E{Key: sp.Name, Value: int32(0)})
	}
	out := bson.D{
		{Key: "size", Value: appendNumber(size / scale)},
		{Key: "count", Value: appendNumber(int64(len(docs)))},
		{Key: "avgObjSize", Value: appendNumber(avg)},
		{Key: "numOrphanDocs", Value: appendNumber(int64(0))},
		{Key: "storageSize", Value: appendNumber(size / scale)},
		{Key: "freeStorageSize", Value: appendNumber(int64(0))},
		{Key: "capped", Value: capped},
	}
	if capped { // as mongod reports a capped collection
		out = append(out, bson.E{Key: "max", Value: appendNumber(capMax)}, bson.E{Key: "maxSize", Value: appendNumber(capSize / scale)})
	}
	return append(out, bson.D{
		{Key: "nindexes", Value: int32(len(specs))},
		{Key: "indexBuilds", Value: bson.A{}},
		{Key: "totalIndexSize", Value: appendNumber(int64(0))},
		{Key: "totalSize", Value: appendNumber(size / scale)},
		{Key: "indexSizes", Value: indexSizes},
		{Key: "scaleFactor", Value: appendNumber(scale)},
	}...), nil
}

// statsScale reads a scale option: a positive number, default 1.
func statsScale(v bson.RawValue, field string) (int64, error) {
	if v.Type == 0 || v.Type == bson.TypeNull {
		return 1, nil
	}
	n, ok := v.AsInt64OK()
	if !ok {
		return 0, mongoerr.New(mongoerr.TypeMismatch, "BSON field '%s' is the wrong type '%s', expected types '[long, int, decimal, double]'", field, typeName(v.Type))
	}
	if n < 1 {
		return 0, mongoerr.New(mongoerr.BadValue, "BSON field '%s' value must be >= 1, actual value '%d'", field, n)
	}
	return n, nil
}

// cmdCollStats: {collStats: "c", scale} -> {ns, <storageStats>}, what
// mongod 7.0 still answers (deprecated in favour of $collStats).
func (s *Server) cmdCollStats(ctx context.Context, _ *conn, r *request) (bson.D, error) {
	ns, err := collNS(r)
	if err != nil {
		return nil, err
	}
	scale, err := statsScale(r.cmd.Lookup("scale"), "scale")
	if err != nil {
		return nil, err
	}
	st, err := s.storageStats(ctx, ns, scale)
	if err != nil {
		return nil, err
	}
	return append(bson.D{{Key: "ns", Value: ns.String()}}, st...), nil
}

// collStatsStage runs a pipeline whose first stage is $collStats: one
// document {ns, host, localTime, storageStats?, count?} for the
// collection, then the rest of the pipeline over it.
func (s *Server) collStatsStage(ctx context.Context, ns store.Namespace, stages []bson.Raw) ([]bson.Raw, error) {
	spec, ok := stages[0].Index(0).Value().DocumentOK()
	if !ok {
		return nil, mongoerr.New(5447000, "$collStats must take a nested object but found: %s", stages[0].Index(0).Value())
	}
	host, _ := os.Hostname()
	_, port, _ := net.SplitHostPort(s.addr)
	out := bson.D{
		{Key: "ns", Value: ns.String()},
		{Key: "host", Value: net.JoinHostPort(host, port)},
		{Key: "localTime", Value: bson.NewDateTimeFromTime(time.Now())},
	}
	elems, _ := spec.Elements()
	for _, e := range elems {
		switch e.Key() {
		case "storageStats":
			opts, ok := e.Value().DocumentOK()
			if !ok {
				return nil, mongoerr.New(mongoerr.TypeMismatch, "BSON field '$collStats.storageStats' is the wrong type '%s', expected type 'object'", typeName(e.Value().Type))
			}
			scale, err := statsScale(opts.Lookup("scale"), "$collStats.storageStats.scale")
			if err != nil {
				return nil, err
			}
			st, err := s.storageStats(ctx, ns, scale)
			if err != nil {
				return nil, mongoerr.New(mongoerr.NamespaceNotFound, "Unable to retrieve storageStats in $collStats stage :: caused by :: %s", asMongoErr(err).Message)
			}
			out = append(out, bson.E{Key: "storageStats", Value: st})
		case "count":
			if ns == oplogNS {
				n, _, _ := s.data(ctx).Oplog().Stats()
				out = append(out, bson.E{Key: "count", Value: appendNumber(int64(n))})
				continue
			}
			if _, ok := s.data(ctx).Collection(ns); !ok {
				return nil, mongoerr.New(mongoerr.NamespaceNotFound, "Unable to retrieve count in $collStats stage :: caused by :: Collection [%s] not found.", ns)
			}
			n, err := s.data(ctx).Count(ns, nil, 0, 0)
			if err != nil {
				return nil, err
			}
			out = append(out, bson.E{Key: "count", Value: appendNumber(n)})
		case "latencyStats", "queryExecStats":
			// Not tracked: reported as empty.
			out = append(out, bson.E{Key: e.Key(), Value: bson.D{}})
		default:
			return nil, mongoerr.New(codeUnknownField, "BSON field '$collStats.%s' is an unknown field.", e.Key())
		}
	}
	doc, err := bson.Marshal(out)
	if err != nil {
		return nil, err
	}
	if len(stages) == 1 {
		return []bson.Raw{doc}, nil
	}
	p, err := mql.CompilePipeline(stages[1:])
	if err != nil {
		return nil, err
	}
	return p.Run(dbEnv{s.data(ctx), ns.DB}, []bson.Raw{doc})
}

// dbEnv serves $lookup's reads of other collections of one database.
type dbEnv struct {
	store dataStore
	db    string
}

func (e dbEnv) Collection(name string) ([]bson.Raw, error) {
	return e.store.Find(store.Namespace{DB: e.db, Coll: name}, store.FindSpec{})
}

// appendNumber is an int32 when n fits, an int64 otherwise, as mongod's
// BSONObjBuilder::appendNumber writes sizes and counts.
func appendNumber(n int64) any {
	if n >= -1<<31 && n < 1<<31 {
		return int32(n)
	}
	return n
}
