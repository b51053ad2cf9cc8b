package mongowire

import (
	"context"
	"errors"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/tide-cdc/tide/mongowire/internal/mongoerr"
	"github.com/tide-cdc/tide/mongowire/internal/mql"
	"github.com/tide-cdc/tide/mongowire/internal/store"
)

// splitNS reads the full namespace ("db.coll") that splitVector and
// dataSize name in their first field.
func splitNS(r *request) (store.Namespace, error) {
	full, ok := r.cmd.Index(0).Value().StringValueOK()
	if !ok {
		return store.Namespace{}, mongoerr.New(mongoerr.InvalidNamespace, "%s needs a namespace string, such as \"db.coll\"", r.name)
	}
	return parseNS(r.name, "target", full)
}

// keyRange reads keyPattern, min and max. keyPattern is required when
// needKey is set.
func keyRange(r *request, needKey bool) (store.KeyRange, bool, error) {
	a := newArgs(r)
	pattern := a.doc("keyPattern")
	lo, hi := a.doc("min"), a.doc("max")
	if a.err != nil {
		return store.KeyRange{}, false, a.err
	}
	if pattern == nil {
		if needKey {
			return store.KeyRange{}, false, missingField(r.name + ".keyPattern")
		}
		return store.KeyRange{}, false, nil
	}
	var d bson.D
	if err := bson.Unmarshal(pattern, &d); err != nil {
		return store.KeyRange{}, false, mongoerr.New(mongoerr.BadValue, "invalid keyPattern: %v", err)
	}
	return store.KeyRange{Pattern: d, Min: lo, Max: hi}, true, nil
}

// cmdSplitVector: {splitVector: "db.coll", keyPattern, min?, max?,
// maxChunkSizeBytes | maxChunkSize (MB), maxSplitPoints?, maxChunkObjects?,
// force?} -> {splitKeys: [...]}. The split rule is mongod's: from the
// collection's document count and data size, a chunk holds
// keyCount = maxChunkSizeBytes / (2 * average document size) keys (or
// maxChunkObjects, if fewer); walking the index over [min, max), a split
// point is taken each time more than keyCount keys were passed since the
// last one, skipping a key equal to the previous split point. force
// splits at the median instead. A collection smaller than one chunk, or
// whose range holds a single key value, has no split points.
func (s *Server) cmdSplitVector(ctx context.Context, _ *conn, r *request) (bson.D, error) {
	ns, err := splitNS(r)
	if err != nil {
		return nil, err
	}
	rng, _, err := keyRange(r, true)
	if err != nil {
		return nil, err
	}
	a := newArgs(r)
	maxBytes, hasBytes := a.int64("maxChunkSizeBytes")
	maxMB, hasMB := a.int64("maxChunkSize")
	maxPoints, _ := a.int64("maxSplitPoints")
	maxObjects, _ := a.int64("maxChunkObjects")
	force := a.bool("force")
	if a.err != nil {
		return nil, a.err
	}
	if !hasBytes && hasMB {
		maxBytes = maxMB << 20
	}
	// The collection's totals first (a walk that stops at once), to size
	// the chunks; then one walk that takes the split points as it goes,
	// holding only them.
	totals, err := s.data(ctx).WalkKeyRange(ns, rng, func([]bson.RawValue, bson.Raw) bool { return false })
	switch {
	case errors.Is(err, store.ErrNoKeyIndex):
		return nil, mongoerr.New(mongoerr.IndexNotFound, "couldn't find index over splitting key %s", patternString(rng.Pattern))
	case err != nil:
		return nil, err
	}
	if force {
		maxBytes = totals.Size
	} else if maxBytes <= 0 {
		return nil, mongoerr.New(mongoerr.InvalidOptions, "need to specify the desired max chunk size (maxChunkSize or maxChunkSizeBytes)")
	}
	var split [][]bson.RawValue
	if totals.Size >= maxBytes && totals.Count > 0 {
		keyCount := maxBytes / (2 * max(totals.Size/totals.Count, 1))
		if maxObjects > 0 && maxObjects < keyCount {
			keyCount = maxObjects
		}
		if force { // a first pass counts the range's keys: split at the median
			var n int64
			if _, err := s.data(ctx).WalkKeyRange(ns, rng, func([]bson.RawValue, bson.Raw) bool { n++; return true }); err != nil {
				return nil, err
			}
			keyCount = n / 2
		}
		split, err = s.splitPoints(ctx, ns, rng, keyCount)
		if err != nil {
			return nil, err
		}
	}
	if maxPoints > 0 && int64(len(split)) > maxPoints {
		split = split[:maxPoints]
	}
	out := make(bson.A, len(split))
	for i, key := range split {
		doc := make(bson.D, len(key))
		for j, v := range key {
			doc[j] = bson.E{Key: rng.Pattern[j].Key, Value: v}
		}
		out[i] = doc
	}
	return bson.D{{Key: "splitKeys", Value: out}}, nil
}

// splitPoints walks the range and applies mongod's split rule: a split
// point each time more than keyCount keys were passed since the last
// one, a key equal to the last split point (the first key, to begin with)
// skipped.
func (s *Server) splitPoints(ctx context.Context, ns store.Namespace, rng store.KeyRange, keyCount int64) ([][]bson.RawValue, error) {
	var split [][]bson.RawValue // split[0] is the first key: a sentinel, dropped below
	var count int64
	_, err := s.data(ctx).WalkKeyRange(ns, rng, func(key []bson.RawValue, _ bson.Raw) bool {
		if split == nil {
			split = [][]bson.RawValue{key}
		}
		count++
		if count > keyCount && compareKeys(key, split[len(split)-1]) != 0 {
			split = append(split, key)
			count = 0
		}
		return true
	})
	if err != nil || len(split) == 0 {
		return nil, err
	}
	return split[1:], nil
}

func compareKeys(a, b []bson.RawValue) int {
	for i := range a {
		if c := mql.Compare(a[i], b[i]); c != 0 {
			return c
		}
	}
	return 0
}

// cmdDataSize: {dataSize: "db.coll", keyPattern?, min?, max?, estimate?,
// maxSize?, maxObjects?} -> {estimate, size, numObjects, millis}. Without
// keyPattern it answers for the whole collection; with one, it walks
// the index over [min, max), summing the documents' sizes (or, with
// estimate, counting them at the average size), stopping past maxSize
// bytes or maxObjects documents.
func (s *Server) cmdDataSize(ctx context.Context, _ *conn, r *request) (bson.D, error) {
	start := time.Now()
	ns, err := splitNS(r)
	if err != nil {
		return nil, err
	}
	rng, hasKey, err := keyRange(r, false)
	if err != nil {
		return nil, err
	}
	a := newArgs(r)
	estimate := a.bool("estimate")
	maxSize, _ := a.int64("maxSize")
	maxObjects, _ := a.int64("maxObjects")
	if a.err != nil {
		return nil, a.err
	}
	var size, n int64
	if !hasKey {
		info, ok := s.data(ctx).Collection(ns)
		if ok && !info.View {
			totals, err := s.data(ctx).WalkKeyRange(ns, store.KeyRange{Pattern: bson.D{{Key: "_id", Value: int32(1)}}}, func([]bson.RawValue, bson.Raw) bool { return false })
			if err != nil && !errors.Is(err, store.ErrNoKeyIndex) {
				return nil, err
			}
			size, n = totals.Size, totals.Count
		}
	} else {
		var avg int64
		totals, err := s.data(ctx).WalkKeyRange(ns, rng, func(_ []bson.RawValue, doc bson.Raw) bool {
			n++
			size += int64(len(doc))
			return (maxSize <= 0 || size <= maxSize) && (maxObjects <= 0 || n < maxObjects)
		})
		switch {
		case errors.Is(err, store.ErrNoKeyIndex):
			return nil, mongoerr.New(mongoerr.OperationFailed, "couldn't find valid index containing key pattern")
		case isCode(err, mongoerr.NamespaceNotFound):
			n, size = 0, 0
		case err != nil:
			return nil, err
		}
		if estimate && totals.Count > 0 {
			avg = totals.Size / totals.Count
			size = n * avg
		}
	}
	return bson.D{
		{Key: "estimate", Value: estimate},
		{Key: "size", Value: size},
		{Key: "numObjects", Value: n},
		{Key: "millis", Value: time.Since(start).Milliseconds()},
	}, nil
}

func patternString(d bson.D) string {
	b, err := bson.Marshal(d)
	if err != nil {
		return "{}"
	}
	return bson.Raw(b).String()
}

func isCode(err error, code int32) bool {
	e, ok := mongoerr.As(err)
	return ok && e.Code == code
}

// cmdHashBSONElement: {_hashBSONElement: <value>, seed?} -> {key, seed,
// out}: mongod's hash of a value, as its hashed indexes and hashed shard
// keys hold it (a test command, as in mongod).
func (s *Server) cmdHashBSONElement(_ context.Context, _ *conn, r *request) (bson.D, error) {
	v := r.cmd.Index(0).Value()
	seed := int32(0)
	if sv, err := r.cmd.LookupErr("seed"); err == nil {
		n, ok := sv.AsInt64OK()
		if !ok {
			return nil, mongoerr.New(mongoerr.TypeMismatch, "seed must be a number")
		}
		seed = int32(n)
	}
	return bson.D{{Key: "key", Value: v}, {Key: "seed", Value: seed}, {Key: "out", Value: store.HashValue(v, seed)}}, nil
}
