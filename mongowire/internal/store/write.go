package store

import (
	"bytes"
	"encoding/binary"
	"strings"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/x/bsonx/bsoncore"

	"github.com/tide-cdc/tide/mongowire/internal/mongoerr"
	"github.com/tide-cdc/tide/mongowire/internal/mql"
)

const (
	// MaxDocumentSize is the largest document the store keeps (16 MiB).
	MaxDocumentSize = 16 << 20
	// MaxDepth is the deepest nesting of a stored document.
	MaxDepth = 100

	codeUpdateTooLarge int32 = 17419
)

// buildDoc assembles a document from raw elements.
func buildDoc(elems ...[]byte) bson.Raw {
	n := 5
	for _, e := range elems {
		n += len(e)
	}
	b := make([]byte, 4, n)
	binary.LittleEndian.PutUint32(b, uint32(n))
	for _, e := range elems {
		b = append(b, e...)
	}
	return append(b, 0)
}

// withIDFirst returns doc with its _id element first, adding id (an _id
// element) when doc has none. The result is a fresh copy.
func withIDFirst(doc bson.Raw, id []byte) (bson.Raw, error) {
	if first, err := doc.IndexErr(0); err == nil && first.Key() == "_id" && id == nil {
		return clone(doc), nil // already in shape (the common case)
	}
	elems, err := doc.Elements()
	if err != nil {
		return nil, err
	}
	out := make([][]byte, 0, len(elems)+1)
	for _, e := range elems {
		if e.Key() == "_id" {
			id = e
			continue
		}
		out = append(out, e)
	}
	if id == nil {
		id = bsoncore.AppendObjectIDElement(nil, "_id", bson.NewObjectID())
	}
	return buildDoc(append([][]byte{id}, out...)...), nil
}

// prepare checks a document to be inserted and gives it an _id (an
// ObjectId, first) when it has none.
func prepare(doc bson.Raw) (bson.Raw, *mongoerr.Error) {
	if len(doc) > MaxDocumentSize {
		return nil, mongoerr.New(mongoerr.BadValue, "object to insert too large. size in bytes: %d, max size: %d", len(doc), MaxDocumentSize)
	}
	d, err := withIDFirst(doc, nil)
	if err != nil {
		return nil, mongoerr.New(mongoerr.InvalidBSON, "invalid BSON document: %v", err)
	}
	if err := mql.Validate(d, MaxDepth); err != nil {
		return nil, asMongo(err)
	}
	return d, nil
}

// docKey returns {_id: <the document's _id>}.
func docKey(doc bson.Raw) bson.Raw {
	if first, err := doc.IndexErr(0); err == nil && first.Key() == "_id" {
		return buildDoc(first)
	}
	elems, _ := doc.Elements()
	for _, e := range elems {
		if e.Key() == "_id" {
			return buildDoc(e)
		}
	}
	return buildDoc()
}

func idOf(doc bson.Raw) bson.RawValue {
	v, _ := doc.LookupErr("_id")
	return v
}

// ensureLocked returns the collection, creating it (and recording the
// create) when it does not exist.
func (s *Store) ensureLocked(t *tx, ns Namespace) (*collection, bool, error) {
	if c := s.collLocked(ns); c != nil {
		if err := refuseViewLocked(ns, c); err != nil {
			return c, false, err
		}
		return c, false, t.refuseCapped(ns, c)
	}
	if err := validNamespace(ns); err != nil {
		return nil, false, err
	}
	c := s.createLocked(ns, newUUID(), nil)
	t.created(ns, c)
	t.emit(OplogEntry{Op: "create", NS: ns, UUID: c.info.UUID, Extra: createExtra(nil)})
	return c, true, nil
}

// Insert inserts documents, creating the collection if needed. A document
// without _id gets an ObjectId as its first field. ordered stops at the
// first failure; otherwise every document is tried. n counts the documents
// inserted; errs describes each failure by its index in docs.
func (s *Store) Insert(ns Namespace, docs []bson.Raw, ordered bool) (n int, errs []WriteError) {
	return s.InsertWith(ns, docs, InsertOptions{Ordered: ordered})
}

// InsertOptions are the options of an insert command.
type InsertOptions struct {
	Ordered          bool
	BypassValidation bool // bypassDocumentValidation
}

// InsertWith is Insert with all of an insert command's options.
func (s *Store) InsertWith(ns Namespace, docs []bson.Raw, opts InsertOptions) (n int, errs []WriteError) {
	return s.insert(nil, ns, docs, opts)
}

func (s *Store) insert(rd *Txn, ns Namespace, docs []bson.Raw, opts InsertOptions) (n int, errs []WriteError) {
	if base, ok := strings.CutPrefix(ns.Coll, "system.buckets."); ok {
		return s.insertBuckets(rd, ns, Namespace{DB: ns.DB, Coll: base}, docs, opts) // timeseries.go
	}
	ordered := opts.Ordered
	err := s.writeAs(rd, func(t *tx) error {
		n, errs = 0, nil // a write blocked by a transaction runs again
		c, _, err := s.ensureLocked(t, ns)
		if err != nil {
			return err
		}
		for i, d := range docs {
			doc, werr := prepare(d)
			if werr == nil && c.ts != nil {
				werr = c.ts.checkMeasurement(doc)
			}
			if werr == nil {
				werr = s.validate(ns, c, doc, nil, opts.BypassValidation)
			}
			if werr == nil {
				if werr = c.insert(ns, doc); werr != nil {
					if err := t.heldByOther(ns, c, doc, c.nextRID, werr); err != nil {
						return err
					}
				}
			}
			if werr != nil {
				errs = append(errs, WriteError{Index: i, Err: werr})
				if ordered {
					return nil
				}
				continue
			}
			if err := t.touch(ns, c, c.nextRID-1, doc, nil); err != nil {
				return err
			}
			n++
			t.emit(OplogEntry{Op: "insert", NS: ns, UUID: c.info.UUID, DocKey: docKey(doc), Doc: doc})
			t.keep(c, c.nextRID-1, nil)
			if err := s.capLocked(t, ns, c); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		errs = []WriteError{{Index: n, Err: asMongo(err)}}
		if !ordered {
			errs = errs[:0]
			for i := n; i < len(docs); i++ {
				errs = append(errs, WriteError{Index: i, Err: asMongo(err)})
			}
		}
	}
	return n, errs
}

// fixUpdated checks the result of an update of old: _id kept (and first),
// structure and size valid.
func fixUpdated(old, nd bson.Raw) (bson.Raw, error) {
	oldID, _ := old.LookupErr("_id")
	newID, err := nd.LookupErr("_id")
	switch {
	case err != nil:
		id := docKey(old)
		nd, err = withIDFirst(nd, id[4:len(id)-1])
	case !sameValue(oldID, newID):
		return nil, mongoerr.New(mongoerr.ImmutableField,
			"After applying the update, the (immutable) field '_id' was found to have been altered to _id: %s", formatKeyValue(newID))
	default:
		first, ferr := nd.IndexErr(0)
		if ferr == nil && first.Key() != "_id" {
			nd, err = withIDFirst(nd, nil)
		}
	}
	if err != nil {
		return nil, mongoerr.New(mongoerr.InvalidBSON, "invalid BSON document: %v", err)
	}
	if len(nd) > MaxDocumentSize {
		return nil, mongoerr.New(codeUpdateTooLarge, "Resulting document after update is larger than %d", MaxDocumentSize)
	}
	if err := mql.Validate(nd, MaxDepth); err != nil {
		return nil, err
	}
	return nd, nil
}

// updateAt applies u to the record at position p and records the write. It
// returns the new document, or nil if the update changed nothing.
func (s *Store) updateAt(t *tx, ns Namespace, c *collection, p int, u *compiledUpdate, positional int, bypass bool) (bson.Raw, error) {
	old := c.recs[p].doc
	nd, err := u.Apply(old, mql.ApplyOptions{PositionalIndex: positional, Now: t.wall})
	if err != nil {
		return nil, err
	}
	if bytes.Equal(nd, old) {
		return nil, nil
	}
	if nd, err = fixUpdated(old, nd); err != nil {
		return nil, err
	}
	if bytes.Equal(nd, old) {
		return nil, nil
	}
	if werr := s.validate(ns, c, nd, old, bypass); werr != nil {
		return nil, werr
	}
	if werr := c.replace(ns, p, nd); werr != nil {
		if err := t.heldByOther(ns, c, nd, c.recs[p].rid, werr); err != nil {
			return nil, err
		}
		return nil, werr
	}
	if err := t.touch(ns, c, c.recs[p].rid, nd, old); err != nil {
		return nil, err
	}
	e := OplogEntry{NS: ns, UUID: c.info.UUID, DocKey: docKey(nd), Doc: nd}
	e.Op, e.Update = u.describe(old, nd, positional)
	if c.info.PreAndPostImages {
		e.Pre = old
	}
	t.emit(e)
	t.keep(c, c.recs[p].rid, old)
	return nd, nil
}

// upsert inserts the document an update builds when nothing matched: the
// filter's equality fields, then the update applied with $setOnInsert.
func (s *Store) upsert(t *tx, ns Namespace, f *query, u *compiledUpdate, bypass bool) (bson.Raw, error) {
	seed := bson.D{} // a nil D does not marshal: a filter without equalities seeds nothing
	for _, e := range f.EqualityFields() {
		if strings.HasPrefix(e.Key, "$") {
			continue
		}
		seed = setPath(seed, strings.Split(e.Key, "."), e.Value)
	}
	seedRaw, err := bson.Marshal(seed)
	if err != nil {
		return nil, mongoerr.New(mongoerr.BadValue, "build upsert document: %v", err)
	}
	nd, err := u.Apply(seedRaw, mql.ApplyOptions{Upsert: true, PositionalIndex: -1, Now: t.wall})
	if err != nil {
		return nil, err
	}
	if _, err := nd.LookupErr("_id"); err != nil {
		if id, err := bson.Raw(seedRaw).LookupErr("_id"); err == nil {
			nd, _ = withIDFirst(nd, bsoncore.AppendValueElement(nil, "_id", bsoncore.Value{Type: bsoncore.Type(id.Type), Data: id.Value}))
		}
	}
	doc, werr := prepare(nd)
	if werr != nil {
		return nil, werr
	}
	c, _, err := s.ensureLocked(t, ns)
	if err != nil {
		return nil, err
	}
	if werr := s.validate(ns, c, doc, nil, bypass); werr != nil {
		return nil, werr
	}
	if werr := c.insert(ns, doc); werr != nil {
		if err := t.heldByOther(ns, c, doc, c.nextRID, werr); err != nil {
			return nil, err
		}
		return nil, werr
	}
	if err := t.touch(ns, c, c.nextRID-1, doc, nil); err != nil {
		return nil, err
	}
	t.emit(OplogEntry{Op: "insert", NS: ns, UUID: c.info.UUID, DocKey: docKey(doc), Doc: doc})
	t.keep(c, c.nextRID-1, nil)
	if err := s.capLocked(t, ns, c); err != nil {
		return nil, err
	}
	return doc, nil
}

// setPath sets a dotted path in a document under construction.
func setPath(d bson.D, path []string, v any) bson.D {
	for i := range d {
		if d[i].Key != path[0] {
			continue
		}
		if len(path) == 1 {
			d[i].Value = v
			return d
		}
		sub, _ := d[i].Value.(bson.D)
		d[i].Value = setPath(sub, path[1:], v)
		return d
	}
	if len(path) == 1 {
		return append(d, bson.E{Key: path[0], Value: v})
	}
	return append(d, bson.E{Key: path[0], Value: setPath(nil, path[1:], v)})
}

// hit is a matched document: its record id and the positional index.
type hit struct {
	rid uint64
	pos int
}

// hits collects the documents of c matching f, in natural order, at most
// limit (0 = all).
func hits(c *collection, f *query, limit int) []hit {
	var out []hit
	c.scan(f, func(p int, doc bson.Raw) bool {
		if ok, pos := f.MatchPositional(doc); ok {
			out = append(out, hit{rid: c.recs[p].rid, pos: pos})
		}
		return limit <= 0 || len(out) < limit
	})
	return out
}

// Update runs one update statement: the first matching document, or every
// one with Multi; with Upsert, inserts when nothing matched. A document the
// update leaves unchanged is matched but not modified, and not recorded.
func (s *Store) Update(ns Namespace, spec UpdateSpec) (UpdateResult, error) {
	return s.update(nil, ns, spec)
}

func (s *Store) update(rd *Txn, ns Namespace, spec UpdateSpec) (UpdateResult, error) {
	res := UpdateResult{}
	coll, err := s.collationFor(ns, spec.Collation)
	if err != nil {
		return res, err
	}
	f, err := compileWriteQuery(spec.Filter, coll)
	if err != nil {
		return res, err
	}
	u, err := compileUpdate(spec.Update, spec.ArrayFilters)
	if err != nil {
		return res, err
	}
	if err := u.WithCollation(coll); err != nil {
		return res, err
	}
	if spec.Multi && u.IsReplacement() {
		return res, mongoerr.New(mongoerr.FailedToParse, "multi update is not supported for replacement-style update")
	}
	err = s.writeAs(rd, func(t *tx) error {
		res = UpdateResult{}
		if c := s.collLocked(ns); c != nil {
			if err := t.refuseCapped(ns, c); err != nil {
				return err
			}
			if c.ts != nil {
				if err := c.ts.checkUpdate(spec); err != nil {
					return err
				}
			}
			limit := 1
			if spec.Multi {
				limit = 0
			}
			hs, err := t.hits(ns, c, f, limit)
			if err != nil {
				return err
			}
			for _, h := range hs {
				res.Matched++
				nd, err := s.updateAt(t, ns, c, c.pos(h.rid), u, h.pos, spec.BypassValidation)
				if err != nil {
					return err
				}
				if nd != nil {
					res.Modified++
				}
			}
		}
		if res.Matched > 0 || !spec.Upsert {
			return nil
		}
		doc, err := s.upsert(t, ns, f, u, spec.BypassValidation)
		if err != nil {
			return err
		}
		res.UpsertedID = idOf(doc)
		return nil
	})
	return res, err
}

// Delete deletes the matching documents: all of them with limit 0, the
// first with limit 1.
func (s *Store) Delete(ns Namespace, filter bson.Raw, limit int) (int, error) {
	return s.delete(nil, ns, DeleteSpec{Filter: filter, Limit: limit})
}

// DeleteWith is Delete of one statement with its collation.
func (s *Store) DeleteWith(ns Namespace, spec DeleteSpec) (int, error) {
	return s.delete(nil, ns, spec)
}

func (s *Store) delete(rd *Txn, ns Namespace, spec DeleteSpec) (int, error) {
	limit := spec.Limit
	coll, err := s.collationFor(ns, spec.Collation)
	if err != nil {
		return 0, err
	}
	f, err := compileWriteQuery(spec.Filter, coll)
	if err != nil {
		return 0, err
	}
	n := 0
	err = s.writeAs(rd, func(t *tx) error {
		n = 0
		c := s.collLocked(ns)
		if c == nil {
			return nil
		}
		if err := t.refuseCapped(ns, c); err != nil {
			return err
		}
		hs, err := t.hits(ns, c, f, limit)
		if err != nil {
			return err
		}
		for _, h := range hs {
			if err := s.deleteAt(t, ns, c, c.pos(h.rid)); err != nil {
				return err
			}
			n++
		}
		return nil
	})
	return n, err
}

func (s *Store) deleteAt(t *tx, ns Namespace, c *collection, p int) error {
	old, rid := c.recs[p].doc, c.recs[p].rid
	c.remove(p)
	if err := t.touch(ns, c, rid, old, old); err != nil {
		return err
	}
	e := OplogEntry{Op: "delete", NS: ns, UUID: c.info.UUID, DocKey: docKey(old)}
	if c.info.PreAndPostImages {
		e.Pre = old
	}
	t.emit(e)
	t.keep(c, rid, old)
	return nil
}

// FindAndModify updates or removes the first document matching Filter in
// Sort order, and returns it as it was before (or after, with New),
// projected by Fields.
func (s *Store) FindAndModify(ns Namespace, spec FindAndModifySpec) (FindAndModifyResult, error) {
	return s.findAndModify(nil, ns, spec)
}

func (s *Store) findAndModify(rd *Txn, ns Namespace, spec FindAndModifySpec) (FindAndModifyResult, error) {
	var res FindAndModifyResult
	hasUpdate := spec.Update.Type != 0
	switch {
	case spec.Remove && hasUpdate:
		return res, mongoerr.New(mongoerr.FailedToParse, "Cannot specify both an update and remove=true")
	case spec.Remove && spec.Upsert:
		return res, mongoerr.New(mongoerr.FailedToParse, "Cannot specify both upsert=true and remove=true")
	case !spec.Remove && !hasUpdate:
		return res, mongoerr.New(mongoerr.FailedToParse, "Either an update or remove=true must be specified")
	}
	coll, err := s.collationFor(ns, spec.Collation)
	if err != nil {
		return res, err
	}
	f, err := compileWriteQuery(spec.Filter, coll)
	if err != nil {
		return res, err
	}
	var sorter *mql.Sort
	if len(spec.Sort) > 0 {
		if sorter, err = mql.CompileSortCollated(spec.Sort, coll); err != nil {
			return res, err
		}
	}
	var proj *mql.Projection
	if len(spec.Fields) > 0 {
		if proj, err = mql.CompileProjection(spec.Fields); err != nil {
			return res, err
		}
	}
	var u *compiledUpdate
	if hasUpdate {
		if u, err = compileUpdate(spec.Update, spec.ArrayFilters); err != nil {
			return res, err
		}
		if err := u.WithCollation(coll); err != nil {
			return res, err
		}
	}
	positional := -1
	err = s.writeAs(rd, func(t *tx) error {
		res, positional = FindAndModifyResult{}, -1
		c := s.collLocked(ns)
		var target *hit
		if c != nil {
			if err := t.refuseCapped(ns, c); err != nil {
				return err
			}
			if c.ts != nil && !spec.Remove {
				return mongoerr.New(mongoerr.InvalidOptions, "Cannot perform a findAndModify with an update on a time-series collection")
			}
			limit := 1
			if sorter != nil {
				limit = 0
			}
			hs, err := t.hits(ns, c, f, limit)
			if err != nil {
				return err
			}
			if sorter != nil && len(hs) > 1 {
				docs := make([]bson.Raw, len(hs))
				for i, h := range hs {
					docs[i] = c.recs[c.pos(h.rid)].doc
				}
				best := 0
				for i := 1; i < len(hs); i++ {
					if sorter.Compare(docs[i], docs[best]) < 0 {
						best = i
					}
				}
				hs = hs[best:]
			}
			if len(hs) > 0 {
				target = &hs[0]
			}
		}
		if target == nil {
			if !spec.Upsert {
				return nil
			}
			doc, err := s.upsert(t, ns, f, u, spec.BypassValidation)
			if err != nil {
				return err
			}
			res.N, res.Upserted = 1, idOf(doc)
			if spec.New {
				res.Value = doc
			}
			return nil
		}
		p := c.pos(target.rid)
		old := c.recs[p].doc
		res.N, positional = 1, target.pos
		if spec.Remove {
			res.Value = old
			return s.deleteAt(t, ns, c, p)
		}
		res.UpdatedExisting = true
		nd, err := s.updateAt(t, ns, c, p, u, target.pos, spec.BypassValidation)
		if err != nil {
			return err
		}
		res.Value = old
		if spec.New {
			res.Value = c.recs[c.pos(target.rid)].doc
			if nd != nil {
				res.Value = nd
			}
		}
		return nil
	})
	if err != nil {
		return FindAndModifyResult{}, err
	}
	if proj != nil && res.Value != nil {
		if res.Value, err = proj.Apply(res.Value, positional); err != nil {
			return FindAndModifyResult{}, err
		}
	}
	return res, nil
}

// compileWriteQuery is compileQuery for the filter of a write, where
// $text is refused: writes here do not run text queries.
func compileWriteQuery(filter bson.Raw, coll *mql.Collation) (*query, error) {
	if _, _, ok := splitText(filter); ok {
		return nil, mongoerr.New(mongoerr.CommandNotSupported, "$text in the filter of a write is not supported by this server")
	}
	return compileQuery(filter, coll)
}
