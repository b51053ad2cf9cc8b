package mongowire

import (
	"context"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
)

// cmdReplSetGetConfig reports the one-member configuration; its
// settings.replicaSetId is the store's, persisted with the data.
func (s *Server) cmdReplSetGetConfig(ctx context.Context, _ *conn, _ *request) (bson.D, error) {
	return bson.D{{Key: "config", Value: s.replSetConfig(ctx)}}, nil
}

// replSetConfig is the replica set config document, as replSetGetConfig
// and local.system.replset show it.
func (s *Server) replSetConfig(ctx context.Context) bson.D {
	return bson.D{
		{Key: "_id", Value: s.cfg.ReplSet},
		{Key: "version", Value: int32(1)},
		{Key: "term", Value: int32(1)},
		{Key: "members", Value: bson.A{bson.D{
			{Key: "_id", Value: int32(0)},
			{Key: "host", Value: s.advertise},
			{Key: "arbiterOnly", Value: false},
			{Key: "buildIndexes", Value: true},
			{Key: "hidden", Value: false},
			{Key: "priority", Value: 1.0},
			{Key: "tags", Value: bson.D{}},
			{Key: "secondaryDelaySecs", Value: int64(0)},
			{Key: "votes", Value: int32(1)},
		}}},
		{Key: "protocolVersion", Value: int64(1)},
		{Key: "writeConcernMajorityJournalDefault", Value: true},
		{Key: "settings", Value: bson.D{
			{Key: "chainingAllowed", Value: true},
			{Key: "heartbeatIntervalMillis", Value: int32(2000)},
			{Key: "heartbeatTimeoutSecs", Value: int32(10)},
			{Key: "electionTimeoutMillis", Value: int32(10000)},
			{Key: "catchUpTimeoutMillis", Value: int32(-1)},
			{Key: "getLastErrorModes", Value: bson.D{}},
			{Key: "getLastErrorDefaults", Value: bson.D{{Key: "w", Value: int32(1)}, {Key: "wtimeout", Value: int32(0)}}},
			{Key: "replicaSetId", Value: s.data(ctx).ReplicaSetID()},
		}},
	}
}

// cmdGetDefaultRWConcern reports the defaults a command without a read or
// write concern gets: mongod 7.0's implicit ones on a replica set. The
// write path honours the write concern: a majority write is acknowledged
// only once journaled (see journaled).
func (s *Server) cmdGetDefaultRWConcern(context.Context, *conn, *request) (bson.D, error) {
	return bson.D{
		{Key: "defaultReadConcern", Value: bson.D{{Key: "level", Value: "local"}}},
		{Key: "defaultWriteConcern", Value: bson.D{{Key: "w", Value: "majority"}, {Key: "wtimeout", Value: int32(0)}}},
		{Key: "defaultReadConcernSource", Value: "implicit"},
		{Key: "defaultWriteConcernSource", Value: "implicit"},
	}, nil
}

func (s *Server) cmdReplSetGetStatus(ctx context.Context, _ *conn, _ *request) (bson.D, error) {
	now := time.Now()
	ts := s.data(ctx).ClusterTime()
	opTime := bson.D{{Key: "ts", Value: ts}, {Key: "t", Value: int64(1)}}
	optimeDate := bson.NewDateTimeFromTime(time.Unix(int64(ts.T), 0))
	return bson.D{
		{Key: "set", Value: s.cfg.ReplSet},
		{Key: "date", Value: bson.NewDateTimeFromTime(now)},
		{Key: "myState", Value: int32(1)},
		{Key: "term", Value: int64(1)},
		{Key: "heartbeatIntervalMillis", Value: int64(2000)},
		{Key: "optimes", Value: bson.D{
			{Key: "lastCommittedOpTime", Value: opTime},
			{Key: "appliedOpTime", Value: opTime},
			{Key: "durableOpTime", Value: opTime},
		}},
		{Key: "members", Value: bson.A{bson.D{
			{Key: "_id", Value: int32(0)},
			{Key: "name", Value: s.advertise},
			{Key: "health", Value: 1.0},
			{Key: "state", Value: int32(1)},
			{Key: "stateStr", Value: "PRIMARY"},
			{Key: "uptime", Value: int32(now.Sub(s.started).Seconds())},
			{Key: "optime", Value: opTime},
			{Key: "optimeDate", Value: optimeDate},
			{Key: "electionDate", Value: bson.NewDateTimeFromTime(s.started)},
			{Key: "self", Value: true},
		}}},
	}, nil
}
