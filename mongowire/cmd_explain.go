package mongowire

import (
	"context"
	"net"
	"os"
	"strconv"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/tide-cdc/tide/mongowire/internal/mongoerr"
	"github.com/tide-cdc/tide/mongowire/internal/mql"
	"github.com/tide-cdc/tide/mongowire/internal/store"
)

// cmdExplain: {explain: {find | count | distinct: ...}, verbosity} ->
// {explainVersion, queryPlanner: {namespace, winningPlan, rejectedPlans},
// executionStats?, command, serverInfo}, the shape mongosh's .explain()
// and drivers read. The winning plan is the store's: an IXSCAN under a
// FETCH when an index serves the filter, a COLLSCAN otherwise, under the
// SORT, SKIP, LIMIT and PROJECTION stages the query asks for.
func (s *Server) cmdExplain(ctx context.Context, _ *conn, r *request) (bson.D, error) {
	inner, ok := r.cmd.Index(0).Value().DocumentOK()
	if !ok {
		return nil, typeMismatch("explain", "explain", r.cmd.Index(0).Value(), "object")
	}
	verbosity := "allPlansExecution"
	if v, err := r.cmd.LookupErr("verbosity"); err == nil {
		str, ok := v.StringValueOK()
		if !ok || str != "queryPlanner" && str != "executionStats" && str != "allPlansExecution" {
			return nil, mongoerr.New(mongoerr.BadValue, "verbosity string must be one of {'queryPlanner', 'executionStats', 'allPlansExecution'}")
		}
		verbosity = str
	}
	first, err := inner.IndexErr(0)
	if err != nil {
		return nil, mongoerr.New(mongoerr.FailedToParse, "explain command requires a nested object")
	}
	sub := &request{name: canonicalCommand(first.Key()), db: r.db, cmd: inner}
	if dbv, err := inner.LookupErr("$db"); err == nil {
		if db, ok := dbv.StringValueOK(); ok {
			sub.db = db
		}
	}
	var (
		spec     store.FindSpec
		nsErr    error
		ns       store.Namespace
		wrapping []bson.E // stages above the scan, outermost first
	)
	switch sub.name {
	case "find":
		ns, nsErr = collNS(sub)
		a := newArgs(sub)
		spec = store.FindSpec{Filter: a.doc("filter"), Sort: a.doc("sort"), Projection: a.doc("projection"), Collation: collationArg(inner)}
		spec.Skip, _ = a.int64("skip")
		spec.Limit, _ = a.int64("limit")
		if a.err != nil {
			return nil, a.err
		}
		if len(spec.Projection) > 0 {
			wrapping = append(wrapping, bson.E{Key: "PROJECTION_DEFAULT", Value: bson.D{{Key: "transformBy", Value: spec.Projection}}})
		}
		if spec.Limit > 0 {
			wrapping = append(wrapping, bson.E{Key: "LIMIT", Value: bson.D{{Key: "limitAmount", Value: spec.Limit}}})
		}
		if spec.Skip > 0 {
			wrapping = append(wrapping, bson.E{Key: "SKIP", Value: bson.D{{Key: "skipAmount", Value: spec.Skip}}})
		}
		if len(spec.Sort) > 0 {
			wrapping = append(wrapping, bson.E{Key: "SORT", Value: bson.D{{Key: "sortPattern", Value: spec.Sort}, {Key: "memLimit", Value: int32(104857600)}, {Key: "type", Value: "simple"}}})
		}
	case "count":
		ns, nsErr = collNS(sub)
		a := newArgs(sub)
		spec = store.FindSpec{Filter: a.doc("query"), Collation: collationArg(inner)}
		if a.err != nil {
			return nil, a.err
		}
		wrapping = append(wrapping, bson.E{Key: "COUNT", Value: bson.D{}})
	case "distinct":
		ns, nsErr = collNS(sub)
		a := newArgs(sub)
		spec = store.FindSpec{Filter: a.doc("query"), Collation: collationArg(inner)}
		if a.err != nil {
			return nil, a.err
		}
	case "aggregate":
		return s.explainAggregate(ctx, sub, inner, verbosity)
	default:
		if _, known := s.commands[sub.name]; !known {
			return nil, mongoerr.New(mongoerr.CommandNotFound, "Explain failed due to unknown command: %s", sub.name)
		}
		return nil, mongoerr.New(mongoerr.CommandNotSupported, "explain of %s is not supported by this server (find, count, distinct and aggregate are)", sub.name)
	}
	if nsErr != nil {
		return nil, nsErr
	}
	if fs, ok := commandFields[sub.name]; ok {
		if err := fs.check(sub.name, inner, true); err != nil {
			return nil, err
		}
	}

	plan, err := s.explainFind(ctx, ns, spec, wrapping, verbosity)
	if err != nil {
		return nil, err
	}
	reply := append(bson.D{{Key: "explainVersion", Value: "1"}}, plan...)
	return append(reply, s.explainTrailer(inner)...), nil
}

// explainFind is the queryPlanner (and executionStats unless verbosity is
// queryPlanner) of a find-like read with the given stages above its scan.
func (s *Server) explainFind(ctx context.Context, ns store.Namespace, spec store.FindSpec, wrapping []bson.E, verbosity string) (bson.D, error) {
	start := time.Now()
	plan, err := s.data(ctx).Explain(ns, store.FindSpec{Filter: spec.Filter, Sort: spec.Sort, Skip: spec.Skip, Limit: spec.Limit, Collation: spec.Collation})
	if err != nil {
		return nil, err
	}
	_, backward := s.indexSorts(ctx, ns, plan.Index, spec.Sort)
	scan, err := s.scanStage(ctx, ns, spec.Filter, plan, backward)
	if err != nil {
		return nil, err
	}
	winning := scan
	for i := len(wrapping) - 1; i >= 0; i-- {
		if sorts, _ := s.indexSorts(ctx, ns, plan.Index, spec.Sort); sorts && wrapping[i].Key == "SORT" {
			continue // the index walk yields the order: no SORT stage
		}
		st := append(bson.D{{Key: "stage", Value: wrapping[i].Key}}, wrapping[i].Value.(bson.D)...)
		winning = append(st, bson.E{Key: "inputStage", Value: winning})
	}
	reply := bson.D{
		{Key: "queryPlanner", Value: bson.D{
			{Key: "namespace", Value: ns.String()},
			{Key: "indexFilterSet", Value: false},
			{Key: "parsedQuery", Value: orEmpty(spec.Filter)},
			{Key: "maxIndexedOrSolutionsReached", Value: false},
			{Key: "maxIndexedAndSolutionsReached", Value: false},
			{Key: "maxScansToExplodeReached", Value: false},
			{Key: "winningPlan", Value: winning},
			{Key: "rejectedPlans", Value: bson.A{}},
		}},
	}
	if verbosity != "queryPlanner" {
		docs, err := s.data(ctx).Find(ns, store.FindSpec{Filter: spec.Filter, Sort: spec.Sort, Skip: spec.Skip, Limit: spec.Limit, Collation: spec.Collation})
		if err != nil {
			return nil, err
		}
		reply = append(reply, bson.E{Key: "executionStats", Value: bson.D{
			{Key: "executionSuccess", Value: true},
			{Key: "nReturned", Value: int32(len(docs))},
			{Key: "executionTimeMillis", Value: int32(time.Since(start).Milliseconds())},
			{Key: "totalKeysExamined", Value: int32(plan.KeysExamined)},
			{Key: "totalDocsExamined", Value: int32(plan.DocsExamined)},
			{Key: "executionStages", Value: winning},
		}})
	}
	return reply, nil
}

// explainTrailer is the end of every explain reply: the command explained
// and the server.
func (s *Server) explainTrailer(inner bson.Raw) bson.D {
	host, _ := os.Hostname()
	_, portStr, _ := net.SplitHostPort(s.addr)
	port, _ := strconv.Atoi(portStr)
	return bson.D{
		{Key: "command", Value: inner},
		{Key: "serverInfo", Value: bson.D{
			{Key: "host", Value: host},
			{Key: "port", Value: int32(port)},
			{Key: "version", Value: serverVersion},
			{Key: "gitVersion", Value: gitVersion},
		}},
	}
}

// explainAggregate explains an aggregate as mongod does when the pipeline
// is not pushed down whole: {stages: [{$cursor: {queryPlanner...}}, the
// other stages]}, the $cursor reading the collection with the filter of
// a leading $match.
func (s *Server) explainAggregate(ctx context.Context, sub *request, inner bson.Raw, verbosity string) (bson.D, error) {
	ns, err := collNS(sub)
	if err != nil {
		return nil, mongoerr.New(mongoerr.CommandNotSupported, "explain of a database-level aggregate is not supported by this server")
	}
	if err := commandFields["aggregate"].check("aggregate", inner, true); err != nil {
		return nil, err
	}
	a := newArgs(sub)
	stages := a.docs("pipeline")
	if a.err != nil {
		return nil, a.err
	}
	if _, err := inner.LookupErr("pipeline"); err != nil {
		return nil, missingField("aggregate.pipeline")
	}
	if _, err := mql.CompilePipeline(stages); err != nil {
		return nil, err
	}
	var spec store.FindSpec
	rest := stages
	if len(stages) > 0 {
		if m, ok := stages[0].Lookup("$match").DocumentOK(); ok {
			spec.Filter, rest = m, stages[1:]
		}
	}
	cur, err := s.explainFind(ctx, ns, spec, nil, verbosity)
	if err != nil {
		return nil, err
	}
	out := bson.A{bson.D{{Key: "$cursor", Value: cur}}}
	for _, st := range rest {
		out = append(out, st)
	}
	reply := bson.D{{Key: "explainVersion", Value: "1"}, {Key: "stages", Value: out}}
	return append(reply, s.explainTrailer(inner)...), nil
}

// scanStage describes how the store reads the documents: IXSCAN under
// FETCH for an index, COLLSCAN otherwise.
func (s *Server) scanStage(ctx context.Context, ns store.Namespace, filter bson.Raw, plan store.Plan, backward bool) (bson.D, error) {
	if plan.Index == "" {
		return bson.D{{Key: "stage", Value: "COLLSCAN"}, {Key: "filter", Value: orEmpty(filter)}, {Key: "direction", Value: "forward"}}, nil
	}
	direction := "forward"
	if backward {
		direction = "backward"
	}
	var spec store.IndexSpec
	specs, err := s.data(ctx).ListIndexes(ns)
	if err != nil {
		return nil, err
	}
	for _, sp := range specs {
		if sp.Name == plan.Index {
			spec = sp
		}
	}
	ixscan := bson.D{
		{Key: "stage", Value: "IXSCAN"},
		{Key: "keyPattern", Value: spec.Key},
		{Key: "indexName", Value: plan.Index},
	}
	for _, o := range spec.Options {
		if o.Key == "collation" { // as mongod shows an index's collation
			ixscan = append(ixscan, o)
		}
	}
	ixscan = append(ixscan,
		bson.E{Key: "isMultiKey", Value: false},
		bson.E{Key: "isUnique", Value: spec.Unique},
		bson.E{Key: "isSparse", Value: spec.Sparse},
		bson.E{Key: "isPartial", Value: false},
		bson.E{Key: "indexVersion", Value: int32(2)},
		bson.E{Key: "direction", Value: direction},
	)
	return bson.D{
		{Key: "stage", Value: "FETCH"},
		{Key: "filter", Value: orEmpty(filter)},
		{Key: "inputStage", Value: ixscan},
	}, nil
}

func orEmpty(d bson.Raw) any {
	if len(d) == 0 {
		return bson.D{}
	}
	return d
}

// indexSorts reports whether walking the named index yields the sort
// order — the sort's fields are a prefix of the key, with all directions
// the same (a forward walk) or all reversed (backward).
func (s *Server) indexSorts(ctx context.Context, ns store.Namespace, index string, sort bson.Raw) (sorts, backward bool) {
	if index == "" || len(sort) == 0 {
		return false, false
	}
	specs, err := s.data(ctx).ListIndexes(ns)
	if err != nil {
		return false, false
	}
	var key bson.D
	for _, sp := range specs {
		if sp.Name == index {
			key = sp.Key
		}
	}
	elems, err := sort.Elements()
	if err != nil || len(elems) == 0 || len(elems) > len(key) {
		return false, false
	}
	flip := 0 // 1 same direction, -1 reversed
	for i, e := range elems {
		if e.Key() != key[i].Key {
			return false, false
		}
		sd, ok := e.Value().AsFloat64OK()
		kd, ok2 := keyDirection(key[i].Value)
		if !ok || !ok2 {
			return false, false
		}
		dir := 1
		if (sd < 0) != (kd < 0) {
			dir = -1
		}
		if flip == 0 {
			flip = dir
		} else if flip != dir {
			return false, false
		}
	}
	return true, flip < 0
}

// keyDirection is the numeric direction of a key pattern value.
func keyDirection(v any) (float64, bool) {
	b, err := bson.Marshal(bson.D{{Key: "v", Value: v}})
	if err != nil {
		return 0, false
	}
	return bson.Raw(b).Lookup("v").AsFloat64OK()
}
