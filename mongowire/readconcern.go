package mongowire

import (
	"context"
	"fmt"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/tide-cdc/tide/mongowire/internal/mongoerr"
)

// Read concern. On this single-node replica set every write is applied
// and majority-committed when it is acknowledged, so "local", "majority",
// "available" and "linearizable" read the same data, and afterClusterTime
// is satisfied as soon as it is not in the future. "snapshot" reads the
// store's history as of atClusterTime (or of the current cluster time),
// and only find, aggregate and distinct take it outside a transaction, as
// in mongod. Levels and fields mongod does not know are refused.

type readConcern struct {
	level     string // "" when not given
	at, after bson.Timestamp
}

var readConcernLevels = map[string]bool{
	"local": true, "majority": true, "linearizable": true, "available": true, "snapshot": true,
}

// snapshotCommands take readConcern level snapshot outside a transaction.
var snapshotCommands = map[string]bool{"find": true, "aggregate": true, "distinct": true}

// parseReadConcern reads and validates the command's readConcern.
func parseReadConcern(r *request) (readConcern, error) {
	var rc readConcern
	v, err := r.cmd.LookupErr("readConcern")
	if err != nil {
		return rc, nil
	}
	d, ok := v.DocumentOK()
	if !ok {
		return rc, typeMismatch(r.name, "readConcern", v, "object")
	}
	elems, err := d.Elements()
	if err != nil {
		return rc, mongoerr.New(mongoerr.InvalidBSON, "BSON field '%s.readConcern': %v", r.name, err)
	}
	hasAt, hasAfter := false, false
	for _, e := range elems {
		v := e.Value()
		switch k := e.Key(); k {
		case "level":
			s, ok := v.StringValueOK()
			if !ok {
				return rc, typeMismatch("readConcern", "level", v, "string")
			}
			if !readConcernLevels[s] {
				return rc, mongoerr.New(mongoerr.BadValue, "Enumeration value '%s' for field 'readConcern.level' is not a valid value.", s)
			}
			rc.level = s
		case "atClusterTime", "afterClusterTime":
			t, i, ok := v.TimestampOK()
			if !ok {
				return rc, typeMismatch("readConcern", k, v, "timestamp")
			}
			if t == 0 && i == 0 {
				return rc, mongoerr.New(mongoerr.InvalidOptions, "%s cannot be a null timestamp", k)
			}
			if k == "atClusterTime" {
				rc.at, hasAt = bson.Timestamp{T: t, I: i}, true
			} else {
				rc.after, hasAfter = bson.Timestamp{T: t, I: i}, true
			}
		case "provenance", "afterOpTime":
			// Set by mongos and by replica-set internals; nothing to do on one node.
		default:
			return rc, mongoerr.New(40415, "BSON field 'readConcern.%s' is an unknown field.", k)
		}
	}
	switch {
	case hasAt && hasAfter:
		return rc, mongoerr.New(mongoerr.InvalidOptions, "Can not specify both afterClusterTime and atClusterTime")
	case hasAt && rc.level != "snapshot":
		return rc, mongoerr.New(mongoerr.InvalidOptions, "atClusterTime field can be set only if level is equal to snapshot")
	case hasAfter && (rc.level == "available" || rc.level == "linearizable"):
		return rc, mongoerr.New(mongoerr.InvalidOptions, "afterClusterTime field can be set only if level is one of local, majority or snapshot")
	}
	return rc, nil
}

// checkReadConcern refuses what mongod refuses of a command's readConcern
// before it runs. A command of a transaction is left to the transaction
// code, which owns its read concern.
func (s *Server) checkReadConcern(r *request) error {
	if _, err := r.cmd.LookupErr("autocommit"); err == nil {
		return nil
	}
	rc, err := parseReadConcern(r)
	if err != nil || rc == (readConcern{}) {
		return err
	}
	now := s.rawStore.ClusterTime()
	for _, c := range [...]struct {
		name string
		ts   bson.Timestamp
	}{{"atClusterTime", rc.at}, {"afterClusterTime", rc.after}} {
		if c.ts != (bson.Timestamp{}) && tsAfter(c.ts, now) {
			return mongoerr.New(mongoerr.InvalidOptions,
				"readConcern %s value must not be greater than the current clusterTime. Requested clusterTime: { ts: %s }; current clusterTime: { ts: %s }",
				c.name, tsString(c.ts), tsString(now))
		}
	}
	if rc.level == "snapshot" && !snapshotCommands[r.name] {
		return mongoerr.New(mongoerr.InvalidOptions, "Command %s does not support { readConcern: { level: \"snapshot\" } } :: caused by :: read concern snapshot is only supported in a multi-statement transaction or by find, aggregate and distinct", r.name)
	}
	if r.name == "aggregate" && (rc.level == "snapshot" || rc.level == "linearizable") {
		if stage, _ := writeStage(pipelineOf(r)); stage != "" {
			return mongoerr.New(mongoerr.InvalidOptions, "%s cannot be used with a '%s' read concern level", stage, rc.level)
		}
	}
	return nil
}

// snapshotAt reports whether the command reads at a snapshot, and at which
// cluster time: atClusterTime, or the current cluster time.
func (s *Server) snapshotAt(ctx context.Context, r *request) (bson.Timestamp, bool) {
	if txnFrom(ctx) != nil {
		return bson.Timestamp{}, false // the transaction's snapshot (txn.go)
	}
	rc, err := parseReadConcern(r)
	if err != nil || rc.level != "snapshot" {
		return bson.Timestamp{}, false
	}
	if rc.at != (bson.Timestamp{}) {
		return rc.at, true
	}
	return s.rawStore.ClusterTime(), true
}

// withAtClusterTime adds atClusterTime to a cursor reply, after ns, as
// mongod answers a snapshot read.
func withAtClusterTime(reply bson.D, ts bson.Timestamp) bson.D {
	if len(reply) > 0 && reply[0].Key == "cursor" {
		if cur, ok := reply[0].Value.(bson.D); ok {
			reply[0].Value = append(cur, bson.E{Key: "atClusterTime", Value: ts})
		}
	}
	return reply
}

func pipelineOf(r *request) []bson.Raw {
	arr, ok := r.cmd.Lookup("pipeline").ArrayOK()
	if !ok {
		return nil
	}
	vals, _ := arr.Values()
	out := make([]bson.Raw, 0, len(vals))
	for _, v := range vals {
		if d, ok := v.DocumentOK(); ok {
			out = append(out, d)
		}
	}
	return out
}

func tsAfter(a, b bson.Timestamp) bool { return a.T > b.T || a.T == b.T && a.I > b.I }

func tsString(ts bson.Timestamp) string { return fmt.Sprintf("Timestamp(%d, %d)", ts.T, ts.I) }
