package mongo

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"
	"golang.org/x/sync/errgroup"

	"github.com/tide-cdc/tide/cdc"
	"github.com/tide-cdc/tide/internal/retry"
	"github.com/tide-cdc/tide/internal/sinkcheckpoint"
)

// run is a stretch of staged items written together: in one transaction
// when the sink keeps the checkpoint. Runs end at a DDL item (applied
// between runs, outside any transaction, as MongoDB requires) and where a
// transaction would exceed its limits.
type run struct {
	from, to int    // items[from:to], none of them DDL
	ckpt     []byte // the checkpoint its transaction writes; nil if none
	letters  bool   // it writes the pipeline's dead letters: the batch's last run
}

// Commit writes what was put since the last Commit and, when the sink
// keeps the checkpoint, next, in transactions. A Commit that fails drops
// the batch: the pipeline stops, and the batch is read again after a
// restart.
func (s *Sink) Commit(ctx context.Context, next cdc.Checkpoint) error {
	if !s.opened {
		return errors.New("mongo sink: Commit before Open")
	}
	defer s.stage.reset()
	items := s.stage.items
	if !s.keepsCheckpoint() && len(items) == 0 && len(s.stage.letters) == 0 {
		return nil // a batch of markers only
	}
	var final []byte
	if s.keepsCheckpoint() {
		var err error
		if final, err = sinkcheckpoint.Marshal(next); err != nil {
			return fmt.Errorf("mongo sink: %w", err)
		}
	}
	// Cut the batch into runs and DDL items. A run before a DDL item, or
	// before a cut at a transaction's limit, commits the checkpoint of its
	// own last record, so that a crash between two transactions resumes
	// after what the first one wrote; the last run commits next, even if
	// empty.
	from, writes, size := 0, 0, 0
	flush := func(to int, last bool) error {
		r := run{from: from, to: to, letters: last && len(s.stage.letters) > 0}
		from, writes, size = to, 0, 0
		if s.keepsCheckpoint() {
			switch {
			case last:
				r.ckpt = final
			case r.to > r.from:
				cp := next
				cp.Source = items[r.to-1].pos
				b, err := sinkcheckpoint.Marshal(cp)
				if err != nil {
					return fmt.Errorf("mongo sink: %w", err)
				}
				r.ckpt = b
			}
		}
		if r.to == r.from && r.ckpt == nil && !r.letters {
			return nil
		}
		return s.write(ctx, r)
	}
	for i := range items {
		it := &items[i]
		if it.kind != itemWrite {
			if err := flush(i, false); err != nil {
				return err
			}
			if err := s.applyDDL(ctx, it); err != nil {
				return err
			}
			from = i + 1
			continue
		}
		n := len(it.doc) + len(it.key)
		if s.keepsCheckpoint() && writes > 0 && (writes+1 > s.cfg.MaxTransactionWrites || size+n > s.cfg.MaxTransactionBytes) {
			if err := flush(i, false); err != nil {
				return err
			}
		}
		writes++
		size += n
	}
	if err := flush(len(items), true); err != nil {
		return err
	}
	if final != nil {
		s.ckpts.ledger.Committed(final)
	}
	return nil
}

// nsWrites is the bulk write of one target collection in a run.
type nsWrites struct {
	target target
	models []mongo.WriteModel
	items  []int // index in stage.items of each model
}

// runState is what attempts at a run learn and keep: items the target
// refused (dead letters) and, in append mode, items already there.
type runState struct {
	dead   map[int]error
	exists map[int]bool
	probe  bool // append: look up which _ids exist before writing (after a duplicate inside a transaction)
}

// models builds the run's bulk writes, one per target collection in
// order of first use. In mirror mode only the last change of each
// document is written.
func (s *Sink) models(r run, rs *runState) []*nsWrites {
	items := s.stage.items[r.from:r.to]
	var last map[string]int // mirror: target + key -> index of the last change
	if s.stage.mirror {
		last = make(map[string]int, len(items))
		for i := range items {
			last[items[i].target.String()+"\x00"+string(items[i].key)] = r.from + i
		}
	}
	byTarget := map[target]*nsWrites{}
	var out []*nsWrites
	for i := range items {
		idx := r.from + i
		it := &items[i]
		if rs.dead[idx] != nil || rs.exists[idx] {
			continue
		}
		if last != nil && last[it.target.String()+"\x00"+string(it.key)] != idx {
			continue
		}
		w := byTarget[it.target]
		if w == nil {
			w = &nsWrites{target: it.target}
			byTarget[it.target] = w
			out = append(out, w)
		}
		var m mongo.WriteModel
		switch {
		case !s.stage.mirror:
			m = mongo.NewInsertOneModel().SetDocument(it.doc)
		case it.doc == nil:
			m = mongo.NewDeleteOneModel().SetFilter(it.key)
		default:
			m = mongo.NewReplaceOneModel().SetFilter(it.key).SetReplacement(it.doc).SetUpsert(true)
		}
		w.models = append(w.models, m)
		w.items = append(w.items, idx)
	}
	return out
}

// write writes run r, retrying transient errors with backoff for up to
// RetryTimeout.
func (s *Sink) write(ctx context.Context, r run) error {
	rs := &runState{dead: map[int]error{}, exists: map[int]bool{}}
	start := time.Now()
	wait := 50 * time.Millisecond
	uncertain := false
	for attempt := 1; ; attempt++ {
		var err error
		if r.ckpt != nil {
			err = s.transaction(ctx, r, rs, uncertain)
		} else {
			err = s.plain(ctx, r, rs)
		}
		if err == nil {
			if attempt > 1 {
				s.reportRetry(0, nil)
			}
			return nil
		}
		if errors.Is(err, errRetryNow) {
			continue // learned which documents to leave out; not a failure
		}
		if hasLabel(err, "UnknownTransactionCommitResult") {
			uncertain = true
		}
		if !transient(err) || ctx.Err() != nil {
			return err
		}
		if time.Since(start) > s.cfg.RetryTimeout {
			return fmt.Errorf("mongo sink: %d changes not written after %d attempts in %s: %w",
				r.to-r.from, attempt, time.Since(start).Round(time.Millisecond), err)
		}
		s.retries.Add(1)
		s.reportRetry(attempt, err)
		s.log.Warn("retrying writes", "attempt", attempt, "changes", r.to-r.from, "err", err)
		if err := retry.Sleep(ctx, retry.Jitter(wait)); err != nil {
			return err
		}
		wait = min(2*wait, 5*time.Second)
	}
}

// errRetryNow says that an attempt learned which documents to leave out
// (refused ones, duplicates) and the run is to be tried again at once.
var errRetryNow = errors.New("retry now")

// errFenced is a checkpoint whose epoch moved on: another tide took the
// pipeline over.
var errFenced = errors.New("another tide took over the pipeline")

// plain writes run r without a transaction (the sink does not keep the
// checkpoint): bulk writes per target collection, unordered ones in
// parallel. A replay is harmless: replacements and deletes by _id are
// idempotent, and a replayed append is a duplicate _id, ignored.
func (s *Sink) plain(ctx context.Context, r run, rs *runState) error {
	ws := s.models(r, rs)
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(4)
	results := make([][]writeIssue, 0, len(ws))
	type chunk struct {
		w          *nsWrites
		lo, hi     int
		resultSlot int
	}
	var chunks []chunk
	size := len(s.stage.items) // ordered: one bulk write per collection
	if !s.ordered {
		size = 1000
	}
	for _, w := range ws {
		for lo := 0; lo < len(w.models); lo += size {
			chunks = append(chunks, chunk{w, lo, min(lo+size, len(w.models)), len(results)})
			results = append(results, nil)
		}
	}
	for _, c := range chunks {
		g.Go(func() error {
			coll := s.client.Database(c.w.target.db).Collection(c.w.target.coll)
			_, err := coll.BulkWrite(gctx, c.w.models[c.lo:c.hi], options.BulkWrite().SetOrdered(s.ordered))
			issues, err := s.writeIssues(err, c.w, c.lo)
			results[c.resultSlot] = issues
			return err
		})
	}
	if err := g.Wait(); err != nil {
		return err
	}
	again := false
	var dead []int
	for _, issues := range results {
		for _, is := range issues {
			if is.duplicate {
				rs.exists[is.item] = true
			} else {
				rs.dead[is.item] = is.err
				dead = append(dead, is.item)
			}
			again = again || s.ordered // an ordered write stopped there
		}
	}
	if len(dead) > 0 {
		if err := s.deadLetters(ctx, dead, rs); err != nil {
			return err
		}
	}
	if again {
		return errRetryNow
	}
	if r.letters {
		return s.writePipelineLetters(ctx) // upserts by _id: a replay is harmless
	}
	return nil
}

// writeIssue is a document-level write error the sink handles: a
// duplicate _id of an appended document (a replay), or a document the
// target refused, for the dead-letter collection.
type writeIssue struct {
	item      int
	duplicate bool
	err       error
}

// writeIssues sorts the error of a bulk write of w.models[lo:]: nil if
// every write error is one the sink handles (returned as issues); else
// the error to fail or retry with, naming the namespace and _id of a
// refused document.
func (s *Sink) writeIssues(err error, w *nsWrites, lo int) ([]writeIssue, error) {
	var bwe mongo.BulkWriteException
	if err == nil || !errors.As(err, &bwe) || len(bwe.WriteErrors) == 0 {
		return nil, err
	}
	if bwe.WriteConcernError != nil || len(bwe.Labels) > 0 {
		return nil, err // retried whole
	}
	var issues []writeIssue
	for _, we := range bwe.WriteErrors {
		idx := w.items[lo+we.Index]
		it := &s.stage.items[idx]
		if transientCode(we.Code) {
			return nil, err
		}
		if !s.stage.mirror && we.Code == codeDuplicateKey && duplicateID(we) {
			issues = append(issues, writeIssue{item: idx, duplicate: true})
			continue
		}
		werr := fmt.Errorf("mongo sink: %s refused the %s of _id %s (source %s, position %s): %s (code %d)",
			w.target, it.op, describeID(it.keyValue), it.ns, it.pos, we.Message, we.Code)
		if s.cfg.OnWriteError != OnWriteErrorDeadLetter {
			return nil, &refusedError{werr}
		}
		issues = append(issues, writeIssue{item: idx, err: werr})
	}
	return issues, nil
}

// refusedError is a document the target refused, with no dead-letter
// collection to put it in: a retry cannot help.
type refusedError struct{ err error }

func (e *refusedError) Error() string { return e.err.Error() }
func (e *refusedError) Unwrap() error { return e.err }

const codeDuplicateKey = 11000

// duplicateID reports whether a duplicate-key error is about _id (the
// replay of an appended document), not another unique index.
func duplicateID(we mongo.BulkWriteError) bool {
	if kp, ok := we.Details.Lookup("keyPattern").DocumentOK(); ok {
		elems, _ := kp.Elements()
		return len(elems) == 1 && elems[0].Key() == "_id"
	}
	return true // servers that do not say which index: the _id is the only one tide relies on
}

func describeID(v bson.RawValue) string {
	if v.Type == 0 {
		return "(none)"
	}
	b, err := bson.MarshalExtJSON(bson.D{{Key: "v", Value: v}}, false, false) // relaxed: 2, not {"$numberInt":"2"}
	if err != nil {
		return v.String()
	}
	return strings.TrimSuffix(strings.TrimPrefix(string(b), `{"v":`), "}")
}

// deadLetters writes the refused items to the dead-letter collection, in
// the transaction of ctx when it holds one.
func (s *Sink) deadLetters(ctx context.Context, idxs []int, rs *runState) error {
	coll := s.deadLetterCollection()
	models := make([]mongo.WriteModel, 0, len(idxs))
	slices.Sort(idxs)
	for _, idx := range idxs {
		it := &s.stage.items[idx]
		doc := bson.D{
			{Key: "_id", Value: appendID(s.cfg.Pipeline, it.pos)},
			{Key: "pipeline", Value: s.cfg.Pipeline},
			{Key: "namespace", Value: it.ns},
			{Key: "target", Value: it.target.String()},
			{Key: "op", Value: string(it.op)},
			{Key: "position", Value: string(it.pos)},
			{Key: "document_key", Value: rawOrNil(it.key)},
			{Key: "document", Value: rawOrNil(it.doc)},
			{Key: "stage", Value: "sink"},
			{Key: "error", Value: rs.dead[idx].Error()},
			{Key: "at", Value: bson.DateTime(time.Now().UnixMilli())},
		}
		models = append(models, mongo.NewReplaceOneModel().SetFilter(bson.D{{Key: "_id", Value: doc[0].Value}}).SetReplacement(doc).SetUpsert(true))
	}
	return s.writeLetters(ctx, coll, models)
}

func (s *Sink) deadLetterCollection() *mongo.Collection {
	db, coll := s.cfg.CheckpointDatabase, s.cfg.DeadLetter
	if coll == "" {
		coll = DefaultDeadLetter
	}
	if d, c, ok := cutNamespace(s.cfg.DeadLetter); ok {
		db, coll = d, c
	}
	return s.client.Database(db).Collection(coll)
}

// transaction makes one attempt at writing run r and its checkpoint in
// one transaction. uncertain says that an earlier attempt's commit
// outcome is unknown: the checkpoint document, read in the transaction,
// tells whether it committed.
func (s *Sink) transaction(ctx context.Context, r run, rs *runState, uncertain bool) error {
	if err := s.ensureCollections(ctx, r); err != nil {
		return err
	}
	sess := s.sess
	if err := sess.StartTransaction(); err != nil {
		return fmt.Errorf("mongo sink: start transaction: %w", err)
	}
	sctx := mongo.NewSessionContext(ctx, sess)
	abort := func(err error) error {
		actx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
		defer cancel()
		_ = sess.AbortTransaction(mongo.NewSessionContext(actx, sess)) // the error that made us abort is the one to report
		return err
	}
	ckColl := s.checkpointCollection()
	if uncertain {
		var doc struct {
			Checkpoint string `bson:"checkpoint"`
		}
		err := ckColl.FindOne(sctx, bson.D{{Key: "_id", Value: s.cfg.Pipeline}}).Decode(&doc)
		if err != nil && !errors.Is(err, mongo.ErrNoDocuments) {
			return abort(fmt.Errorf("mongo sink: read the checkpoint to learn whether a commit of unknown outcome happened: %w", err))
		}
		if doc.Checkpoint == string(r.ckpt) {
			s.log.Info("commit of unknown outcome had succeeded; not writing the changes again", "changes", r.to-r.from)
			s.resolved.Add(1)
			return abort(nil)
		}
		s.log.Info("commit of unknown outcome had not succeeded; writing the changes again", "changes", r.to-r.from)
	}
	ws := s.models(r, rs)
	if rs.probe {
		if err := s.probeExisting(sctx, ws, rs); err != nil {
			return abort(err)
		}
		ws = s.models(r, rs)
	}
	for _, w := range ws {
		coll := s.client.Database(w.target.db).Collection(w.target.coll)
		_, err := coll.BulkWrite(sctx, w.models, options.BulkWrite().SetOrdered(s.ordered))
		issues, err := s.writeIssues(err, w, 0)
		if re := (*refusedError)(nil); errors.As(err, &re) {
			return abort(err) // names the collection already
		}
		if err != nil {
			return abort(fmt.Errorf("mongo sink: write %s: %w", w.target, err))
		}
		if len(issues) > 0 {
			// A write error aborts a transaction: note what to leave out
			// and try again. Only the first error is the server's verdict
			// on its document; after it the transaction was aborted.
			is := slices.MinFunc(issues, func(a, b writeIssue) int { return a.item - b.item })
			if is.duplicate {
				rs.probe = true
			} else {
				rs.dead[is.item] = is.err
			}
			return abort(errRetryNow)
		}
	}
	var dead []int
	for idx := range rs.dead {
		if idx >= r.from && idx < r.to {
			dead = append(dead, idx)
		}
	}
	if len(dead) > 0 {
		if err := s.deadLetters(sctx, dead, rs); err != nil {
			return abort(err)
		}
	}
	if r.letters {
		if err := s.writePipelineLetters(sctx); err != nil {
			return abort(err)
		}
	}
	res, err := ckColl.UpdateOne(sctx, bson.D{{Key: "_id", Value: s.cfg.Pipeline}, {Key: "epoch", Value: s.epoch}},
		bson.D{{Key: "$set", Value: bson.D{{Key: "checkpoint", Value: string(r.ckpt)}, {Key: "updated_at", Value: bson.DateTime(time.Now().UnixMilli())}}}})
	if err != nil {
		return abort(fmt.Errorf("mongo sink: write checkpoint of %q to %s.%s: %w", s.cfg.Pipeline, s.cfg.CheckpointDatabase, CheckpointCollection, err))
	}
	if res.MatchedCount == 0 {
		return abort(fmt.Errorf("mongo sink: checkpoint of %q in %s.%s: %w since this one started (its epoch is no longer %d, or the document was deleted); this one stops",
			s.cfg.Pipeline, s.cfg.CheckpointDatabase, CheckpointCollection, errFenced, s.epoch))
	}
	if err := sess.CommitTransaction(sctx); err != nil {
		return fmt.Errorf("mongo sink: commit transaction of %d changes: %w", r.to-r.from, err)
	}
	s.txns.Add(1)
	s.deadLettered.Add(int64(len(dead)))
	if r.letters {
		s.deadLettered.Add(int64(len(s.stage.letters)))
	}
	return nil
}

// probeExisting marks the appended documents of ws that the target
// already holds (written before a checkpoint was moved back).
func (s *Sink) probeExisting(ctx context.Context, ws []*nsWrites, rs *runState) error {
	for _, w := range ws {
		ids := make(bson.A, 0, len(w.items))
		byID := make(map[string]int, len(w.items))
		for _, idx := range w.items {
			it := &s.stage.items[idx]
			id, _ := it.keyValue.StringValueOK()
			ids = append(ids, id)
			byID[id] = idx
		}
		coll := s.client.Database(w.target.db).Collection(w.target.coll)
		cur, err := coll.Find(ctx, bson.D{{Key: "_id", Value: bson.D{{Key: "$in", Value: ids}}}}, options.Find().SetProjection(bson.D{{Key: "_id", Value: 1}}))
		if err != nil {
			return fmt.Errorf("mongo sink: look up appended documents in %s: %w", w.target, err)
		}
		for cur.Next(ctx) {
			id, _ := cur.Current.Lookup("_id").StringValueOK()
			if idx, ok := byID[id]; ok {
				rs.exists[idx] = true
			}
		}
		err = cur.Err()
		cur.Close(ctx)
		if err != nil {
			return fmt.Errorf("mongo sink: look up appended documents in %s: %w", w.target, err)
		}
	}
	return nil
}

// ensureCollections creates the run's target collections that this sink
// has not seen yet, before the transaction: creating one inside it is
// refused by servers before 4.4, and racing with another creator aborts
// it.
func (s *Sink) ensureCollections(ctx context.Context, r run) error {
	for i := r.from; i < r.to; i++ {
		t := s.stage.items[i].target
		if s.created[t.String()] {
			continue
		}
		if err := s.createCollection(ctx, t.db, t.coll); err != nil {
			return err
		}
		s.created[t.String()] = true
	}
	if (s.cfg.OnWriteError == OnWriteErrorDeadLetter || r.letters) && !s.created["\x00dead"] {
		c := s.deadLetterCollection()
		if err := s.createCollection(ctx, c.Database().Name(), c.Name()); err != nil {
			return err
		}
		s.created["\x00dead"] = true
	}
	return nil
}

const codeNamespaceExists = 48

func (s *Sink) createCollection(ctx context.Context, db, coll string) error {
	err := s.client.Database(db).CreateCollection(ctx, coll)
	var ce mongo.CommandError
	if err != nil && !(errors.As(err, &ce) && ce.Code == codeNamespaceExists) {
		return fmt.Errorf("mongo sink: create collection %s.%s: %w", db, coll, err)
	}
	return nil
}

const codeNamespaceNotFound = 26

// applyDDL drops or renames a target collection. Both are idempotent
// on replay: a drop of a missing collection and the rename of one that is
// gone already change nothing.
func (s *Sink) applyDDL(ctx context.Context, it *item) error {
	start := time.Now()
	wait := 50 * time.Millisecond
	for {
		var err error
		switch it.kind {
		case itemDrop:
			err = s.client.Database(it.target.db).Collection(it.target.coll).Drop(ctx)
			if err != nil {
				err = fmt.Errorf("mongo sink: drop %s (the source dropped %s at position %s): %w", it.target, it.ns, it.pos, err)
			}
		case itemRename:
			cmd := bson.D{{Key: "renameCollection", Value: it.target.String()}, {Key: "to", Value: it.to.String()}, {Key: "dropTarget", Value: true}}
			err = s.client.Database("admin").RunCommand(ctx, cmd).Err()
			var ce mongo.CommandError
			if errors.As(err, &ce) && ce.Code == codeNamespaceNotFound {
				err = nil
			}
			if err != nil {
				err = fmt.Errorf("mongo sink: rename %s to %s (the source renamed %s at position %s): %w", it.target, it.to, it.ns, it.pos, err)
			}
		}
		if err == nil {
			s.ddlApplied.Add(1)
			delete(s.created, it.target.String())
			delete(s.created, it.to.String())
			s.log.Info("applied a collection event", "op", it.op, "namespace", it.ns, "target", it.target.String())
			return nil
		}
		if !transient(err) || ctx.Err() != nil || time.Since(start) > s.cfg.RetryTimeout {
			return err
		}
		s.retries.Add(1)
		if err := retry.Sleep(ctx, retry.Jitter(wait)); err != nil {
			return err
		}
		wait = min(2*wait, 5*time.Second)
	}
}

// transient reports whether err is worth retrying: a network or
// server-selection problem, a write conflict, a primary stepping down.
func transient(err error) bool {
	var re *refusedError
	if errors.As(err, &re) || errors.Is(err, errFenced) || errors.Is(err, context.Canceled) {
		return false
	}
	if hasLabel(err, "TransientTransactionError") || hasLabel(err, "RetryableWriteError") || hasLabel(err, "UnknownTransactionCommitResult") {
		return true
	}
	if mongo.IsNetworkError(err) || mongo.IsTimeout(err) {
		return true
	}
	var se mongo.ServerError
	if !errors.As(err, &se) {
		var me mongo.MarshalError
		return !errors.As(err, &me) // server selection, connection pool: not the server's verdict
	}
	for _, c := range se.ErrorCodes() {
		if transientCode(c) {
			return true
		}
	}
	return false
}

// transientCode reports the server error codes that a retry may fix.
func transientCode(code int) bool {
	switch code {
	case 6, 7, 89, 91, 189, 262, 9001, 10107, 11600, 11602, 13435, 13436, // network, shutdown, not primary
		112, 24, 251: // WriteConflict, LockTimeout, NoSuchTransaction
		return true
	}
	return false
}

func hasLabel(err error, label string) bool {
	var le mongo.LabeledError
	return errors.As(err, &le) && le.HasErrorLabel(label)
}
