package mongowire

import (
	"slices"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/tide-cdc/tide/mongowire/internal/store"
)

// txnGroupEnd returns the end of the transaction whose entries start at
// chunk[i]: the entries that follow with the same TS.
func txnGroupEnd(chunk []store.OplogEntry, i int) int {
	j := i + 1
	for j < len(chunk) && chunk[j].Txn != nil && chunk[j].TS == chunk[i].TS {
		j++
	}
	return j
}

// oplogTxnDoc renders a committed transaction as mongod writes it to
// local.oplog.rs: one applyOps command entry holding its operations in
// order, with the session and transaction number.
func oplogTxnDoc(entries []store.OplogEntry) (bson.Raw, error) {
	entries = slices.Clone(entries)
	slices.SortFunc(entries, func(a, b store.OplogEntry) int { return a.Txn.OpIndex - b.Txn.OpIndex })
	ops := make(bson.A, 0, len(entries))
	for i := range entries {
		doc, err := oplogDoc(&entries[i])
		if err != nil {
			return nil, err
		}
		elems, err := doc.Elements()
		if err != nil {
			return nil, err
		}
		op := bson.D{}
		for _, el := range elems {
			switch el.Key() {
			case "ts", "t", "v", "wall":
			default:
				op = append(op, bson.E{Key: el.Key(), Value: el.Value()})
			}
		}
		ops = append(ops, op)
	}
	e := &entries[0]
	return bson.Marshal(bson.D{
		{Key: "lsid", Value: e.Txn.LSID},
		{Key: "txnNumber", Value: e.Txn.Number},
		{Key: "op", Value: "c"},
		{Key: "ns", Value: "admin.$cmd"},
		{Key: "o", Value: bson.D{{Key: "applyOps", Value: ops}}},
		{Key: "ts", Value: e.TS},
		{Key: "t", Value: int64(1)},
		{Key: "v", Value: int64(2)},
		{Key: "wall", Value: bson.NewDateTimeFromTime(e.Wall)},
		{Key: "prevOpTime", Value: bson.D{{Key: "ts", Value: bson.Timestamp{}}, {Key: "t", Value: int64(-1)}}},
	})
}
