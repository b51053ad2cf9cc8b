package mongowire

import (
	"context"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/tide-cdc/tide/mongowire/internal/mongoerr"
	"github.com/tide-cdc/tide/mongowire/internal/mql"
	"github.com/tide-cdc/tide/mongowire/internal/store"
)

// Tailable cursors: a find with tailable on a capped collection or on
// local.oplog.rs stays open at the end of the data and later returns what
// was written since; with awaitData a getMore waits (maxTimeMS, default
// 1 s) for it.

// tailOptions are what a tailable find applies itself.
type tailOptions struct {
	filter      *mql.Filter
	proj        *mql.Projection
	skip, limit int64
	returned    int64
}

func newTailOptions(spec store.FindSpec, coll *mql.Collation) (*tailOptions, error) {
	if err := checkNaturalSort(spec.Sort); err != nil {
		return nil, err
	}
	f, err := mql.CompileFilterCollated(spec.Filter, coll)
	if err != nil {
		return nil, err
	}
	t := &tailOptions{filter: f, skip: spec.Skip, limit: spec.Limit}
	if len(spec.Projection) > 0 {
		if t.proj, err = mql.CompileProjection(spec.Projection); err != nil {
			return nil, err
		}
	}
	return t, nil
}

// checkNaturalSort refuses a tailable find's sort other than {$natural: 1}.
func checkNaturalSort(sort bson.Raw) error {
	elems, _ := sort.Elements()
	if len(elems) == 0 {
		return nil
	}
	if len(elems) == 1 && elems[0].Key() == "$natural" {
		if n, ok := elems[0].Value().AsInt64OK(); ok && n == 1 {
			return nil
		}
		if d, ok := elems[0].Value().DoubleOK(); ok && d == 1 {
			return nil
		}
	}
	return mongoerr.New(mongoerr.BadValue, "cannot use tailable option with a sort other than {$natural: 1}")
}

// take applies skip, projection and limit to a batch; done reports that
// the limit is reached.
func (t *tailOptions) take(docs []bson.Raw) (out []bson.Raw, done bool, err error) {
	for _, d := range docs {
		if t.skip > 0 {
			t.skip--
			continue
		}
		if t.proj != nil {
			if d, err = t.proj.Apply(d, -1); err != nil {
				return nil, false, err
			}
		}
		out = append(out, d)
		t.returned++
		if t.limit > 0 && t.returned >= t.limit {
			return out, true, nil
		}
	}
	return out, false, nil
}

// awaitChange waits for the next write, the deadline or ctx.
func awaitChange(ctx context.Context, changed <-chan struct{}, deadline time.Time) bool {
	d := time.Until(deadline)
	if d <= 0 {
		return false
	}
	timer := time.NewTimer(d)
	defer timer.Stop()
	select {
	case <-changed:
		return true
	case <-timer.C:
	case <-ctx.Done():
	}
	return false
}

// cappedTail tails a capped collection.
type cappedTail struct {
	st  *store.Store
	ns  store.Namespace
	pos store.TailPosition
	opt *tailOptions
}

func (c *cappedTail) Next(ctx context.Context, n, maxBytes int, maxWait time.Duration) ([]bson.Raw, bson.D, bool, error) {
	deadline := time.Now().Add(maxWait)
	for {
		changed := c.st.Oplog().Changed()
		docs, pos, err := c.st.ReadTail(c.ns, c.pos, c.opt.filter, n, maxBytes)
		if err != nil {
			return nil, nil, true, err
		}
		c.pos = pos
		out, done, err := c.opt.take(docs)
		if err != nil || done || len(out) > 0 || !awaitChange(ctx, changed, deadline) {
			return out, nil, done, err
		}
	}
}

func (c *cappedTail) Close() {}

// oplogTail tails local.oplog.rs.
type oplogTail struct {
	o       *store.Oplog
	after   bson.Timestamp // the last entry scanned
	opt     *tailOptions
	started bool // a first batch was read: from then on, lost history is an error
}

func (t *oplogTail) Next(ctx context.Context, n, maxBytes int, maxWait time.Duration) ([]bson.Raw, bson.D, bool, error) {
	deadline := time.Now().Add(maxWait)
	for {
		changed := t.o.Changed()
		var docs []bson.Raw
		size := 0
	read:
		for len(docs) < n {
			chunk, _, lost := t.o.ReadAfter(t.after, min(n-len(docs), oplogChunk), 0)
			if lost && t.started {
				return nil, nil, true, mongoerr.New(136, "CollectionScan died due to position in capped collection being deleted. Last seen record id: %v", t.after)
			}
			for i := range chunk {
				e := &chunk[i]
				doc, err := oplogDoc(e)
				if err != nil {
					return nil, nil, true, err
				}
				if t.opt.filter.Match(doc) {
					if len(docs) > 0 && size+len(doc) > maxBytes {
						break read
					}
					docs = append(docs, doc)
					size += len(doc)
				}
				t.after = e.TS
			}
			if len(chunk) < oplogChunk {
				break
			}
		}
		t.started = true
		out, done, err := t.opt.take(docs)
		if err != nil || done || len(out) > 0 || !awaitChange(ctx, changed, deadline) {
			return out, nil, done, err
		}
	}
}

func (t *oplogTail) Close() {}

// findTailable answers a tailable find on ns.
func (s *Server) findTailable(ctx context.Context, ns store.Namespace, spec store.FindSpec, batch int64, awaitData bool) (bson.D, error) {
	// The find's collation, else the collection's default (a capped
	// collection may have one).
	collation := spec.Collation
	if info, ok := s.data(ctx).Collection(ns); ok && collation.Type == 0 {
		for _, o := range info.Options {
			if o.Key == "collation" {
				raw, err := bson.Marshal(bson.D{o})
				if err == nil {
					collation = bson.Raw(raw).Lookup("collation")
				}
			}
		}
	}
	var coll *mql.Collation
	if collation.Type != 0 {
		c, err := mql.ParseCollation(collation)
		if err != nil {
			return nil, err
		}
		coll = c
	}
	opt, err := newTailOptions(spec, coll)
	if err != nil {
		return nil, err
	}
	var src cursorSource
	if ns == oplogNS {
		after, _, _ := oplogBounds(opt.filter)
		src = &oplogTail{o: s.rawStore.Oplog(), after: after, opt: opt}
	} else {
		capped, exists := s.rawStore.IsCapped(ns)
		if !exists || !capped {
			return nil, mongoerr.New(mongoerr.BadValue, "error processing query: ns=%s tailable cursor requested on non capped collection", ns)
		}
		// As mongod's shouldSaveCursor: a tailable cursor on a collection
		// with no records is not kept.
		if n, err := s.rawStore.Count(ns, nil, 0, 0); err != nil || n == 0 {
			return s.openCursor(ctx, ns.String(), &sliceSource{}, cursorOptions{batchSize: batch})
		}
		src = &cappedTail{st: s.rawStore, ns: ns, opt: opt}
	}
	return s.openCursor(ctx, ns.String(), src, cursorOptions{batchSize: batch, tailable: true, awaitData: awaitData})
}
