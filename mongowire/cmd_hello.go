package mongowire

import (
	"context"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
)

// Identity of the single-node replica set: constant, so that drivers'
// (electionId, setVersion) staleness checks never demote us.
var electionID = bson.ObjectID{0x7f, 0xff, 0xff, 0xff, 0, 0, 0, 0, 0, 0, 0, 1}

const (
	maxBSONObjectSize = 16 << 20
	maxWriteBatchSize = 100_000
	maxWireVersion    = 21 // MongoDB 7.0
)

// cmdHello answers hello, isMaster and the legacy OP_QUERY handshake as a
// replica-set primary. It never sends topologyVersion, so drivers poll
// rather than expect awaitable hello.
func (s *Server) cmdHello(ctx context.Context, c *conn, r *request) (bson.D, error) {
	if name, ok := r.cmd.Lookup("client", "application", "name").StringValueOK(); ok && c != nil {
		c.appName = name
	}
	now := time.Now()
	ts := s.data(ctx).ClusterTime()
	opTime := bson.D{{Key: "ts", Value: ts}, {Key: "t", Value: int64(1)}}
	var d bson.D
	if v, err := r.cmd.LookupErr("helloOk"); err == nil && truthy(v) {
		d = append(d, bson.E{Key: "helloOk", Value: true})
	}
	if r.name == "hello" && !r.legacy {
		d = append(d, bson.E{Key: "isWritablePrimary", Value: true})
	} else {
		d = append(d, bson.E{Key: "ismaster", Value: true})
	}
	d = append(d,
		bson.E{Key: "hosts", Value: bson.A{s.advertise}},
		bson.E{Key: "setName", Value: s.cfg.ReplSet},
		bson.E{Key: "setVersion", Value: int32(1)},
		bson.E{Key: "secondary", Value: false},
		bson.E{Key: "primary", Value: s.advertise},
		bson.E{Key: "me", Value: s.advertise},
		bson.E{Key: "electionId", Value: electionID},
		bson.E{Key: "lastWrite", Value: bson.D{
			{Key: "opTime", Value: opTime},
			{Key: "lastWriteDate", Value: bson.NewDateTimeFromTime(time.Unix(int64(ts.T), 0))},
			{Key: "majorityOpTime", Value: opTime},
			{Key: "majorityWriteDate", Value: bson.NewDateTimeFromTime(time.Unix(int64(ts.T), 0))},
		}},
		bson.E{Key: "maxBsonObjectSize", Value: int32(maxBSONObjectSize)},
		bson.E{Key: "maxMessageSizeBytes", Value: int32(48_000_000)},
		bson.E{Key: "maxWriteBatchSize", Value: int32(maxWriteBatchSize)},
		bson.E{Key: "localTime", Value: bson.NewDateTimeFromTime(now)},
		bson.E{Key: "logicalSessionTimeoutMinutes", Value: int32(sessionTimeout / time.Minute)},
		bson.E{Key: "connectionId", Value: connID(c)},
		bson.E{Key: "minWireVersion", Value: int32(0)},
		bson.E{Key: "maxWireVersion", Value: int32(maxWireVersion)},
		bson.E{Key: "readOnly", Value: false},
	)
	if v, err := r.cmd.LookupErr("saslSupportedMechs"); err == nil {
		if mechs := s.supportedMechs(v); mechs != nil {
			d = append(d, bson.E{Key: "saslSupportedMechs", Value: mechs})
		}
	}
	if spec, ok := r.cmd.Lookup("speculativeAuthenticate").DocumentOK(); ok {
		if reply := s.speculative(c, spec); reply != nil {
			d = append(d, bson.E{Key: "speculativeAuthenticate", Value: reply})
		}
	}
	return d, nil
}

func connID(c *conn) int32 {
	if c == nil {
		return 0
	}
	return int32(c.id)
}
