package store

import (
	"bytes"
	"crypto/rand"
	"slices"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/tide-cdc/tide/mongowire/internal/fts"
	"github.com/tide-cdc/tide/mongowire/internal/mongoerr"
)

func newUUID() bson.Binary {
	b := make([]byte, 16)
	_, _ = rand.Read(b)
	b[6] = b[6]&0x0f | 0x40
	b[8] = b[8]&0x3f | 0x80
	return bson.Binary{Subtype: bson.TypeBinaryUUID, Data: b}
}

// createExtra is the description of a create in the oplog: {options}.
func createExtra(options bson.D) bson.D {
	if options == nil {
		options = bson.D{}
	}
	return bson.D{{Key: "options", Value: options}}
}

// createLocked adds a collection to the catalog.
func (s *Store) createLocked(ns Namespace, uuid bson.Binary, options bson.D) *collection {
	info := CollectionInfo{Name: ns.Coll, UUID: uuid, Options: options, PreAndPostImages: prePostEnabled(options)}
	c := newCollection(info)
	if coll, err := parseCollationOption(lookupD(options, "collation")); err == nil && coll != nil {
		// The collection's default collation, which its _id index has too.
		c.coll = coll
		id, err := newIndex(IndexSpec{Name: idIndexSpec.Name, Key: idIndexSpec.Key, Options: bson.D{{Key: "collation", Value: coll.Spec()}}})
		if err == nil {
			c.indexes[0] = id
		}
	}
	c.validator = newValidator(options)
	if c.ts = parseTimeseries(options); c.ts != nil {
		c.info.Timeseries = true
	}
	setCappedLocked(c, options)
	if v, err := parseView(options); err == nil && v != nil {
		c.view, c.info.View, c.info.UUID = v, true, bson.Binary{}
	}
	db := s.dbs[ns.DB]
	if db == nil {
		db = make(map[string]*collection)
		s.dbs[ns.DB] = db
	}
	db[ns.Coll] = c
	return c
}

// prePostEnabled reads changeStreamPreAndPostImages: {enabled: true}.
func prePostEnabled(options bson.D) bool {
	for _, o := range options {
		if o.Key != "changeStreamPreAndPostImages" {
			continue
		}
		enabled, _ := lookupD(o.Value, "enabled").(bool)
		return enabled
	}
	return false
}

// lookupD returns the field key of a document value given as bson.D,
// bson.M, bson.Raw or bson.RawValue, converting raw values to Go values.
func lookupD(doc any, key string) any {
	switch d := doc.(type) {
	case bson.D:
		for _, e := range d {
			if e.Key == key {
				return goValue(e.Value)
			}
		}
	case bson.M:
		return goValue(d[key])
	case bson.Raw:
		if v, err := d.LookupErr(key); err == nil {
			return goValue(v)
		}
	case bson.RawValue:
		if d.Type == bson.TypeEmbeddedDocument {
			return lookupD(d.Document(), key)
		}
	}
	return nil
}

func goValue(v any) any {
	rv, ok := v.(bson.RawValue)
	if !ok {
		return v
	}
	switch rv.Type {
	case bson.TypeBoolean:
		return rv.Boolean()
	case bson.TypeString:
		return rv.StringValue()
	case bson.TypeInt32:
		return rv.Int32()
	case bson.TypeInt64:
		return rv.Int64()
	case bson.TypeDouble:
		return rv.Double()
	}
	return rv
}

// truthy reads a flag the way MongoDB does: true or a non-zero number.
func truthy(v any) bool {
	switch x := goValue(v).(type) {
	case bool:
		return x
	case int32:
		return x != 0
	case int64:
		return x != 0
	case float64:
		return x != 0
	case int:
		return x != 0
	}
	return false
}

func isDoc(v any) bool {
	switch x := v.(type) {
	case bson.D, bson.M, bson.Raw:
		return true
	case bson.RawValue:
		return x.Type == bson.TypeEmbeddedDocument
	}
	return false
}

// checkPrePost validates a changeStreamPreAndPostImages option.
func checkPrePost(v any) error {
	if !isDoc(v) {
		return mongoerr.New(mongoerr.TypeMismatch, "BSON field 'changeStreamPreAndPostImages' is the wrong type, expected type 'object'")
	}
	if _, ok := lookupD(v, "enabled").(bool); !ok {
		return mongoerr.New(mongoerr.IDLUnknownField, "BSON field 'changeStreamPreAndPostImages.enabled' is missing or not a boolean")
	}
	return nil
}

// Create creates a collection (capped.go: capped ones; view.go: views).
// Time-series collections are refused; changeStreamPreAndPostImages: {enabled: bool}
// turns pre-images on; other options are kept and echoed.
func (s *Store) Create(ns Namespace, options bson.D) error {
	return s.create(ns, options, newUUID(), false)
}

// CreateWithUUID creates a collection that keeps the given UUID, as
// applyOps does for mongorestore --preserveUUID.
func (s *Store) CreateWithUUID(ns Namespace, options bson.D, uuid bson.Binary) error {
	if uuid.Subtype != bson.TypeBinaryUUID || len(uuid.Data) != 16 {
		return mongoerr.New(mongoerr.InvalidUUID, "a collection UUID is a 16-byte binary of subtype 4")
	}
	return s.create(ns, options, bson.Binary{Subtype: uuid.Subtype, Data: bytes.Clone(uuid.Data)}, true)
}

func (s *Store) create(ns Namespace, options bson.D, uuid bson.Binary, given bool) error {
	if err := validNamespace(ns); err != nil {
		return err
	}
	options, isTS, err := normaliseTimeseries(options) // timeseries.go
	if err != nil {
		return err
	}
	for _, o := range options {
		switch o.Key {
		case "changeStreamPreAndPostImages":
			if err := checkPrePost(o.Value); err != nil {
				return err
			}
		}
	}
	if err := checkValidatorOptions(options); err != nil {
		return err
	}
	for _, o := range options {
		if o.Key != "collation" {
			continue
		}
		coll, err := parseCollationOption(o.Value)
		if err != nil {
			return err
		}
		options = withCollation(options, coll)
		break
	}
	if err := checkCapped(options); err != nil {
		return err
	}
	view, err := parseView(options)
	if err != nil {
		return err
	}
	if !isTS {
		if options, err = normaliseClustered(options); err != nil {
			return err
		}
	}
	return s.write(func(t *tx) error {
		if s.collLocked(ns) != nil {
			return mongoerr.New(mongoerr.NamespaceExists, "Collection %s already exists.", ns)
		}
		if view != nil {
			if err := s.checkViewGraphLocked(ns, view); err != nil {
				return err
			}
		}
		if given && s.uuidTakenLocked(uuid) {
			return mongoerr.New(mongoerr.NamespaceExists, "a collection with UUID %x already exists", uuid.Data)
		}
		c := s.createLocked(ns, uuid, options)
		t.emit(OplogEntry{Op: "create", NS: ns, UUID: c.info.UUID, Extra: createExtra(options)})
		return nil
	})
}

func (s *Store) uuidTakenLocked(uuid bson.Binary) bool {
	for _, colls := range s.dbs {
		for _, c := range colls {
			if bytes.Equal(c.info.UUID.Data, uuid.Data) {
				return true
			}
		}
	}
	return false
}

// dropLocked removes a collection from the catalog.
func (s *Store) dropLocked(ns Namespace) {
	s.abortOnLocked(ns) // txn.go
	delete(s.dbs[ns.DB], ns.Coll)
	if len(s.dbs[ns.DB]) == 0 {
		delete(s.dbs, ns.DB)
	}
}

// Drop drops a collection and reports how many indexes it had.
func (s *Store) Drop(ns Namespace) (nIndexesWas int, err error) {
	err = s.write(func(t *tx) error {
		c := s.collLocked(ns)
		if c == nil {
			return mongoerr.New(mongoerr.NamespaceNotFound, "ns not found: %s", ns)
		}
		nIndexesWas = len(c.indexes)
		s.dropLocked(ns)
		t.emit(OplogEntry{Op: "drop", NS: ns, UUID: c.info.UUID})
		return nil
	})
	return nIndexesWas, err
}

// DropDatabase drops every collection of db (each recorded as a drop), then
// records the dropDatabase. A database that does not exist is no error.
func (s *Store) DropDatabase(db string) error {
	return s.write(func(t *tx) error {
		colls := s.dbs[db]
		if len(colls) == 0 {
			return nil
		}
		names := make([]string, 0, len(colls))
		for name := range colls {
			names = append(names, name)
		}
		slices.Sort(names)
		for _, name := range names {
			ns := Namespace{DB: db, Coll: name}
			uuid := colls[name].info.UUID
			s.dropLocked(ns)
			t.emit(OplogEntry{Op: "drop", NS: ns, UUID: uuid})
		}
		t.emit(OplogEntry{Op: "dropDatabase", NS: Namespace{DB: db}})
		return nil
	})
}

// Rename renames a collection, keeping its UUID, documents and indexes.
// With dropTarget an existing target is dropped first.
func (s *Store) Rename(from, to Namespace, dropTarget bool) error {
	if err := validNamespace(to); err != nil {
		return err
	}
	return s.write(func(t *tx) error {
		c := s.collLocked(from)
		if c == nil {
			return mongoerr.New(mongoerr.NamespaceNotFound, "Source collection %s does not exist", from)
		}
		if from == to {
			return mongoerr.New(mongoerr.IllegalOperation, "Can't rename a collection to itself")
		}
		extra := bson.D{{Key: "to", Value: to.String()}}
		if target := s.collLocked(to); target != nil {
			if !dropTarget {
				return mongoerr.New(mongoerr.NamespaceExists, "target namespace exists")
			}
			extra = append(extra, bson.E{Key: "dropTarget", Value: target.info.UUID})
		}
		if from.DB != to.DB {
			s.renameAcrossLocked(t, c, from, to, extra)
			return nil
		}
		s.renameLocked(from, to)
		t.emit(OplogEntry{Op: "rename", NS: from, UUID: c.info.UUID, Extra: extra})
		return nil
	})
}

// renameAcrossLocked moves collection c to another database as MongoDB
// does: it copies c into a new temporary collection of the target database
// (its indexes, then its documents), renames that onto the target, and
// drops the source. The collection gets a new UUID, and the oplog records
// each step.
func (s *Store) renameAcrossLocked(t *tx, c *collection, from, to Namespace, extra bson.D) {
	tmp := Namespace{DB: to.DB}
	for tmp.Coll == "" || s.collLocked(tmp) != nil {
		tmp.Coll = "tmp" + randomName(5) + ".renameCollection"
	}
	nc := s.createLocked(tmp, newUUID(), c.info.Options)
	t.emit(OplogEntry{Op: "create", NS: tmp, UUID: nc.info.UUID, Extra: createExtra(c.info.Options)})
	for _, spec := range c.specs()[1:] {
		ix, err := newIndex(spec)
		if err != nil {
			continue // it was built from this spec once
		}
		if nc.addIndex(tmp, ix) == nil {
			t.emit(OplogEntry{Op: "createIndexes", NS: tmp, UUID: nc.info.UUID, Extra: bson.D{{Key: "indexes", Value: bson.A{indexDoc(spec)}}}})
		}
	}
	for _, r := range c.recs {
		if r.doc == nil || nc.insert(tmp, r.doc) != nil {
			continue // the documents already satisfied these indexes
		}
		t.emit(OplogEntry{Op: "insert", NS: tmp, UUID: nc.info.UUID, DocKey: docKey(r.doc), Doc: r.doc})
	}
	s.renameLocked(tmp, to)
	t.emit(OplogEntry{Op: "rename", NS: tmp, UUID: nc.info.UUID, Extra: extra})
	s.dropLocked(from)
	t.emit(OplogEntry{Op: "drop", NS: from, UUID: c.info.UUID})
}

// randomName returns n random lower-case letters and digits.
func randomName(n int) string {
	const chars = "abcdefghijklmnopqrstuvwxyz0123456789"
	b := make([]byte, n)
	_, _ = rand.Read(b)
	for i := range b {
		b[i] = chars[int(b[i])%len(chars)]
	}
	return string(b)
}

func (s *Store) renameLocked(from, to Namespace) {
	c := s.collLocked(from)
	s.dropLocked(from)
	if s.collLocked(to) != nil {
		s.dropLocked(to)
	}
	c.info.Name = to.Coll
	db := s.dbs[to.DB]
	if db == nil {
		db = make(map[string]*collection)
		s.dbs[to.DB] = db
	}
	db[to.Coll] = c
}

// CollMod changes collection options: changeStreamPreAndPostImages, and the
// validator options (enforced by validator.go).
func (s *Store) CollMod(ns Namespace, options bson.D) error {
	for _, o := range options {
		switch o.Key {
		case "changeStreamPreAndPostImages":
			if err := checkPrePost(o.Value); err != nil {
				return err
			}
		case "validator", "validationLevel", "validationAction":
		default:
			return mongoerr.New(mongoerr.InvalidOptions, "collMod option %q is not supported by this server", o.Key)
		}
	}
	if err := checkValidatorOptions(options); err != nil {
		return err
	}
	return s.write(func(t *tx) error {
		c := s.collLocked(ns)
		if c == nil {
			return mongoerr.New(mongoerr.NamespaceNotFound, "ns does not exist: %s", ns)
		}
		if c.view != nil && len(options) > 0 {
			return mongoerr.New(mongoerr.InvalidOptions, "option not supported on a view: %s", options[0].Key)
		}
		before := c.info.Options
		if before == nil {
			before = bson.D{}
		}
		collModLocked(c, options)
		extra := append(slices.Clip(options), bson.E{Key: "stateBeforeChange", Value: bson.D{{Key: "collectionOptions", Value: before}}})
		t.emit(OplogEntry{Op: "modify", NS: ns, UUID: c.info.UUID, Extra: extra})
		return nil
	})
}

// collModLocked applies collMod options (a stateBeforeChange field, as
// recorded in the oplog, is skipped).
func collModLocked(c *collection, options bson.D) {
	opts := slices.Clone(c.info.Options)
	for _, o := range options {
		if o.Key == "stateBeforeChange" {
			continue
		}
		if o.Key == "index" { // a journaled CollModTTL (ttl.go)
			applyIndexModLocked(c, o.Value)
			continue
		}
		i := slices.IndexFunc(opts, func(e bson.E) bool { return e.Key == o.Key })
		if i >= 0 {
			opts[i] = o
		} else {
			opts = append(opts, o)
		}
	}
	c.info.Options = opts
	c.info.PreAndPostImages = prePostEnabled(opts)
	c.validator = newValidator(opts)
}

// indexDoc is how an index is described in listIndexes and in the oplog.
func indexDoc(spec IndexSpec) bson.D {
	d := bson.D{{Key: "v", Value: int32(2)}, {Key: "key", Value: spec.Key}, {Key: "name", Value: spec.Name}}
	if spec.Unique {
		d = append(d, bson.E{Key: "unique", Value: true})
	}
	if spec.Sparse {
		d = append(d, bson.E{Key: "sparse", Value: true})
	}
	return append(d, spec.Options...)
}

// sameKey reports whether two key patterns are the same.
func sameKey(a, b bson.D) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i].Key == "_fts" && b[i].Key == "_fts" {
			continue // a text index's key: its fields are in its weights
		}
		if sa, ok := fts.KeyString(a[i].Value); ok {
			if sb, ok := fts.KeyString(b[i].Value); ok && sa == sb && a[i].Key == b[i].Key {
				continue // "hashed"
			}
		}
		da, err1 := keyDirection(a[i].Value)
		db, err2 := keyDirection(b[i].Value)
		if a[i].Key != b[i].Key || err1 != nil || err2 != nil || da != db {
			return false
		}
	}
	return true
}

// CreateIndexes builds indexes over the existing documents, creating the
// collection if needed. An index identical to an existing one is skipped.
func (s *Store) CreateIndexes(ns Namespace, specs []IndexSpec) (createdCollection bool, before, after int, err error) {
	return s.createIndexes(nil, ns, specs)
}

// CreateIndexes is Store.CreateIndexes within the transaction. As in
// mongod, only a collection the transaction creates (by this command or
// earlier, and still empty) may get indexes in one.
func (x *Txn) CreateIndexes(ns Namespace, specs []IndexSpec) (createdCollection bool, before, after int, err error) {
	return x.s.createIndexes(x, ns, specs)
}

func (s *Store) createIndexes(rd *Txn, ns Namespace, specs []IndexSpec) (createdCollection bool, before, after int, err error) {
	if err := validNamespace(ns); err != nil {
		return false, 0, 0, err
	}
	if len(specs) == 0 {
		return false, 0, 0, mongoerr.New(mongoerr.BadValue, "Must specify at least one index to create")
	}
	for i := range specs {
		if specs[i].Name == "" {
			specs[i].Name = IndexName(specs[i].Key)
		}
		if fts.IsTextKey(specs[i].Key) { // mongod's stored form: {_fts: "text", _ftsx: 1}, weights, languages
			key, opts, err := fts.Normalise(specs[i].Key, specs[i].Options)
			if err != nil {
				return false, 0, 0, err
			}
			specs[i].Key, specs[i].Options = key, opts
		}
		if _, err := newIndex(specs[i]); err != nil {
			return false, 0, 0, err
		}
		if err := checkTTL(specs[i]); err != nil {
			return false, 0, 0, err
		}
	}
	err = s.writeAs(rd, func(t *tx) error {
		if c := s.collLocked(ns); rd != nil && c != nil && (!rd.made[c] || c.live > 0) {
			return mongoerr.New(mongoerr.OperationNotSupportedInTransaction,
				"Cannot create new indexes on existing collection %s in a multi-document transaction.", ns)
		}
		c, created, err := s.ensureLocked(t, ns)
		if err != nil {
			return err
		}
		if o := s.madeByOtherLocked(rd, c); o != nil {
			if rd != nil {
				return writeConflict()
			}
			return &blockedError{done: o.done}
		}
		createdCollection = created
		before = len(c.indexes)
		var built []IndexSpec
		for _, spec := range specs {
			spec = c.collatedSpec(spec)
			done, err := checkNewIndex(c, spec)
			if err == nil && !done {
				var ix *index
				if ix, err = newIndex(spec); err == nil {
					if werr := c.addIndex(ns, ix); werr != nil {
						err = werr
					}
				}
			}
			if err != nil {
				c.indexes = c.indexes[:before] // all or nothing, as MongoDB builds them together
				return err
			}
			if !done {
				built = append(built, spec)
			}
		}
		for _, spec := range built {
			t.emit(OplogEntry{Op: "createIndexes", NS: ns, UUID: c.info.UUID, Extra: bson.D{{Key: "indexes", Value: bson.A{indexDoc(spec)}}}})
		}
		after = len(c.indexes)
		return nil
	})
	return createdCollection, before, after, err
}

// checkNewIndex compares a requested index with the existing ones: done
// means an identical index exists.
func checkNewIndex(c *collection, spec IndexSpec) (done bool, err error) {
	if fts.IsTextKey(spec.Key) {
		for _, ix := range c.indexes {
			if ix.text != nil && ix.spec.Name != spec.Name {
				return false, mongoerr.New(mongoerr.CannotCreateIndex, "only one text index per collection allowed, found existing text index \"%s\"", ix.spec.Name)
			}
		}
	}
	for _, ix := range c.indexes {
		// The collation identifies an index as its key does: two indexes
		// may share a key under different collations.
		coll, _ := parseCollationOption(lookupD(spec.Options, "collation"))
		same := sameKey(ix.spec.Key, spec.Key) && ix.coll.SameAs(coll)
		switch {
		case ix.spec.Name == spec.Name && same && ix.spec.Unique == spec.Unique && ix.spec.Sparse == spec.Sparse:
			return true, nil
		case ix.spec.Name == spec.Name && same:
			return false, mongoerr.New(mongoerr.IndexOptionsConflict,
				"An equivalent index already exists with the same name but different options. Requested index: %v, existing index: %v",
				indexDoc(spec), indexDoc(ix.spec))
		case ix.spec.Name == spec.Name:
			return false, mongoerr.New(mongoerr.IndexKeySpecsConflict,
				"An existing index has the same name as the requested index. When index names are not specified, they are auto generated and can cause conflicts. Please refer to our documentation. Requested index: %v, existing index: %v",
				indexDoc(spec), indexDoc(ix.spec))
		case same && ix.spec.Name == "_id_":
			return true, nil
		case same:
			return false, mongoerr.New(mongoerr.IndexOptionsConflict, "Index already exists with a different name: %s", ix.spec.Name)
		}
	}
	return false, nil
}

// ListIndexes lists a collection's indexes, _id_ first.
func (s *Store) ListIndexes(ns Namespace) ([]IndexSpec, error) {
	var out []IndexSpec
	err := s.read(func() error {
		c := s.collLocked(ns)
		if c == nil || s.madeByOtherLocked(nil, c) != nil {
			return mongoerr.New(mongoerr.NamespaceNotFound, "ns does not exist: %s", ns)
		}
		if err := refuseViewLocked(ns, c); err != nil {
			return err
		}
		out = clusteredSpecs(c, c.specs())
		if c.ts != nil {
			out = out[1:] // a time-series collection has no _id index to list
		}
		return nil
	})
	return out, err
}

// DropIndexes drops indexes by name; ["*"] drops all but _id_.
func (s *Store) DropIndexes(ns Namespace, names []string) (nIndexesWas int, err error) {
	err = s.write(func(t *tx) error {
		c := s.collLocked(ns)
		if c == nil {
			return mongoerr.New(mongoerr.NamespaceNotFound, "ns not found %s", ns)
		}
		nIndexesWas = len(c.indexes)
		var drop []string
		if len(names) == 1 && names[0] == "*" {
			for _, ix := range c.indexes[1:] {
				drop = append(drop, ix.spec.Name)
			}
		} else {
			for _, name := range names {
				if name == "_id_" {
					return mongoerr.New(mongoerr.InvalidOptions, "cannot drop _id index")
				}
				if c.index(name) == nil {
					return mongoerr.New(mongoerr.IndexNotFound, "index not found with name [%s]", name)
				}
			}
			drop = names
		}
		for _, name := range drop {
			spec := dropIndexLocked(c, name)
			t.emit(OplogEntry{Op: "dropIndexes", NS: ns, UUID: c.info.UUID, Extra: bson.D{{Key: "indexes", Value: bson.A{indexDoc(spec)}}}})
		}
		return nil
	})
	return nIndexesWas, err
}

func dropIndexLocked(c *collection, name string) IndexSpec {
	i := slices.IndexFunc(c.indexes, func(ix *index) bool { return ix.spec.Name == name })
	spec := c.indexes[i].spec
	c.indexes = slices.Delete(c.indexes, i, i+1)
	return spec
}

// collatedSpec gives spec its full collation: the one it names, or else
// the collection's default, as mongod does; a simple collation is not
// shown.
func (c *collection) collatedSpec(spec IndexSpec) IndexSpec {
	coll := c.coll
	if v := lookupD(spec.Options, "collation"); v != nil {
		coll, _ = parseCollationOption(v) // newIndex has checked it
	}
	spec.Options = withCollation(spec.Options, coll)
	return spec
}
