package mongo

import (
	"bytes"
	"cmp"
	"context"
	"math"
	"slices"
	"sync/atomic"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo/options"
)

// A single collection's initial snapshot is read by _id ranges, up to
// SnapshotParallelism cursors at once, each a few batches ahead, while the
// reader hands the documents out in _id order, range after range. The
// events, and so every position, are the same as one cursor's: a restart
// resumes after the last _id handed out and splits what is left anew.
// The ranges come from a sample of _ids (splitVector needs a privilege
// many users lack, and is not served by mongos).

// rangeDocs is about how many documents a range holds: small enough that
// the cursors reading ahead are not left idle long enough to time out,
// large enough that a range is many batches. Tests lower it.
var rangeDocs int64 = 50_000

const (
	// maxRanges bounds the split of a very large collection.
	maxRanges = 256
	// samplesPerRange is how many sampled _ids stand for one range.
	samplesPerRange = 8
	// rangeBuffer is how many batches a range's cursor reads ahead.
	rangeBuffer = 2
)

// testRanges is the number of ranges the last split made, for tests.
var testRanges atomic.Int64

// snapRange is the query of one range of the copy.
type snapRange struct{ filter bson.D }

// splitRanges returns the ranges that cover the documents after last (all
// of them when last is unset), in _id order: one when the collection is
// small, parallelism is 1, or its _ids cannot be split.
func (r *reader) splitRanges(ctx context.Context, last bson.RawValue, total int64) []snapRange {
	s := r.s
	whole := []snapRange{{filter: afterFilter(last)}}
	parts := int(min(total/rangeDocs, maxRanges))
	if s.cfg.SnapshotParallelism < 2 || parts < 2 {
		return whole
	}
	cur, err := s.coll.Aggregate(ctx, bson.A{
		bson.D{{Key: "$sample", Value: bson.D{{Key: "size", Value: parts * samplesPerRange}}}},
		bson.D{{Key: "$project", Value: bson.D{{Key: "_id", Value: 1}}}},
	}, options.Aggregate().SetBatchSize(int32(parts*samplesPerRange)))
	if err != nil {
		s.log.Debug("snapshot: cannot sample _ids to split the copy; one cursor", "err", err)
		return whole
	}
	defer cur.Close(context.WithoutCancel(ctx))
	var ids []bson.RawValue
	for cur.Next(ctx) {
		id, err := cur.Current.LookupErr("_id")
		if err != nil {
			return whole
		}
		ids = append(ids, bson.RawValue{Type: id.Type, Value: slices.Clone(id.Value)})
	}
	if cur.Err() != nil || len(ids) < 2 {
		return whole
	}
	// Split on the _ids of the most common class; those of other types
	// sort before or after that class's block, into the first or the last
	// range.
	counts := map[int]int{}
	for _, id := range ids {
		counts[idClass(id)]++
	}
	class := 0
	for c, n := range counts {
		if c != 0 && (class == 0 || n > counts[class] || n == counts[class] && c < class) {
			class = c
		}
	}
	ids = slices.DeleteFunc(ids, func(id bson.RawValue) bool { return idClass(id) != class })
	if class == 0 || last.Type != 0 && idClass(last) != class {
		return whole
	}
	if class == 2 && r.collated(ctx) {
		// Its strings sort by the collation, which compareID does not
		// know: split points out of order would copy documents twice.
		return whole
	}
	slices.SortFunc(ids, compareID)
	ids = slices.CompactFunc(ids, func(a, b bson.RawValue) bool { return compareID(a, b) == 0 })
	if last.Type != 0 {
		ids = slices.DeleteFunc(ids, func(id bson.RawValue) bool { return compareID(id, last) <= 0 })
	}
	// Every samplesPerRange-th sampled _id is a split point.
	var points []bson.RawValue
	for i := samplesPerRange; i < len(ids); i += samplesPerRange {
		points = append(points, ids[i])
	}
	if len(points) == 0 {
		return whole
	}
	testRanges.Store(int64(len(points) + 1))
	// The first and last ranges compare across types ($expr, in sort
	// order), so that _ids of other types sort into them; between split
	// points, all of one type, a plain range uses the _id index.
	out := make([]snapRange, 0, len(points)+1)
	first := bson.D{{Key: "$expr", Value: bson.D{{Key: "$lt", Value: bson.A{"$_id", bson.D{{Key: "$literal", Value: points[0]}}}}}}}
	if last.Type != 0 {
		first = bson.D{{Key: "$and", Value: bson.A{afterFilter(last), first}}}
	}
	out = append(out, snapRange{filter: first})
	for i := 0; i+1 < len(points); i++ {
		out = append(out, snapRange{filter: bson.D{{Key: "_id", Value: bson.D{{Key: "$gte", Value: points[i]}, {Key: "$lt", Value: points[i+1]}}}}})
	}
	out = append(out, snapRange{filter: bson.D{{Key: "$expr", Value: bson.D{{Key: "$gte", Value: bson.A{"$_id", bson.D{{Key: "$literal", Value: points[len(points)-1]}}}}}}}})
	return out
}

// collated reports whether the collection has a default collation (or
// whether that cannot be told), under which its queries and sorts compare
// strings otherwise than by their bytes.
func (r *reader) collated(ctx context.Context) bool {
	specs, err := r.s.coll.Database().ListCollectionSpecifications(ctx, bson.D{{Key: "name", Value: r.s.coll.Name()}})
	if err != nil || len(specs) != 1 {
		return true
	}
	_, err = bson.Raw(specs[0].Options).LookupErr("collation")
	return err == nil
}

// afterFilter is the query of the documents after last in _id sort order
// (all of them when last is unset). $expr compares across BSON types, as
// the sort does; a plain {$gt} would skip _ids of other types.
func afterFilter(last bson.RawValue) bson.D {
	if last.Type == 0 {
		return bson.D{}
	}
	return bson.D{{Key: "$expr", Value: bson.D{{Key: "$gt", Value: bson.A{
		"$_id", bson.D{{Key: "$literal", Value: last}},
	}}}}}
}

// idClass groups the _id types whose values a plain range query compares
// with each other in sort order: numbers, strings, ObjectIds. 0: others.
func idClass(v bson.RawValue) int {
	switch v.Type {
	case bson.TypeInt32, bson.TypeInt64, bson.TypeDouble:
		if f, ok := v.AsFloat64OK(); ok && !math.IsNaN(f) {
			return 1
		}
	case bson.TypeString:
		return 2
	case bson.TypeObjectID:
		return 3
	}
	return 0
}

// compareID orders two _ids of one idClass as MongoDB sorts them (strings
// by their bytes, under the simple collation).
func compareID(a, b bson.RawValue) int {
	switch a.Type {
	case bson.TypeString:
		return cmp.Compare(a.StringValue(), b.StringValue())
	case bson.TypeObjectID:
		x, y := a.ObjectID(), b.ObjectID()
		return bytes.Compare(x[:], y[:])
	}
	if a.Type == bson.TypeInt64 && b.Type == bson.TypeInt64 {
		return cmp.Compare(a.Int64(), b.Int64())
	}
	x, _ := a.AsFloat64OK()
	y, _ := b.AsFloat64OK()
	return cmp.Compare(x, y)
}

// rangeBatch is one batch of a range's cursor, or its end (err set, or
// docs nil and done).
type rangeBatch struct {
	docs []bson.Raw
	err  error
}

// readRange reads one range into out, a batch at a time, and closes it.
func (r *reader) readRange(ctx context.Context, rg snapRange, out chan<- rangeBatch) {
	defer close(out)
	s := r.s
	opts := options.Find().SetSort(bson.D{{Key: "_id", Value: 1}}).SetBatchSize(s.cfg.SnapshotBatch)
	cur, err := s.coll.Find(ctx, rg.filter, opts)
	if err != nil {
		out <- rangeBatch{err: err}
		return
	}
	defer cur.Close(context.WithoutCancel(ctx))
	batch := make([]bson.Raw, 0, s.cfg.SnapshotBatch)
	for cur.Next(ctx) {
		batch = append(batch, slices.Clone(cur.Current))
		if cur.RemainingBatchLength() == 0 {
			select {
			case out <- rangeBatch{docs: batch}:
			case <-ctx.Done():
				return
			}
			batch = make([]bson.Raw, 0, s.cfg.SnapshotBatch)
		}
	}
	if len(batch) > 0 {
		select {
		case out <- rangeBatch{docs: batch}:
		case <-ctx.Done():
			return
		}
	}
	if err := cur.Err(); err != nil {
		select {
		case out <- rangeBatch{err: err}:
		case <-ctx.Done():
		}
	}
}
