package mongowire

import (
	"context"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
)

// topTable is what the top command reports (mongotop reads it): per
// namespace, the time spent in and the number of the commands that named
// it, in total, as readers or writers, and by kind. Times are in
// microseconds, as mongod's.
type topTable struct {
	m sync.Map // "db.coll" -> *topEntry
}

// topKinds are top's counters, in mongod's order.
var topKinds = [...]string{"total", "readLock", "writeLock", "queries", "getmore", "insert", "update", "remove", "commands"}

type topEntry struct {
	time, count [len(topKinds)]atomic.Int64
}

func (e *topEntry) add(i int, d time.Duration) {
	e.time[i].Add(d.Microseconds())
	e.count[i].Add(1)
}

// topWriters are the commands top counts as writers.
var topWriters = map[string]bool{
	"insert": true, "update": true, "delete": true, "findAndModify": true, "create": true, "drop": true,
	"createIndexes": true, "dropIndexes": true, "collMod": true, "renameCollection": true,
}

// record counts one command that ran for d.
func (t *topTable) record(r *request, d time.Duration) {
	coll, ok := r.cmd.Index(0).Value().StringValueOK()
	if r.name == "getMore" {
		coll, ok = r.cmd.Lookup("collection").StringValueOK()
	}
	if !ok || coll == "" || r.db == "" {
		return // commands that name no collection are not in top, as on mongod
	}
	ns := r.db + "." + coll
	v, ok := t.m.Load(ns)
	if !ok {
		v, _ = t.m.LoadOrStore(ns, &topEntry{})
	}
	e := v.(*topEntry)
	e.add(0, d)
	if topWriters[r.name] {
		e.add(2, d)
	} else {
		e.add(1, d)
	}
	switch r.name {
	case "find":
		e.add(3, d)
	case "getMore":
		e.add(4, d)
	case "insert":
		e.add(5, d)
	case "update", "findAndModify":
		e.add(6, d)
	case "delete":
		e.add(7, d)
	default:
		e.add(8, d)
	}
}

// cmdTop: {top: 1} on admin -> {totals: {note, <ns>: {total: {time,
// count}, readLock, writeLock, queries, getmore, insert, update, remove,
// commands}}}.
func (s *Server) cmdTop(context.Context, *conn, *request) (bson.D, error) {
	var names []string
	entries := map[string]*topEntry{}
	s.top.m.Range(func(k, v any) bool {
		names = append(names, k.(string))
		entries[k.(string)] = v.(*topEntry)
		return true
	})
	sort.Strings(names)
	totals := bson.D{{Key: "note", Value: "all times in microseconds"}}
	for _, ns := range names {
		e := entries[ns]
		d := make(bson.D, 0, len(topKinds))
		for i, k := range topKinds {
			d = append(d, bson.E{Key: k, Value: bson.D{{Key: "time", Value: e.time[i].Load()}, {Key: "count", Value: e.count[i].Load()}}})
		}
		totals = append(totals, bson.E{Key: ns, Value: d})
	}
	return bson.D{{Key: "totals", Value: totals}}, nil
}
