package mongowire

import (
	"context"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/tide-cdc/tide/mongowire/internal/changestream"
	"github.com/tide-cdc/tide/mongowire/internal/mongoerr"
	"github.com/tide-cdc/tide/mongowire/internal/mql"
	"github.com/tide-cdc/tide/mongowire/internal/store"
)

// cmdAggregate: {aggregate: "c" | 1, pipeline, cursor: {batchSize}} ->
// {cursor: {firstBatch, id, ns}}. A pipeline holding $changeStream (first
// or not: a misplaced one gets its error there) goes to the change-stream
// engine; $collStats, $currentOp, $out and $merge are served here; the
// rest is the store's.
func (s *Server) cmdAggregate(ctx context.Context, c *conn, r *request) (bson.D, error) {
	if err := validDB(r.db); err != nil {
		return nil, err
	}
	var ns store.Namespace
	cursorNS := r.db + ".$cmd.aggregate"
	switch v := r.cmd.Index(0).Value(); v.Type {
	case bson.TypeString:
		var err error
		if ns, err = collNS(r); err != nil {
			return nil, err
		}
		cursorNS = ns.String()
	case bson.TypeInt32, bson.TypeInt64, bson.TypeDouble:
		if n, _ := v.AsFloat64OK(); n != 1 {
			return nil, mongoerr.New(mongoerr.FailedToParse, "Invalid command format: the 'aggregate' field must specify a collection name or 1")
		}
		ns = store.Namespace{DB: r.db}
	default:
		return nil, mongoerr.New(mongoerr.FailedToParse, "Invalid command format: the 'aggregate' field must specify a collection name or 1")
	}
	a := newArgs(r)
	stages := a.docs("pipeline")
	explain := a.bool("explain")
	if a.err != nil {
		return nil, a.err
	}
	if _, err := r.cmd.LookupErr("pipeline"); err != nil {
		return nil, missingField("aggregate.pipeline")
	}
	if err := refuseSearchStage(stages); err != nil {
		return nil, err
	}
	let, err := commandLet(r)
	if err != nil {
		return nil, err
	}
	if stages, err = letPipeline(stages, let); err != nil {
		return nil, err
	}
	if err := s.refuseCollatedAggregate(ctx, r, ns, stages); err != nil {
		return nil, err
	}
	if explain { // aggregate's explain: true is the queryPlanner verbosity
		return s.explainAggregate(ctx, r, r.cmd, "queryPlanner")
	}
	if _, err := r.cmd.LookupErr("cursor"); err != nil {
		return nil, mongoerr.New(mongoerr.FailedToParse, "The 'cursor' option is required, except for aggregate with the explain argument")
	}
	batch, err := cursorArg(r)
	if err != nil {
		return nil, err
	}
	lim, err := s.queryLimits(r)
	if err != nil {
		return nil, err
	}
	if stage, err := writeStage(stages); err != nil {
		return nil, err
	} else if stage != "" {
		docs, ok, err := s.writeStageInput(ctx, c, r, ns, stages[:len(stages)-1], lim)
		if err != nil {
			return nil, err
		}
		if ok {
			run := s.runOut
			if stage == "$merge" {
				run = s.runMerge
			}
			bypass := false
			if v, err := r.cmd.LookupErr("bypassDocumentValidation"); err == nil {
				bypass = truthy(v)
			}
			if err := run(ctx, ns.DB, docs, stages[len(stages)-1], bypass); err != nil {
				return nil, err
			}
			return s.openCursor(ctx, cursorNS, &sliceSource{}, cursorOptions{batchSize: batch})
		}
	}
	if docs, ok, err := s.listLocalSessionsStage(c, r, ns.Coll, stages); err != nil {
		return nil, err
	} else if ok {
		if docs, err = s.data(ctx).AggregateDocs(r.db, stages[1:], docs, lim); err != nil {
			return nil, err
		}
		return s.openCursor(ctx, cursorNS, &sliceSource{docs: docs}, cursorOptions{batchSize: batch})
	}
	if docs, ok, err := documentsStage(ns.Coll, stages); err != nil {
		return nil, err
	} else if ok {
		if docs, err = s.data(ctx).AggregateDocs(r.db, stages[1:], docs, lim); err != nil {
			return nil, err
		}
		return s.openCursor(ctx, cursorNS, &sliceSource{docs: docs}, cursorOptions{batchSize: batch})
	}
	if changestream.IsChangeStream(stages) {
		if ns.Coll != "" && s.data(ctx).IsTimeseries(ns) {
			return nil, mongoerr.New(166, "Cannot run aggregation on timeseries with namespace %s", ns) // as mongod: a time-series collection is a view there
		}
		return s.aggregateChangeStream(ctx, r, ns.Coll, cursorNS, batch)
	}
	if len(stages) > 0 && ns.Coll != "" {
		if first, err := stages[0].IndexErr(0); err == nil && first.Key() == "$collStats" {
			docs, err := s.collStatsStage(ctx, ns, stages)
			if err != nil {
				return nil, err
			}
			return s.openCursor(ctx, cursorNS, &sliceSource{docs: docs}, cursorOptions{batchSize: batch})
		}
	}
	if static, ok := s.staticDocs(ctx, ns); ok { // local_db.go
		docs, err := s.data(ctx).AggregateDocs(ns.DB, stages, static, lim)
		if err != nil {
			return nil, err
		}
		return s.openCursor(ctx, cursorNS, &sliceSource{docs: docs}, cursorOptions{batchSize: batch})
	}
	if len(stages) > 0 && stages[0].Index(0).Key() == "$currentOp" { // db.currentOp(): nothing to list
		if r.db != "admin" || ns.Coll != "" {
			return nil, mongoerr.New(mongoerr.InvalidNamespace, "$currentOp must be run against the 'admin' database with {aggregate: 1}")
		}
		return s.openCursor(ctx, cursorNS, &sliceSource{}, cursorOptions{batchSize: batch})
	}
	if at, ok := s.snapshotAt(ctx, r); ok {
		docs, err := s.data(ctx).AggregateAtWith(ns, stages, at, lim, collationArg(r.cmd))
		if err != nil {
			return nil, err
		}
		reply, err := s.openCursor(ctx, cursorNS, &sliceSource{docs: docs}, cursorOptions{batchSize: batch})
		return withAtClusterTime(reply, at), err
	}
	docs, err := s.data(ctx).AggregateWith(ns, stages, lim, collationArg(r.cmd))
	if err != nil {
		return nil, err
	}
	return s.openCursor(ctx, cursorNS, &sliceSource{docs: docs}, cursorOptions{batchSize: batch})
}

func (s *Server) aggregateChangeStream(ctx context.Context, r *request, coll, cursorNS string, batch int64) (bson.D, error) {
	if s.openChangeStream == nil {
		return nil, mongoerr.New(mongoerr.CommandNotSupported, "change streams are not supported yet")
	}
	src, extra, err := s.openChangeStream(ctx, r.db, coll, r.cmd)
	if err != nil {
		return nil, err
	}
	reply, err := s.openCursor(ctx, cursorNS, src, cursorOptions{batchSize: batch, tailable: true, awaitData: true})
	if err != nil {
		return nil, err
	}
	if len(extra) > 0 { // first-reply extras go before id and ns
		cur := reply[0].Value.(bson.D)
		out := append(bson.D{cur[0]}, extra...)
		reply[0].Value = append(out, cur[1:]...)
	}
	return reply, nil
}

// writeStageInput runs the stages before a final $out or $merge: over a
// collection, or from a leading $documents or $listLocalSessions of a
// database-level aggregate. ok is false for a database-level pipeline
// that starts otherwise.
func (s *Server) writeStageInput(ctx context.Context, c *conn, r *request, ns store.Namespace, pre []bson.Raw, lim mql.Limits) (docs []bson.Raw, ok bool, err error) {
	if docs, ok, err := s.listLocalSessionsStage(c, r, ns.Coll, pre); err != nil || ok {
		if err == nil {
			docs, err = s.data(ctx).AggregateDocs(r.db, pre[1:], docs, lim)
		}
		return docs, err == nil, err
	}
	if docs, ok, err := documentsStage(ns.Coll, pre); err != nil || ok {
		if err == nil {
			docs, err = s.data(ctx).AggregateDocs(r.db, pre[1:], docs, lim)
		}
		return docs, err == nil, err
	}
	if ns.Coll == "" {
		return nil, false, nil
	}
	docs, err = s.data(ctx).AggregateWith(ns, pre, lim, collationArg(r.cmd))
	return docs, err == nil, err
}

// refuseCollatedAggregate refuses a non-simple collation where the
// pipeline does not run over a collection's documents through the store
// (which applies it): database-level pipelines, change streams, the
// local and oplog collections, $collStats, and $merge, whose matching on
// its "on" fields would compare binary.
func (s *Server) refuseCollatedAggregate(ctx context.Context, r *request, ns store.Namespace, stages []bson.Raw) error {
	if !nonSimpleCollation(r.cmd) {
		return nil
	}
	_, static := s.staticDocs(ctx, ns)
	first, last := "", ""
	if len(stages) > 0 {
		if e, err := stages[0].IndexErr(0); err == nil {
			first = e.Key()
		}
		if e, err := stages[len(stages)-1].IndexErr(0); err == nil {
			last = e.Key()
		}
	}
	if ns.Coll == "" || static || ns == oplogNS || changestream.IsChangeStream(stages) || first == "$collStats" || last == "$merge" {
		return mongoerr.New(mongoerr.CommandNotSupported, "a non-simple collation is not supported by this server for this pipeline (only over a collection's documents)")
	}
	return nil
}

// nonSimpleCollation reports whether doc gives a collation other than
// the simple one (checkCollation has parsed it).
func nonSimpleCollation(doc bson.Raw) bool {
	v := collationArg(doc)
	if v.Type == 0 {
		return false
	}
	c, err := mql.ParseCollation(v)
	return err != nil || c != nil
}
