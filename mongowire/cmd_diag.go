package mongowire

import (
	"context"
	"slices"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/tide-cdc/tide/mongowire/internal/mongoerr"
	"github.com/tide-cdc/tide/mongowire/internal/store"
)

// Diagnostic commands mongosh helpers call (db.c.validate(),
// db.getProfilingStatus(), db.getRoles(), db.currentOp(), listCommands):
// answered in mongod's shape with what this server has — no profiler, no
// custom roles, no operations worth listing. Users are in cmd_users.go.

// cmdValidate: {validate: "c"} -> {ns, nInvalidDocuments, nrecords,
// nIndexes, keysPerIndex, valid, ...}. The store keeps its own invariants;
// validation counts what is there. 26 when the collection is missing.
func (s *Server) cmdValidate(ctx context.Context, _ *conn, r *request) (bson.D, error) {
	ns, err := collNS(r)
	if err != nil {
		return nil, err
	}
	if _, ok := s.data(ctx).Collection(ns); !ok {
		return nil, mongoerr.New(mongoerr.NamespaceNotFound, "Collection '%s' does not exist to validate.", ns)
	}
	n, err := s.data(ctx).Count(ns, nil, 0, 0)
	if err != nil {
		return nil, err
	}
	specs, err := s.data(ctx).ListIndexes(ns)
	if err != nil {
		return nil, err
	}
	keys := bson.D{}
	details := bson.D{}
	for _, sp := range specs {
		keys = append(keys, bson.E{Key: sp.Name, Value: appendNumber(n)})
		details = append(details, bson.E{Key: sp.Name, Value: bson.D{{Key: "valid", Value: true}}})
	}
	return bson.D{
		{Key: "ns", Value: ns.String()},
		{Key: "uuid", Value: collUUID(s.data(ctx), ns)},
		{Key: "nInvalidDocuments", Value: int32(0)},
		{Key: "nNonCompliantDocuments", Value: int32(0)},
		{Key: "nrecords", Value: appendNumber(n)},
		{Key: "nIndexes", Value: int32(len(specs))},
		{Key: "keysPerIndex", Value: keys},
		{Key: "indexDetails", Value: details},
		{Key: "valid", Value: true},
		{Key: "repaired", Value: false},
		{Key: "warnings", Value: bson.A{}},
		{Key: "errors", Value: bson.A{}},
		{Key: "extraIndexEntries", Value: bson.A{}},
		{Key: "missingIndexEntries", Value: bson.A{}},
		{Key: "corruptRecords", Value: bson.A{}},
	}, nil
}

func collUUID(st catalog, ns store.Namespace) any {
	info, _ := st.Collection(ns)
	return info.UUID
}

// cmdProfile: {profile: -1 | 0} -> {was: 0, slowms, sampleRate}; there is
// no profiler, so levels 1 and 2 are refused.
func (s *Server) cmdProfile(_ context.Context, _ *conn, r *request) (bson.D, error) {
	v := r.cmd.Index(0).Value()
	level, ok := v.AsInt64OK()
	if !ok {
		return nil, typeMismatch(r.name, "profile", v, "long")
	}
	switch level {
	case -1, 0:
	case 1, 2:
		return nil, mongoerr.New(mongoerr.CommandNotSupported, "profiling level %d is not supported by this server", level)
	default:
		return nil, mongoerr.New(mongoerr.BadValue, "Invalid profiling level: %d", level)
	}
	return bson.D{{Key: "was", Value: int32(0)}, {Key: "slowms", Value: int32(100)}, {Key: "sampleRate", Value: 1.0}}, nil
}

// cmdCurrentOp: {currentOp: 1} -> {inprog: []}; operations here finish
// too fast to be worth listing, and cannot be killed.
func (s *Server) cmdCurrentOp(context.Context, *conn, *request) (bson.D, error) {
	return bson.D{{Key: "inprog", Value: bson.A{}}}, nil
}

// cmdListCommands: {listCommands: 1} -> {commands: {name: {help,
// requiresAuth, secondaryOk, adminOnly}}}, sorted by name.
func (s *Server) cmdListCommands(context.Context, *conn, *request) (bson.D, error) {
	names := make([]string, 0, len(s.commands))
	for name, cmd := range s.commands {
		if cmd.testOnly && !s.cfg.EnableTestCommands {
			continue
		}
		names = append(names, name)
	}
	slices.Sort(names)
	cmds := make(bson.D, 0, len(names))
	for _, name := range names {
		cmds = append(cmds, bson.E{Key: name, Value: bson.D{
			{Key: "help", Value: ""},
			{Key: "requiresAuth", Value: !noAuthCommands[name]},
			{Key: "secondaryOk", Value: true},
			{Key: "adminOnly", Value: s.commands[name].adminOnly},
		}})
	}
	return bson.D{{Key: "commands", Value: cmds}}, nil
}
