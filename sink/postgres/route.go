package postgres

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"strings"
	"unicode/utf8"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/tide-cdc/tide/cdc"
)

// table is one table the sink writes.
type table struct {
	name  string      // unquoted, as PostgreSQL knows it
	idx   int         // index in Sink.tables
	typed *typedState // nil for the document layout
	ns    string      // the first namespace routed to it, for messages
	sql   statements
	ready bool // created or checked on this connection's server
	// deferred: the table is missing, and will be typed after the first
	// document key that comes for it.
	deferred bool

	// Only a drop or the source of a rename was routed to it so far: it
	// is not created for that, and a missing one is absent.
	noCreate bool
	absent   bool
}

// isTemplate reports whether a table name holds {db} or {coll}.
func isTemplate(name string) bool {
	return strings.Contains(name, "{db}") || strings.Contains(name, "{coll}") || strings.Contains(name, "{route}")
}

// renderTable fills the table template with namespace ns ("db.coll"). A
// name longer than PostgreSQL's 63-byte limit is cut to 54 bytes and
// given "_" and 8 hex digits of its SHA-256, so that it stays the same
// name on every run and two long names that share their start stay
// apart, where PostgreSQL would cut both to one.
func renderTable(tmpl, ns string) (string, error) {
	db, coll, _ := strings.Cut(ns, ".")
	for _, p := range []struct{ placeholder, value, what string }{{"{db}", db, "database"}, {"{coll}", coll, "collection"}} {
		if strings.Contains(tmpl, p.placeholder) && p.value == "" {
			return "", fmt.Errorf("namespace %q has no %s name to fill %s", ns, p.what, p.placeholder)
		}
	}
	name := strings.NewReplacer("{db}", db, "{coll}", coll).Replace(tmpl)
	if strings.ContainsRune(name, 0) {
		return "", fmt.Errorf("namespace %q makes table name %q, which holds a NUL byte", ns, name)
	}
	if !utf8.ValidString(name) {
		return "", fmt.Errorf("namespace %q makes table name %q, which is not UTF-8", ns, name)
	}
	return shorten(name), nil
}

// shorten returns name if it fits PostgreSQL's identifier limit, or its
// cut and hashed form.
func shorten(name string) string {
	if len(name) <= maxIdentifier {
		return name
	}
	sum := sha256.Sum256([]byte(name))
	cut := maxIdentifier - 9
	for cut > 0 && !utf8.RuneStart(name[cut]) {
		cut--
	}
	return name[:cut] + "_" + hex.EncodeToString(sum[:4])
}

// tableOf returns the index in s.tables of rec's table, adding it on a
// namespace's first record. It does no I/O: Commit creates or checks new
// tables.
func (s *Sink) tableOf(rec *cdc.Record) (int, error) {
	if s.templated && strings.Contains(s.cfg.Table, "{route}") {
		return s.tableOfRoute(rec) // routetable.go
	}
	return s.tableOfNS(rec.Namespace, rec.Pos, false)
}

// tableOfNS is tableOf for namespace ns. noCreate says that the event
// needs no table of its own (a drop, the source of a rename).
func (s *Sink) tableOfNS(ns string, pos cdc.Position, noCreate bool) (int, error) {
	if !s.templated {
		return 0, nil
	}
	if i, ok := s.byNS[ns]; ok {
		s.tables[i].need(noCreate)
		return i, nil
	}
	name, err := renderTable(s.cfg.Table, ns)
	if err != nil {
		return 0, fmt.Errorf("postgres sink: table %q for the record at position %s: %w", s.cfg.Table, pos, err)
	}
	i, ok := s.byName[name]
	if !ok {
		i = len(s.tables)
		cfg := s.cfg
		cfg.Table = name
		s.tables = append(s.tables, &table{name: name, ns: ns, idx: i, sql: newStatementsFor(cfg, i), noCreate: noCreate})
		s.byName[name] = i
	} else {
		s.tables[i].need(noCreate)
	}
	s.byNS[ns] = i
	return i, nil
}

// need records that an event routed to tb; unless noCreate, it needs the
// table to exist, created if missing.
func (tb *table) need(noCreate bool) {
	if noCreate || !tb.noCreate {
		return
	}
	tb.noCreate = false
	if tb.absent {
		tb.absent, tb.ready = false, false
	}
}

// putCollOp stages the drop or the rename of a collection whose table is
// its own (the template has {coll}), in mirror mode: a drop deletes (or,
// with soft_delete, marks deleted) the rows the drop covers; a rename
// moves them to the new name's table. A table that does not exist has
// nothing to drop or move, and is not created for that.
func (s *Sink) putCollOp(rec *cdc.Record) error {
	tbl, err := s.tableOfNS(rec.Namespace, rec.Pos, true)
	if err != nil {
		return err
	}
	op := collOp{tbl: tbl, ct: clusterTime(rec.ClusterTime)}
	if rec.Op == cdc.OpRename {
		to, err := renameTarget(rec)
		if err != nil {
			return err
		}
		if op.to, err = s.tableOfNS(to, rec.Pos, true); err != nil { // made by prepareTables if rows move
			return err
		}
		if op.to == op.tbl {
			return nil // a rename to a name of the same table changes no row
		}
		op.rename = true
	}
	s.stage.colls = append(s.stage.colls, op)
	return nil
}

// resnapshotEnd reports a MongoDB re-snapshot's end line (tide snapshot):
// a snapshot event without a document whose _extra is {resnapshot: "end"}.
func resnapshotEnd(rec *cdc.Record) bool {
	if rec.Op != cdc.OpSnapshot || rec.DocumentKey != nil || rec.Extra == nil {
		return false
	}
	v, _ := bson.Raw(rec.Extra).Lookup("resnapshot").StringValueOK()
	return v == "end"
}

// putResnapshotEnd stages the end of a re-snapshot of rec's namespace:
// its documents were copied again with the cluster time of the copy's
// start, rec's, so the rows older than that are of documents deleted
// during the gap the copy closed. They are deleted (or marked deleted,
// with _tide_op "drop") like a dropped collection's rows, up to just
// before that time.
func (s *Sink) putResnapshotEnd(rec *cdc.Record) error {
	ct := clusterTime(rec.ClusterTime)
	if ct <= 0 {
		return fmt.Errorf("postgres mirror: the re-snapshot end line of %s at position %s has no cluster time", rec.Namespace, rec.Pos)
	}
	tbl, err := s.tableOfNS(rec.Namespace, rec.Pos, true)
	if err != nil {
		return err
	}
	s.stage.colls = append(s.stage.colls, collOp{tbl: tbl, ct: ct - 1})
	return nil
}

// renameTarget returns the new namespace of a rename event, from its
// Extra {to: {db, coll}}.
func renameTarget(rec *cdc.Record) (string, error) {
	if rec.Extra != nil {
		to, ok := bson.Raw(rec.Extra).Lookup("to").DocumentOK()
		if ok {
			db, ok1 := to.Lookup("db").StringValueOK()
			coll, ok2 := to.Lookup("coll").StringValueOK()
			if ok1 && ok2 {
				return db + "." + coll, nil
			}
		}
	}
	return "", fmt.Errorf("postgres sink: rename of %s at position %s has no {to: {db, coll}} in its event: "+
		"the mirror cannot tell which table its rows move to", rec.Namespace, rec.Pos)
}

// prepareTables creates or checks each table not ready yet, before the
// batch's transaction: a table is created once, even if that batch then
// fails, which is harmless, as it is created empty.
//
// The new name's table of a rename is made only if the old one exists
// (rows move): that may only be known once the old one was looked up,
// and, for renames in a chain, once its own old name was.
func (s *Sink) prepareTables(ctx context.Context) error {
	for {
		for _, tb := range s.tables {
			if tb.ready {
				continue
			}
			if err := s.prepareTable(ctx, tb); err != nil {
				return err
			}
			tb.ready = !tb.deferred
		}
		more := false
		for _, op := range s.stage.colls {
			if to := s.tables[op.to]; op.rename && !s.tables[op.tbl].absent && to.noCreate {
				to.need(false)
				more = more || !to.ready
			}
		}
		if !more {
			return nil
		}
	}
}
