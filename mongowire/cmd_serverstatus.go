package mongowire

import (
	"context"
	"runtime"
	"sync/atomic"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
)

// opCounters are serverStatus's opcounters, counted
// as mongod counts them: inserts, updates and deletes per statement (or
// document), a query per find, a getmore per getMore, a command per other
// command. The network section's bytes and requests are the connection
// layer's (internal/conn).
type opCounters struct {
	insert, query, update, delete, getmore, command atomic.Int64
}

// count counts one command as it is dispatched.
func (o *opCounters) count(r *request) {
	n := func(field string) int64 {
		arr, ok := r.cmd.Lookup(field).ArrayOK()
		if !ok {
			return 0
		}
		vals, _ := arr.Values()
		return int64(len(vals))
	}
	switch r.name {
	case "insert":
		o.insert.Add(n("documents"))
	case "update":
		o.update.Add(n("updates"))
	case "delete":
		o.delete.Add(n("deletes"))
	case "find":
		o.query.Add(1)
	case "getMore":
		o.getmore.Add(1)
	default:
		o.command.Add(1)
	}
}

func (o *opCounters) doc() bson.D {
	return bson.D{
		{Key: "insert", Value: o.insert.Load()},
		{Key: "query", Value: o.query.Load()},
		{Key: "update", Value: o.update.Load()},
		{Key: "delete", Value: o.delete.Load()},
		{Key: "getmore", Value: o.getmore.Load()},
		{Key: "command", Value: o.command.Load()},
	}
}

// replCounters is opcountersRepl: a primary that is the only member
// applies no replicated operations.
var replCounters = bson.D{
	{Key: "insert", Value: int64(0)}, {Key: "query", Value: int64(0)}, {Key: "update", Value: int64(0)},
	{Key: "delete", Value: int64(0)}, {Key: "getmore", Value: int64(0)}, {Key: "command", Value: int64(0)},
}

// statusSections are the serverStatus sections past the identity ones,
// in mongod's names and types. mem is the Go runtime's view, in MiB.
func (s *Server) statusSections(ctx context.Context, up time.Duration) bson.D {
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	mib := func(b uint64) int32 { return int32(b >> 20) }
	open := int32(s.data(ctx).OpenTransactions())
	nw := s.conns.Stats()
	return bson.D{
		{Key: "asserts", Value: bson.D{
			{Key: "regular", Value: int32(0)}, {Key: "warning", Value: int32(0)}, {Key: "msg", Value: int32(0)},
			{Key: "user", Value: int32(0)}, {Key: "tripwire", Value: int32(0)}, {Key: "rollovers", Value: int32(0)},
		}},
		{Key: "extra_info", Value: bson.D{{Key: "note", Value: "fields vary by platform"}}},
		{Key: "globalLock", Value: bson.D{
			{Key: "totalTime", Value: up.Microseconds()},
			{Key: "currentQueue", Value: bson.D{{Key: "total", Value: int32(0)}, {Key: "readers", Value: int32(0)}, {Key: "writers", Value: int32(0)}}},
			{Key: "activeClients", Value: bson.D{{Key: "total", Value: int32(0)}, {Key: "readers", Value: int32(0)}, {Key: "writers", Value: int32(0)}}},
		}},
		{Key: "mem", Value: bson.D{
			{Key: "bits", Value: int32(64)},
			{Key: "resident", Value: mib(ms.Sys - ms.HeapReleased)},
			{Key: "virtual", Value: mib(ms.Sys)},
			{Key: "supported", Value: true},
		}},
		{Key: "network", Value: bson.D{
			{Key: "bytesIn", Value: nw.BytesIn},
			{Key: "bytesOut", Value: nw.BytesOut},
			{Key: "physicalBytesIn", Value: nw.BytesIn},
			{Key: "physicalBytesOut", Value: nw.BytesOut},
			{Key: "numRequests", Value: nw.Requests},
		}},
		{Key: "opcounters", Value: s.counters.doc()},
		{Key: "opcountersRepl", Value: replCounters},
		{Key: "transactions", Value: bson.D{{Key: "currentOpen", Value: open}}},
	}
}
