package mongo

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"sync"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"

	"github.com/tide-cdc/tide/cdc"
)

// multi is the state of a source that captures many collections through
// one database- or cluster-level change stream.
type multi struct {
	filter *filter
	epochs epochs
}

func newMulti(f *filter) *multi {
	return &multi{filter: f, epochs: epochs{maps: map[uint64]string{}}}
}

// catalog is the set of captured collections, "db.coll" -> UUID (hex; ""
// when the server reports none).
type catalog map[string]string

// json is the catalog as a JSON object with sorted keys.
func (c catalog) json() string {
	b, _ := json.Marshal(map[string]string(c)) // map keys are sorted
	return string(b)
}

func parseCatalog(s string) (catalog, error) {
	c := catalog{}
	if err := json.Unmarshal([]byte(s), &c); err != nil {
		return nil, err
	}
	return c, nil
}

// epochs records the catalog as of each position handed out and not yet
// acknowledged. The reader runs ahead of commits, so the catalog it holds
// may be newer than the one at the position being committed; each
// position names its catalog's epoch instead, and Identity stores every
// epoch that a commit may still name, from the last acknowledged one on.
// A catalog changes only on DDL, so there is usually one.
type epochs struct {
	mu    sync.Mutex // guards the fields below
	acked uint64
	maps  map[uint64]string // epoch -> catalog JSON
}

func (e *epochs) add(epoch uint64, cat catalog) {
	j := cat.json()
	e.mu.Lock()
	e.maps[epoch] = j
	e.mu.Unlock()
}

// ack forgets the epochs before the one a saved checkpoint names.
func (e *epochs) ack(epoch uint64) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if epoch <= e.acked {
		return
	}
	e.acked = epoch
	for k := range e.maps {
		if k < epoch {
			delete(e.maps, k)
		}
	}
}

func (e *epochs) meta(m map[string]string) {
	e.mu.Lock()
	defer e.mu.Unlock()
	for k, v := range e.maps {
		m[catalogKey(k)] = v
	}
}

func catalogKey(epoch uint64) string { return "catalog." + strconv.FormatUint(epoch, 10) }

// positionEpoch reads the "catalog" field that ends a multi-collection
// position.
func positionEpoch(p cdc.Position) (uint64, bool) {
	const key = `"catalog":`
	i := bytes.LastIndex(p, []byte(key))
	if i < 0 {
		return 0, false
	}
	rest := p[i+len(key):]
	j := bytes.IndexByte(rest, '}')
	if j < 0 {
		return 0, false
	}
	n, err := strconv.ParseUint(string(rest[:j]), 10, 64)
	return n, err == nil
}

// multiStreamHash binds the stream hash to the filters, which change
// what the stream returns.
func multiStreamHash(base string, f *filter) string {
	h := sha256.New()
	inc, _ := json.Marshal(globTexts(f.include))
	exc, _ := json.Marshal(globTexts(f.exclude))
	fmt.Fprintf(h, "%s\ndatabase=%s\ncollections=%s\nexclude=%s\n", base, f.database, inc, exc)
	return hex.EncodeToString(h.Sum(nil))
}

func globTexts(gs []nsGlob) []string {
	out := make([]string, len(gs))
	for i, g := range gs {
		out[i] = g.text
	}
	return out
}

// narrowed returns the checkpoint's identity saved with the configured
// filter in place of its own when the configured one only narrows it
// (filter.narrows) and nothing else that the stream hash covers changed,
// so that an operator can step around a collection without a reset; the
// collections no longer captured leave the catalog (prepareCatalog).
// Otherwise it returns saved as it is, and checkIdentity refuses a
// changed filter. base is the stream hash without the filter. A snapshot
// under way keeps its filter: its plan counts the catalog's collections.
func (s *Source) narrowed(saved map[string]string, base string, pos *position) map[string]string {
	now := s.ident
	if saved["collections"] == now["collections"] && saved["exclude"] == now["exclude"] ||
		saved["database"] != now["database"] || pos == nil || pos.Snapshot != nil {
		return saved
	}
	var inc, exc []string
	if json.Unmarshal([]byte(saved["collections"]), &inc) != nil || json.Unmarshal([]byte(saved["exclude"]), &exc) != nil {
		return saved
	}
	old, err := newFilter(s.cfg.Database, inc, exc)
	if err != nil || multiStreamHash(base, old) != saved["stream_hash"] || !s.multi.filter.narrows(old) {
		return saved
	}
	s.log.Info("the filter narrows the checkpoint's: accepted; the collections it leaves out are no longer captured",
		"collections", now["collections"], "exclude", now["exclude"],
		"checkpoint_collections", saved["collections"], "checkpoint_exclude", saved["exclude"])
	saved = maps.Clone(saved)
	for _, k := range []string{"collections", "exclude", "stream_hash"} {
		saved[k] = now[k]
	}
	return saved
}

// listCaptured lists the collections the filter captures now, with
// their UUIDs. Views and time-series collections, which have no change
// events of their own, are skipped with a warning.
func (s *Source) listCaptured(ctx context.Context) (catalog, error) {
	f := s.multi.filter
	dbs := []string{f.database}
	if f.database == "" {
		names, err := s.client.ListDatabaseNames(ctx, bson.D{})
		if err != nil {
			if isCode(err, codeUnauthorized) {
				return nil, fmt.Errorf("%w: listDatabases is not authorized: grant the user the readAnyDatabase role "+
					"(a cluster-wide source lists every database): %v", ErrNotAdmitted, err)
			}
			return nil, fmt.Errorf("listDatabases: %w", err)
		}
		dbs = dbs[:0]
		for _, db := range names {
			if f.dbMayMatch(db) && capturable(db, "x") {
				dbs = append(dbs, db)
			}
		}
	}
	cat := catalog{}
	for _, db := range dbs {
		cur, err := s.client.Database(db).ListCollections(ctx, bson.D{})
		if err != nil {
			if isCode(err, codeUnauthorized) {
				return nil, fmt.Errorf("%w: listCollections on %s is not authorized: grant the user the read role on database %q: %v",
					ErrNotAdmitted, db, db, err)
			}
			return nil, fmt.Errorf("listCollections %s: %w", db, err)
		}
		var colls []collInfo
		if err := cur.All(ctx, &colls); err != nil {
			return nil, fmt.Errorf("listCollections %s: %w", db, err)
		}
		for _, c := range colls {
			if !f.match(db, c.Name) {
				continue
			}
			ns := db + "." + c.Name
			if c.Type != "" && c.Type != "collection" {
				s.log.Warn("not capturing a matching namespace that is not a collection", "namespace", ns, "type", c.Type)
				continue
			}
			if err := s.checkImages(ns, c); err != nil {
				return nil, err
			}
			cat[ns] = hex.EncodeToString(c.Info.UUID.Data)
		}
	}
	for _, g := range f.include {
		if !strings.ContainsAny(g.coll, `*?[\`) && !strings.ContainsAny(g.db, `*?[\`) {
			if _, ok := cat[g.db+"."+g.coll]; !ok {
				s.log.Warn("a collection named in collections does not exist (yet); it is captured once created", "namespace", g.db+"."+g.coll)
			}
		}
	}
	return cat, nil
}

// collInfo is one listCollections entry.
type collInfo struct {
	Name    string `bson:"name"`
	Type    string `bson:"type"`
	Options struct {
		Images struct {
			Enabled bool `bson:"enabled"`
		} `bson:"changeStreamPreAndPostImages"`
	} `bson:"options"`
	Info struct {
		UUID bson.Binary `bson:"uuid"`
	} `bson:"info"`
}

// checkImages refuses a collection without pre- and post-images when a
// mode requires them, and warns when a mode would like them.
func (s *Source) checkImages(ns string, c collInfo) error {
	if c.Options.Images.Enabled || (s.cfg.FullDocument != "when_available" && s.cfg.FullDocument != "required" && s.cfg.BeforeChange == "off") {
		return nil
	}
	if s.cfg.FullDocument == "required" || s.cfg.BeforeChange == "required" {
		return fmt.Errorf("%w: %s does not record pre- and post-images, which full_document/before_change \"required\" need: "+
			"run db.runCommand({collMod: %q, changeStreamPreAndPostImages: {enabled: true}}) or exclude it", ErrNotAdmitted, ns, c.Name)
	}
	s.log.Warn("collection does not record pre- and post-images; images will be null", "namespace", ns)
	return nil
}

// prepareCatalog sets the reader's catalog: from the checkpoint, checked
// against the collections that exist now, or, on a fresh start, the
// collections admission listed (the reader then checks, once it holds
// the start token, that they did not change in between).
//
// A collection of the checkpoint's catalog with another UUID now was
// dropped and re-created, or renamed over, while the pipeline was
// stopped. From a stream position it is accepted provisionally: the
// stream from the checkpoint must show its drop or rename before any
// event of the new collection (checkReplaced), or the pipeline stops. A
// snapshot copies by name, so from a snapshot position it is refused.
func (r *reader) prepareCatalog(ctx context.Context, pos *position, restored *cdc.Checkpoint) error {
	s := r.s
	r.vanished = map[string]bool{}
	r.replaced = map[string]replacement{}
	if pos == nil {
		r.catalog, r.epoch = maps.Clone(s.live.colls), 0
		s.multi.epochs.add(0, r.catalog)
		return nil
	}
	if pos.Catalog == nil {
		return fmt.Errorf("%w: the checkpoint position has no catalog epoch (it was written by a single-collection source); %s", ErrIdentity, resetHint)
	}
	e := *pos.Catalog
	j, ok := restored.Meta[catalogKey(e)]
	if !ok {
		return fmt.Errorf("%w: the checkpoint has no %s, the captured collections at its position; %s", ErrIdentity, catalogKey(e), resetHint)
	}
	cat, err := parseCatalog(j)
	if err != nil {
		return fmt.Errorf("%w: the checkpoint's %s is not a JSON object of namespaces and UUIDs: %v; %s", ErrIdentity, catalogKey(e), err, resetHint)
	}
	for _, ns := range slices.Sorted(maps.Keys(cat)) {
		if !s.multi.filter.matchNS(ns) {
			// The filter was narrowed (checked by narrowed): the
			// collection is no longer followed.
			s.log.Info("not capturing a collection of the checkpoint that the narrowed filter leaves out", "collection", ns)
			delete(cat, ns)
			continue
		}
		now, ok := s.live.colls[ns]
		switch {
		case !ok:
			// Dropped or renamed while stopped: the stream from the
			// checkpoint must show it, or the pipeline stops (vanished).
			r.vanished[ns] = true
		case now != cat[ns] && pos.Snapshot != nil:
			return r.replacedError(ns, cat[ns], now, "while the initial snapshot, which copies collections by name, was under way")
		case now != cat[ns]:
			r.replaced[ns] = replacement{was: cat[ns], now: now}
			s.log.Info("a captured collection has another UUID than in the checkpoint (dropped and re-created, or renamed over, "+
				"while the pipeline was stopped): accepted if the change stream shows its drop or rename before any event of the new one",
				"collection", ns, "checkpoint_uuid", cat[ns], "uuid", now)
		}
	}
	r.catalog, r.epoch = cat, e
	s.multi.epochs.add(e, cat)
	s.multi.epochs.ack(e)
	return nil
}

// replacement is a captured collection whose UUID changed while the
// pipeline was stopped, and whose drop or rename the reader has not yet
// seen in the stream.
type replacement struct {
	was string // the UUID in the checkpoint's catalog
	now string // the UUID admission found
}

// replacedError is the refusal of a collection that has another UUID
// than in the checkpoint, without its drop or rename in the stream from
// the checkpoint: the new collection's documents must not be mixed with
// the old one's changes. why says what the source saw.
func (r *reader) replacedError(ns, was, now, why string) error {
	entry := ns // a cluster-wide filter's entries are "db.coll"
	if r.s.cfg.Database != "" {
		entry = ns[len(r.s.cfg.Database)+1:]
	}
	return fmt.Errorf("%w: collection %s has UUID %s now but %s in the checkpoint: it was dropped and re-created "+
		"(or replaced by a rename) while the pipeline was stopped, and %s, so its new documents could be mixed "+
		"with the old collection's changes; the checkpoint goes no further. Ways on: start over with "+
		"tide checkpoint reset -f FILE --yes (with a new snapshot if snapshot is initial), or re-snapshot with "+
		"tide snapshot -f FILE (copies the collections as they are now, framed by snapshot lines), "+
		"or add %s to the source's exclude to go on without it (a narrower filter is accepted at restart)",
		ErrIdentity, ns, quote(now), quote(was), why, quote(entry))
}

// checkReplaced verifies, for one event of the stream, the collections
// that prepareCatalog accepted with a new UUID: the first event of such
// a namespace that is not a change of the old collection (its UUID in
// the checkpoint) must be its drop, its rename, a rename over it
// (dropTarget) or the drop of its database; anything else, an event of
// the new collection first, stops the pipeline before the event is
// handed out. id is the event's collectionUUID, hex ("" when absent).
func (r *reader) checkReplaced(ev *cdc.Event, id string) error {
	if ev.Op == cdc.OpDropDatabase {
		for ns := range r.replaced {
			if strings.HasPrefix(ns, ev.Namespace+".") {
				r.resolved(ns, ev.Op)
			}
		}
		return nil
	}
	if ev.Op == cdc.OpRename {
		if to := renameTarget(*ev); to != ev.Namespace {
			if _, ok := r.replaced[to]; ok {
				r.resolved(to, ev.Op) // renamed over with dropTarget: the old one is gone
			}
		}
	}
	rep, ok := r.replaced[ev.Namespace]
	if !ok {
		return nil
	}
	old := id == "" || id == rep.was
	switch {
	case old && (ev.Op == cdc.OpDrop || ev.Op == cdc.OpRename):
		r.resolved(ev.Namespace, ev.Op)
		return nil
	case id != "" && id == rep.was:
		return nil // a change of the old collection, before its drop
	}
	what := fmt.Sprintf("the change stream from the checkpoint shows an event of it (%s", ev.Op)
	if id != "" {
		what += ", UUID " + quote(id)
	}
	what += ") before any drop or rename of it"
	return &permanentError{r.replacedError(ev.Namespace, rep.was, rep.now, what)}
}

// resolved records that the stream showed the end of the old collection
// of a replaced namespace: from here on the catalog follows the stream.
func (r *reader) resolved(ns string, op cdc.Op) {
	rep := r.replaced[ns]
	delete(r.replaced, ns)
	r.s.log.Info("the change stream shows the old collection's end: the collection re-created while the pipeline was stopped is captured from its create",
		"collection", ns, "event", string(op), "checkpoint_uuid", rep.was, "uuid", rep.now)
}

// errCatalogMoved: the collections changed while the start token was
// taken; the fresh start is tried again.
var errCatalogMoved = errors.New("the captured collections changed while the change stream was opened")

// bump records a change of the catalog: the positions from here on name
// a new epoch.
func (r *reader) bump() {
	r.epoch++
	r.s.multi.epochs.add(r.epoch, r.catalog)
}

// apply updates the catalog for one change event of a multi-collection
// stream and reports whether the event is delivered. uuid is the event's
// collectionUUID (nil when absent).
func (r *reader) apply(ev *cdc.Event, uuid []byte) (bool, error) {
	f := r.s.multi.filter
	ns := ev.Namespace
	db, coll, _ := strings.Cut(ns, ".")
	id := hex.EncodeToString(uuid)
	if len(r.replaced) > 0 {
		if err := r.checkReplaced(ev, id); err != nil {
			return false, err
		}
	}
	switch ev.Op {
	case cdc.OpCreate:
		delete(r.vanished, ns)
		if !f.match(db, coll) {
			return false, nil
		}
		r.catalog[ns] = id
		r.bump()
		return true, nil
	case cdc.OpDrop:
		delete(r.vanished, ns)
		if _, ok := r.catalog[ns]; ok {
			delete(r.catalog, ns)
			r.bump()
			return true, nil
		}
		return f.match(db, coll), nil
	case cdc.OpRename:
		delete(r.vanished, ns)
		to := renameTarget(*ev)
		_, from := r.catalog[ns]
		changed := false
		if from {
			delete(r.catalog, ns)
			changed = true
		}
		if f.matchNS(to) {
			r.catalog[to] = id
			changed = true
		} else if _, ok := r.catalog[to]; ok { // replaced by a dropTarget rename of an uncaptured one
			delete(r.catalog, to)
			changed = true
		}
		if changed {
			r.bump()
		}
		return from || f.matchNS(to), nil
	case cdc.OpDropDatabase:
		changed := false
		for k := range r.catalog {
			if strings.HasPrefix(k, db+".") {
				delete(r.catalog, k)
				changed = true
			}
		}
		for k := range r.vanished {
			if strings.HasPrefix(k, db+".") {
				delete(r.vanished, k)
			}
		}
		if changed {
			r.bump()
		}
		return f.dbMayMatch(db), nil
	}
	if !f.match(db, coll) {
		return false, nil
	}
	was, ok := r.catalog[ns]
	switch {
	case !ok:
		// A collection that exists without a create event seen: only
		// when the server shows no DDL. Capture it from here on.
		r.catalog[ns] = id
		r.bump()
	case uuid != nil && was != "" && was != id:
		return false, &permanentError{fmt.Errorf("%w: a %s event of %s comes from collection UUID %s, but the captured collection has UUID %s "+
			"(dropped and re-created without its drop in the stream: a pipeline stage that filters out drop, create or rename events hides them "+
			"from the source, which needs them to follow collections); the pipeline stops rather than mix two collections; %s",
			ErrIdentity, ev.Op, ns, id, was, resetHint)}
	}
	return true, nil
}

// checkVanished fails when the stream has caught up and a collection
// the checkpoint captured is gone without its drop, rename or
// dropDatabase in the stream: its history cannot be accounted for; or
// when one that has another UUID now has not had its drop or rename in
// the stream either.
func (r *reader) checkVanished() error {
	if len(r.replaced) > 0 {
		ns := slices.Min(slices.Collect(maps.Keys(r.replaced)))
		rep := r.replaced[ns]
		return &permanentError{r.replacedError(ns, rep.was, rep.now, "the change stream from the checkpoint, read to its end, shows no drop or rename of it")}
	}
	if len(r.vanished) == 0 {
		return nil
	}
	names := slices.Sorted(maps.Keys(r.vanished))
	return &permanentError{fmt.Errorf("%w: collection %s is captured in the checkpoint but no longer exists, and the change stream "+
		"from the checkpoint shows no drop or rename of it; %s", ErrIdentity, strings.Join(names, ", "), resetHint)}
}

// lookupRenamed fills in the full document of an update that
// full_document update_lookup left null because the lookup ran after a
// rename of its collection: MongoDB looks the document up by the event's
// namespace, which the rename emptied, so the new name's document, the
// current version the option promises, would be lost, and a mirror
// following the rename would keep the version before the update. The
// collection is found by the event's collectionUUID; one still under its
// name means the document was deleted since (its delete follows), one no
// longer captured is left alone. Only without user stages, which could
// have changed or removed the fullDocument a server lookup would get.
func (r *reader) lookupRenamed(ctx context.Context, ev *cdc.Event, uuid []byte) error {
	s := r.s
	if s.cfg.FullDocument != "update_lookup" || ev.Op != cdc.OpUpdate || ev.FullDocument != nil ||
		len(uuid) == 0 || ev.DocumentKey == nil || len(s.pipeline) > 0 {
		return nil
	}
	db, coll, _ := strings.Cut(ev.Namespace, ".")
	cur, err := s.client.Database(db).ListCollections(ctx,
		bson.D{{Key: "info.uuid", Value: bson.Binary{Subtype: bson.TypeBinaryUUID, Data: uuid}}})
	if err != nil {
		return fmt.Errorf("listCollections %s, to look up a document of renamed %s: %w", db, ev.Namespace, err)
	}
	var colls []collInfo
	if err := cur.All(ctx, &colls); err != nil {
		return fmt.Errorf("listCollections %s, to look up a document of renamed %s: %w", db, ev.Namespace, err)
	}
	if len(colls) != 1 || colls[0].Name == coll || !s.multi.filter.match(db, colls[0].Name) {
		return nil
	}
	doc, err := s.client.Database(db).Collection(colls[0].Name).FindOne(ctx, bson.Raw(ev.DocumentKey)).Raw()
	if errors.Is(err, mongo.ErrNoDocuments) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("look up a document of %s, renamed %s.%s: %w", ev.Namespace, db, colls[0].Name, err)
	}
	ev.FullDocument = slices.Clone(doc)
	ev.Size += len(doc)
	return nil
}
