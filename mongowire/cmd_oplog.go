package mongowire

import (
	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/tide-cdc/tide/mongowire/internal/mongoerr"
	"github.com/tide-cdc/tide/mongowire/internal/mql"
	"github.com/tide-cdc/tide/mongowire/internal/store"
)

// oplogNS is the replica set oplog, which this server renders read-only
// from its own oplog, so that tools can read the oplog window (the first
// and last entry times) the way they do on mongod.
var oplogNS = store.Namespace{DB: "local", Coll: "oplog.rs"}

// oplogChunk is how many entries findOplog copies out of the oplog at a
// time, so that a long scan never holds writers back for long.
const oplogChunk = 256

// findOplog answers a find on local.oplog.rs: filter (ts bounds narrow the
// scan; the whole filter is applied), sort by $natural or ts (either
// direction), skip, limit and projection.
func findOplog(o *store.Oplog, spec store.FindSpec) ([]bson.Raw, error) {
	f, err := mql.CompileFilter(spec.Filter)
	if err != nil {
		return nil, err
	}
	reverse, err := oplogSortReverse(spec.Sort)
	if err != nil {
		return nil, err
	}
	var proj *mql.Projection
	if len(spec.Projection) > 0 {
		if proj, err = mql.CompileProjection(spec.Projection); err != nil {
			return nil, err
		}
	}
	after, before, empty := oplogBounds(f)
	if empty {
		return nil, nil
	}
	var out []bson.Raw
	skip := spec.Skip
	for {
		chunk := o.Range(after, before, oplogChunk, reverse)
		for i := 0; i < len(chunk); i++ {
			e := &chunk[i]
			doc, err := oplogDoc(e)
			if e.Txn != nil { // a transaction is one applyOps entry (oplog_txn.go)
				j := txnGroupEnd(chunk, i)
				doc, err = oplogTxnDoc(chunk[i:j])
				i = j - 1
			}
			if err != nil {
				return nil, err
			}
			if !f.Match(doc) {
				continue
			}
			if skip > 0 {
				skip--
				continue
			}
			if proj != nil {
				if doc, err = proj.Apply(doc, -1); err != nil {
					return nil, err
				}
			}
			out = append(out, doc)
			if spec.Limit > 0 && int64(len(out)) >= spec.Limit {
				return out, nil
			}
		}
		if len(chunk) < oplogChunk {
			return out, nil
		}
		if reverse {
			before = chunk[len(chunk)-1].TS
		} else {
			after = chunk[len(chunk)-1].TS
		}
	}
}

// oplogSortReverse reads a sort on local.oplog.rs: none, or one key,
// $natural or ts, ascending or descending (the oplog is in ts order).
func oplogSortReverse(sort bson.Raw) (bool, error) {
	elems, err := sort.Elements()
	if err != nil || len(elems) == 0 {
		return false, nil
	}
	if len(elems) > 1 || (elems[0].Key() != "$natural" && elems[0].Key() != "ts") {
		return false, mongoerr.New(mongoerr.BadValue, "local.oplog.rs is sorted only by $natural or ts on this server, not by %s", sort.String())
	}
	v := elems[0].Value()
	n, ok := v.AsInt64OK()
	if !ok {
		if d, dok := v.DoubleOK(); dok {
			n, ok = int64(d), true
		}
	}
	if !ok || (n != 1 && n != -1) {
		return false, mongoerr.New(mongoerr.BadValue, "bad sort specification %s: the direction must be 1 or -1", sort.String())
	}
	return n == -1, nil
}

// oplogBounds turns the filter's top-level ts comparisons with a
// Timestamp into an open range (after, before); empty reports a range
// that holds nothing. The filter is still applied to every entry.
func oplogBounds(f *mql.Filter) (after, before bson.Timestamp, empty bool) {
	for _, p := range f.Predicates() {
		if p.Path != "ts" || len(p.Values) != 1 || p.Values[0].Type != bson.TypeTimestamp {
			continue
		}
		t, i := p.Values[0].Timestamp()
		ts := bson.Timestamp{T: t, I: i}
		switch p.Op {
		case "$gt":
			after = laterTS(after, ts)
		case "$gte", "$eq":
			if prev, ok := prevTS(ts); ok {
				after = laterTS(after, prev)
			}
		}
		switch p.Op {
		case "$lt":
			before = earlierTS(before, ts)
		case "$lte", "$eq":
			if next, ok := nextTS(ts); ok {
				before = earlierTS(before, next)
			}
		}
	}
	empty = !before.IsZero() && !after.Before(before)
	return after, before, empty
}

func laterTS(a, b bson.Timestamp) bson.Timestamp {
	if a.Before(b) {
		return b
	}
	return a
}

// earlierTS is the earlier of two upper bounds, zero meaning none.
func earlierTS(a, b bson.Timestamp) bson.Timestamp {
	if a.IsZero() || b.Before(a) {
		return b
	}
	return a
}

func prevTS(ts bson.Timestamp) (bson.Timestamp, bool) {
	switch {
	case ts.I > 0:
		return bson.Timestamp{T: ts.T, I: ts.I - 1}, true
	case ts.T > 0:
		return bson.Timestamp{T: ts.T - 1, I: ^uint32(0)}, true
	}
	return ts, false
}

func nextTS(ts bson.Timestamp) (bson.Timestamp, bool) {
	switch {
	case ts.I < ^uint32(0):
		return bson.Timestamp{T: ts.T, I: ts.I + 1}, true
	case ts.T < ^uint32(0):
		return bson.Timestamp{T: ts.T + 1}, true
	}
	return ts, false
}

// oplogDoc renders an entry in mongod's oplog shape: op (i, u, d, c), ns
// (db.$cmd for commands), ui, o, o2 (updates), ts, t, v, wall. An update's
// o is mongod's nested {$v: 2, diff} (oplog_diff.go).
func oplogDoc(e *store.OplogEntry) (bson.Raw, error) {
	d := bson.D{}
	var o, o2 any
	ns := e.NS.String()
	switch e.Op {
	case "insert":
		d, o = append(d, bson.E{Key: "op", Value: "i"}), e.Doc
	case "replace":
		d, o, o2 = append(d, bson.E{Key: "op", Value: "u"}), e.Doc, e.DocKey
	case "update":
		d = append(d, bson.E{Key: "op", Value: "u"})
		o, o2 = bson.D{{Key: "$v", Value: int32(2)}, {Key: "diff", Value: updateDiff(e.Update, e.Doc)}}, e.DocKey
	case "delete":
		d, o = append(d, bson.E{Key: "op", Value: "d"}), e.DocKey
	default: // DDL
		d, o, o2 = append(d, bson.E{Key: "op", Value: "c"}), ddlObject(e), ddlObject2(e)
		ns = e.NS.DB + ".$cmd"
	}
	d = append(d, bson.E{Key: "ns", Value: ns})
	if len(e.UUID.Data) > 0 {
		d = append(d, bson.E{Key: "ui", Value: e.UUID})
	}
	if o != nil {
		d = append(d, bson.E{Key: "o", Value: o})
	}
	if o2 != nil {
		d = append(d, bson.E{Key: "o2", Value: o2})
	}
	d = append(d,
		bson.E{Key: "ts", Value: e.TS},
		bson.E{Key: "t", Value: int64(1)},
		bson.E{Key: "v", Value: int64(2)},
		bson.E{Key: "wall", Value: bson.NewDateTimeFromTime(e.Wall)},
	)
	return bson.Marshal(d)
}

// ddlObject is the o of a DDL entry as mongod 7.0 writes it, so that
// mongorestore --oplogReplay (and applyOps) can apply it: create with its
// options flat and the idIndex, createIndexes with one index spec flat,
// dropIndexes naming the index, renameCollection with full namespaces,
// collMod with the changed options.
func ddlObject(e *store.OplogEntry) bson.D {
	extra := func(key string) any {
		for _, x := range e.Extra {
			if x.Key == key {
				return x.Value
			}
		}
		return nil
	}
	switch e.Op {
	case "dropDatabase":
		return bson.D{{Key: "dropDatabase", Value: int32(1)}}
	case "create":
		o := bson.D{{Key: "create", Value: e.NS.Coll}}
		opts, _ := extra("options").(bson.D)
		view, clustered := false, false
		for _, x := range opts {
			view = view || x.Key == "viewOn"
			clustered = clustered || x.Key == "clusteredIndex"
		}
		o = append(o, opts...)
		if !view && !clustered {
			o = append(o, bson.E{Key: "idIndex", Value: idIndex})
		}
		return o
	case "createIndexes":
		o := bson.D{{Key: "createIndexes", Value: e.NS.Coll}}
		if spec := firstIndexSpec(extra("indexes")); spec != nil {
			o = append(o, spec...)
		}
		return o
	case "dropIndexes":
		o := bson.D{{Key: "dropIndexes", Value: e.NS.Coll}}
		if spec := firstIndexSpec(extra("indexes")); spec != nil {
			name, _ := lookupE(spec, "name").(string)
			o = append(o, bson.E{Key: "index", Value: name})
		}
		return o
	case "rename":
		o := bson.D{{Key: "renameCollection", Value: e.NS.String()}, {Key: "to", Value: extra("to")}, {Key: "stayTemp", Value: false}}
		if dt := extra("dropTarget"); dt != nil {
			o = append(o, bson.E{Key: "dropTarget", Value: dt})
		}
		return o
	case "modify":
		o := bson.D{{Key: "collMod", Value: e.NS.Coll}}
		for _, x := range e.Extra {
			if x.Key != "stateBeforeChange" {
				o = append(o, x)
			}
		}
		return o
	}
	return append(bson.D{{Key: e.Op, Value: e.NS.Coll}}, e.Extra...)
}

// ddlObject2 is the o2 mongod writes with some DDL: the dropped index's
// spec, and the options a collMod replaced.
func ddlObject2(e *store.OplogEntry) any {
	switch e.Op {
	case "dropIndexes":
		for _, x := range e.Extra {
			if x.Key == "indexes" {
				if spec := firstIndexSpec(x.Value); spec != nil {
					return spec
				}
			}
		}
	case "modify":
		for _, x := range e.Extra {
			if x.Key == "stateBeforeChange" {
				if old, ok := lookupE(asD(x.Value), "collectionOptions").(bson.D); ok {
					return bson.D{{Key: "collectionOptions_old", Value: old}}
				}
			}
		}
	}
	return nil
}

// firstIndexSpec returns the index spec of an indexes: [spec] detail (a
// store entry holds one index).
func firstIndexSpec(v any) bson.D {
	arr, ok := v.(bson.A)
	if !ok || len(arr) == 0 {
		return nil
	}
	return asD(arr[0])
}

func asD(v any) bson.D {
	switch d := v.(type) {
	case bson.D:
		return d
	case bson.Raw:
		var out bson.D
		if bson.Unmarshal(d, &out) == nil {
			return out
		}
	case bson.RawValue:
		if raw, ok := d.DocumentOK(); ok {
			return asD(raw)
		}
	}
	return nil
}

func lookupE(d bson.D, key string) any {
	for _, x := range d {
		if x.Key == key {
			return x.Value
		}
	}
	return nil
}

// refuseOplogWrite refuses writes and DDL on local.oplog.rs, which this
// server derives from its own writes, and the reads other than find,
// which would otherwise see an empty collection.
func refuseOplogWrite(r *request) error {
	if r.db != oplogNS.DB {
		return nil
	}
	coll, ok := r.cmd.Index(0).Value().StringValueOK()
	if !ok || coll != oplogNS.Coll {
		return nil
	}
	switch r.name {
	case "insert", "update", "delete", "findAndModify":
		return mongoerr.New(mongoerr.InvalidNamespace, "cannot write to '%s'", oplogNS)
	case "create", "drop", "collMod", "createIndexes", "dropIndexes":
		return mongoerr.New(mongoerr.IllegalOperation, "%s on '%s' is not allowed: the oplog of this server is read-only", r.name, oplogNS)
	case "aggregate":
		if isCollStats(r.cmd) { // cmd_collstats.go answers for the oplog
			return nil
		}
		return mongoerr.New(mongoerr.IllegalOperation, "%s on '%s' is not supported by this server: read the oplog with find", r.name, oplogNS)
	case "count", "distinct", "explain":
		return mongoerr.New(mongoerr.IllegalOperation, "%s on '%s' is not supported by this server: read the oplog with find", r.name, oplogNS)
	}
	return nil
}

// isCollStats reports whether an aggregate's pipeline starts with $collStats.
func isCollStats(cmd bson.Raw) bool {
	p, ok := cmd.Lookup("pipeline").ArrayOK()
	if !ok {
		return false
	}
	first, err := p.IndexErr(0)
	if err != nil {
		return false
	}
	d, ok := first.DocumentOK()
	if !ok {
		return false
	}
	e, err := d.IndexErr(0)
	return err == nil && e.Key() == "$collStats"
}
