package mongo

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"strings"
	"unicode/utf8"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/tide-cdc/tide/cdc"
)

type itemKind uint8

const (
	itemWrite  itemKind = iota // mirror: replace (upsert) or delete; append: insert
	itemDrop                   // drop the target collection (ApplyDDL)
	itemRename                 // rename the target collection (ApplyDDL)
)

// item is one change staged for Commit, holding copies of what it needs
// of its record.
type item struct {
	kind     itemKind
	target   target
	to       target // itemRename: the new name
	key      bson.Raw
	doc      bson.Raw // mirror: the replacement, nil for a delete; append: the envelope
	pos      cdc.Position
	ns       string // the source namespace, for messages
	op       cdc.Op
	keyValue bson.RawValue // the _id, for messages and dead letters
}

// target is a target collection.
type target struct{ db, coll string }

func (t target) String() string { return t.db + "." + t.coll }

// stage holds the changes put since the last Commit, in order.
type stage struct {
	mirror  bool
	items   []item
	bytes   int
	routes  map[string]target // source namespace -> target, rendered once
	letters []cdc.DeadLetter  // the pipeline's, written with the batch (deadletter.go)
}

func (st *stage) reset() {
	clear(st.items) // drop references to the copies
	st.items = st.items[:0]
	st.bytes = 0
	clear(st.letters)
	st.letters = st.letters[:0]
}

// add stages rec.
func (st *stage) add(s *Sink, rec *cdc.Record) error {
	tgt, err := st.route(s, rec)
	if err != nil {
		return err
	}
	if !st.mirror {
		doc, id, err := envelope(s.cfg.Pipeline, rec)
		if err != nil {
			return err
		}
		st.push(item{kind: itemWrite, target: tgt, doc: doc, pos: rec.Pos, ns: rec.Namespace, op: rec.Op, keyValue: id})
		return nil
	}
	switch rec.Op {
	case cdc.OpInsert, cdc.OpReplace, cdc.OpUpdate, cdc.OpSnapshot:
		if rec.Op == cdc.OpSnapshot && rec.DocumentKey == nil {
			// A re-snapshot's end line: the documents deleted during the
			// gap it closed are not found by this sink (see doc.go).
			return nil
		}
		if rec.FullDocument == nil {
			if rec.Op == cdc.OpUpdate {
				// update_lookup found the document deleted since: its
				// delete follows and decides.
				return nil
			}
			return fmt.Errorf("mongo mirror: %s event on %s at position %s has no full document", rec.Op, rec.Namespace, rec.Pos)
		}
		key, id, err := documentKey(rec)
		if err != nil {
			return err
		}
		st.push(item{kind: itemWrite, target: tgt, key: key, doc: bytes.Clone(rec.FullDocument), pos: rec.Pos, ns: rec.Namespace, op: rec.Op, keyValue: id})
	case cdc.OpDelete:
		key, id, err := documentKey(rec)
		if err != nil {
			return err
		}
		st.push(item{kind: itemWrite, target: tgt, key: key, pos: rec.Pos, ns: rec.Namespace, op: rec.Op, keyValue: id})
	case cdc.OpDrop, cdc.OpRename:
		if !s.cfg.ApplyDDL {
			s.ddlSkipped.Add(1)
			s.log.Info("not applying a collection event (apply_ddl is false)", "op", rec.Op, "namespace", rec.Namespace, "target", tgt.String())
			return nil
		}
		it := item{kind: itemDrop, target: tgt, pos: rec.Pos, ns: rec.Namespace, op: rec.Op}
		if rec.Op == cdc.OpRename {
			to, err := renameTarget(rec)
			if err != nil {
				return err
			}
			if it.to, err = s.render(to, rec.Pos); err != nil {
				return err
			}
			if it.to == it.target {
				s.log.Info("rename changes no target collection: both names map to one", "namespace", rec.Namespace, "to", to, "target", tgt.String())
				return nil
			}
			it.kind = itemRename
		}
		st.push(it)
	default:
		// dropDatabase (each collection's drop came before it), index and
		// collection-option changes, invalidate: not replicated.
		s.ddlSkipped.Add(1)
		s.log.Info("not replicating a collection event", "op", rec.Op, "namespace", rec.Namespace)
	}
	return nil
}

func (st *stage) push(it item) {
	st.bytes += len(it.doc) + len(it.key)
	st.items = append(st.items, it)
}

// route returns the target of rec's namespace.
func (st *stage) route(s *Sink, rec *cdc.Record) (target, error) {
	key := rec.Namespace
	if rec.Route != "" {
		key += "\x00" + rec.Route // a route transform's {route}
	}
	if t, ok := st.routes[key]; ok {
		return t, nil
	}
	t, err := s.renderRoute(rec.Namespace, rec.Route, rec.Pos)
	if err != nil {
		return target{}, err
	}
	if st.routes == nil {
		st.routes = map[string]target{}
	}
	st.routes[key] = t
	return t, nil
}

// render fills the database and collection templates with namespace ns.
func (s *Sink) render(ns string, pos cdc.Position) (target, error) { return s.renderRoute(ns, "", pos) }

// renderRoute is render with route, a route transform's, for {route}.
func (s *Sink) renderRoute(ns, route string, pos cdc.Position) (target, error) {
	db, coll, _ := strings.Cut(ns, ".")
	fill := func(what, tmpl string) (string, error) {
		for _, p := range []struct{ placeholder, value, what string }{{"{db}", db, "database"}, {"{coll}", coll, "collection"}, {"{route}", route, "route (a route transform sets it)"}} {
			if strings.Contains(tmpl, p.placeholder) && p.value == "" {
				return "", fmt.Errorf("namespace %q has no %s name to fill %s", ns, p.what, p.placeholder)
			}
		}
		name := strings.NewReplacer("{db}", db, "{coll}", coll, "{route}", route).Replace(tmpl)
		if err := checkName(what, name); err != nil {
			return "", fmt.Errorf("namespace %q makes %w", ns, err)
		}
		return name, nil
	}
	var t target
	var err error
	if t.db, err = fill("database", s.cfg.Database); err == nil {
		t.coll, err = fill("collection", s.cfg.Collection)
	}
	if err != nil {
		return target{}, fmt.Errorf("mongo sink: target of the record at position %s: %w", pos, err)
	}
	return t, nil
}

// checkName checks a database or collection name as MongoDB would.
func checkName(what, name string) error {
	switch {
	case name == "":
		return fmt.Errorf("an empty %s name", what)
	case strings.ContainsRune(name, 0) || !utf8.ValidString(name):
		return fmt.Errorf("%s name %q, which holds a NUL byte or is not UTF-8", what, name)
	case what == "database" && strings.ContainsAny(name, `/\. "$`):
		return fmt.Errorf("database name %q, which holds one of / \\ . space \" $", name)
	case what == "database" && len(name) > 63:
		return fmt.Errorf("database name %q, longer than MongoDB's 63 bytes", name)
	case what == "collection" && (strings.Contains(name, "$") || strings.HasPrefix(name, "system.")):
		return fmt.Errorf("collection name %q, which holds $ or starts with system.", name)
	}
	return nil
}

// documentKey returns a copy of rec's document key and its _id.
func documentKey(rec *cdc.Record) (bson.Raw, bson.RawValue, error) {
	if len(rec.DocumentKey) == 0 {
		return nil, bson.RawValue{}, fmt.Errorf("mongo mirror: %s event on %s at position %s has no document key", rec.Op, rec.Namespace, rec.Pos)
	}
	key := bson.Raw(bytes.Clone(rec.DocumentKey))
	id, err := key.LookupErr("_id")
	if err != nil {
		return nil, bson.RawValue{}, fmt.Errorf("mongo mirror: %s event on %s at position %s: document key without _id", rec.Op, rec.Namespace, rec.Pos)
	}
	return key, id, nil
}

// renameTarget returns the new namespace of a rename event, from its
// Extra {to: {db, coll}}.
func renameTarget(rec *cdc.Record) (string, error) {
	if rec.Extra != nil {
		if to, ok := bson.Raw(rec.Extra).Lookup("to").DocumentOK(); ok {
			db, ok1 := to.Lookup("db").StringValueOK()
			coll, ok2 := to.Lookup("coll").StringValueOK()
			if ok1 && ok2 {
				return db + "." + coll, nil
			}
		}
	}
	return "", fmt.Errorf("mongo sink: rename of %s at position %s has no {to: {db, coll}} in its event", rec.Namespace, rec.Pos)
}

// maxIDPosition is the longest position kept verbatim in an appended
// document's _id; a longer one is hashed.
const maxIDPosition = 400

// appendID is the _id of the document appended for the record at pos:
// the same on every replay, so that a replayed insert is a duplicate key.
func appendID(pipeline string, pos cdc.Position) string {
	if len(pos) <= maxIDPosition {
		return pipeline + " " + string(pos)
	}
	sum := sha256.Sum256(pos)
	return pipeline + " sha256:" + hex.EncodeToString(sum[:])
}

// envelope returns the BSON document appended for rec: the fields of the
// CDC envelope, with documents as BSON (not JSON text), and its _id.
func envelope(pipeline string, rec *cdc.Record) (bson.Raw, bson.RawValue, error) {
	id := appendID(pipeline, rec.Pos)
	doc := bson.D{
		{Key: "_id", Value: id},
		{Key: "_namespace", Value: rec.Namespace},
		{Key: "_op", Value: string(rec.Op)},
		{Key: "_document_key", Value: rawOrNil(rec.DocumentKey)},
		{Key: "_cluster_time", Value: bson.Timestamp{T: rec.ClusterTime.T, I: rec.ClusterTime.I}},
		{Key: "_wall_time", Value: wallTime(rec.WallTimeMS)},
	}
	var full any = rawOrNil(rec.FullDocument)
	switch rec.PayloadFormat {
	case cdc.PayloadJSON:
		v, err := jsonValue(rec.Payload)
		if err != nil {
			return nil, bson.RawValue{}, fmt.Errorf("mongo sink: payload of the message on %s at position %s: %w", rec.Namespace, rec.Pos, err)
		}
		full = v
	case cdc.PayloadString:
		full = string(rec.Payload)
	case cdc.PayloadBase64:
		full = bson.Binary{Data: bytes.Clone(rec.Payload)}
	}
	doc = append(doc, bson.E{Key: "_full_document", Value: full})
	if rec.PreImage != nil {
		doc = append(doc, bson.E{Key: "_before", Value: bson.Raw(rec.PreImage)})
	}
	doc = append(doc, bson.E{Key: "_update_desc", Value: rawOrNil(rec.UpdateDesc)})
	if rec.Extra != nil {
		doc = append(doc, bson.E{Key: "_extra", Value: bson.Raw(rec.Extra)})
	}
	if len(rec.Headers) > 0 {
		doc = append(doc, bson.E{Key: "_headers", Value: rec.Headers})
	}
	doc = append(doc, bson.E{Key: "_resume_token", Value: rawOrNil(rec.ResumeToken)})
	raw, err := bson.Marshal(doc) // copies every byte it refers to
	if err != nil {
		return nil, bson.RawValue{}, fmt.Errorf("mongo sink: envelope of the %s event on %s at position %s: %w", rec.Op, rec.Namespace, rec.Pos, err)
	}
	return raw, bson.Raw(raw).Lookup("_id"), nil
}

func rawOrNil(b []byte) any {
	if len(b) == 0 {
		return nil
	}
	return bson.Raw(b)
}

func wallTime(ms int64) any {
	if ms == 0 {
		return nil
	}
	return bson.DateTime(ms)
}

// jsonValue converts a JSON payload (Extended JSON allowed) to a BSON
// value of the same shape.
func jsonValue(payload []byte) (bson.RawValue, error) {
	if len(bytes.TrimSpace(payload)) == 0 {
		return bson.RawValue{Type: bson.TypeNull}, nil
	}
	var wrapped bson.Raw
	text := make([]byte, 0, len(payload)+6)
	text = append(append(append(text, `{"v":`...), payload...), '}')
	if err := bson.UnmarshalExtJSON(text, false, &wrapped); err != nil {
		return bson.RawValue{}, err
	}
	return wrapped.Lookup("v"), nil
}
