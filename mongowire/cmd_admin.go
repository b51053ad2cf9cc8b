package mongowire

import (
	"context"
	"net"
	"os"
	"runtime"
	"strconv"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/tide-cdc/tide/mongowire/internal/mongoerr"
)

// The MongoDB version we present: 7.0 semantics, wire version 21.
const (
	serverVersion = "7.0.14"
	gitVersion    = "tide-embedded"
)

func (s *Server) cmdPing(context.Context, *conn, *request) (bson.D, error) { return bson.D{}, nil }

func (s *Server) cmdBuildInfo(context.Context, *conn, *request) (bson.D, error) {
	return bson.D{
		{Key: "version", Value: serverVersion},
		{Key: "gitVersion", Value: gitVersion},
		{Key: "modules", Value: bson.A{}},
		{Key: "allocator", Value: "go"},
		{Key: "javascriptEngine", Value: "none"},
		{Key: "sysInfo", Value: "deprecated"},
		{Key: "versionArray", Value: bson.A{int32(7), int32(0), int32(14), int32(0)}},
		{Key: "openssl", Value: bson.D{{Key: "running", Value: "disabled"}, {Key: "compiled", Value: "disabled"}}},
		{Key: "buildEnvironment", Value: bson.D{{Key: "distarch", Value: runtime.GOARCH}, {Key: "target_arch", Value: runtime.GOARCH}, {Key: "target_os", Value: runtime.GOOS}}},
		{Key: "bits", Value: int32(64)},
		{Key: "debug", Value: false},
		{Key: "maxBsonObjectSize", Value: int32(maxBSONObjectSize)},
		{Key: "storageEngines", Value: bson.A{"tide"}},
	}, nil
}

// parameters are what getParameter reports.
func (s *Server) parameters() bson.D {
	return bson.D{
		{Key: "authSchemaVersion", Value: int32(5)}, // SCRAM users, what mongorestore checks before restoring users
		{Key: "authenticationMechanisms", Value: bson.A{mechSHA1, mechSHA256}},
		{Key: "cursorTimeoutMillis", Value: int64(s.cfg.CursorTimeout / time.Millisecond)},
		{Key: "enableTestCommands", Value: s.cfg.EnableTestCommands},
		{Key: "featureCompatibilityVersion", Value: bson.D{{Key: "version", Value: "7.0"}}},
		{Key: "logLevel", Value: int32(0)},
		{Key: "maxBSONDepth", Value: int32(200)},
		{Key: "quiet", Value: false},
		{Key: "requireApiVersion", Value: false},
		{Key: "transactionLifetimeLimitSeconds", Value: int32(max(1, (s.txnLifetime()+time.Second-1)/time.Second))},
	}
}

// cmdGetParameter: {getParameter: 1, name: 1, ...} or {getParameter: "*"}.
func (s *Server) cmdGetParameter(_ context.Context, _ *conn, r *request) (bson.D, error) {
	params := s.parameters()
	if v := r.cmd.Index(0).Value(); v.Type == bson.TypeString && v.StringValue() == "*" {
		return params, nil
	}
	var out bson.D
	for _, e := range fieldsExcept(r.cmd) {
		for _, p := range params {
			if p.Key == e.Key {
				out = append(out, p)
			}
		}
	}
	if len(out) == 0 {
		return nil, mongoerr.New(mongoerr.InvalidOptions, "no option found to get")
	}
	return out, nil
}

func (s *Server) cmdGetCmdLineOpts(context.Context, *conn, *request) (bson.D, error) {
	host, port, _ := net.SplitHostPort(s.addr)
	p, _ := strconv.Atoi(port)
	argv := bson.A{"tide", "serve", "--addr", s.addr, "--replset", s.cfg.ReplSet}
	parsed := bson.D{
		{Key: "net", Value: bson.D{{Key: "bindIp", Value: host}, {Key: "port", Value: int32(p)}}},
		{Key: "replication", Value: bson.D{{Key: "replSet", Value: s.cfg.ReplSet}}},
	}
	if s.cfg.DataDir != "" {
		argv = append(argv, "--data-dir", s.cfg.DataDir)
		parsed = append(parsed, bson.E{Key: "storage", Value: bson.D{{Key: "dbPath", Value: s.cfg.DataDir}}})
	}
	return bson.D{{Key: "argv", Value: argv}, {Key: "parsed", Value: parsed}}, nil
}

func (s *Server) cmdServerStatus(ctx context.Context, _ *conn, _ *request) (bson.D, error) {
	host, _ := os.Hostname()
	up := time.Since(s.started)
	nw := s.conns.Stats()
	live := nw.Current
	status := bson.D{
		{Key: "host", Value: host},
		{Key: "version", Value: serverVersion},
		{Key: "process", Value: "mongod"},
		{Key: "pid", Value: int64(os.Getpid())},
		{Key: "uptime", Value: float64(int64(up.Seconds()))}, // whole seconds, as mongod's double
		{Key: "uptimeMillis", Value: up.Milliseconds()},
		{Key: "uptimeEstimate", Value: int64(up.Seconds())},
		{Key: "localTime", Value: bson.NewDateTimeFromTime(time.Now())},
		{Key: "connections", Value: bson.D{
			{Key: "current", Value: int32(live)},
			{Key: "available", Value: int32(int64(s.cfg.MaxConnections) - live)},
			{Key: "totalCreated", Value: nw.TotalCreated},
		}},
		{Key: "repl", Value: bson.D{
			{Key: "setName", Value: s.cfg.ReplSet},
			{Key: "isWritablePrimary", Value: true},
			{Key: "ismaster", Value: true}, // serverStatus keeps the legacy name, which mongostat reads
			{Key: "secondary", Value: false},
			{Key: "primary", Value: s.advertise},
			{Key: "me", Value: s.advertise},
			{Key: "hosts", Value: bson.A{s.advertise}},
		}},
		{Key: "storageEngine", Value: bson.D{{Key: "name", Value: "tide"}, {Key: "persistent", Value: s.cfg.DataDir != ""}}},
	}
	return append(status, s.statusSections(ctx, up)...), nil
}

func (s *Server) cmdHostInfo(context.Context, *conn, *request) (bson.D, error) {
	host, _ := os.Hostname()
	return bson.D{
		{Key: "system", Value: bson.D{
			{Key: "currentTime", Value: bson.NewDateTimeFromTime(time.Now())},
			{Key: "hostname", Value: host},
			{Key: "cpuAddrSize", Value: int32(64)},
			{Key: "numCores", Value: int32(runtime.NumCPU())},
			{Key: "cpuArch", Value: runtime.GOARCH},
		}},
		{Key: "os", Value: bson.D{{Key: "type", Value: runtime.GOOS}}},
		{Key: "extra", Value: bson.D{}},
	}, nil
}

func (s *Server) cmdWhatsMyURI(_ context.Context, c *conn, _ *request) (bson.D, error) {
	you := ""
	if c != nil {
		you = c.remote
	}
	return bson.D{{Key: "you", Value: you}}, nil
}

// cmdGetLog: {getLog: "startupWarnings" | "global" | "*"}. There is no
// in-memory log to show; mongosh asks for startup warnings on connect.
func (s *Server) cmdGetLog(_ context.Context, _ *conn, r *request) (bson.D, error) {
	v := r.cmd.Index(0).Value()
	name, ok := v.StringValueOK()
	if !ok {
		return nil, typeMismatch(r.name, "getLog", v, "string")
	}
	if name == "*" {
		return bson.D{{Key: "names", Value: bson.A{"global", "startupWarnings"}}}, nil
	}
	if name != "global" && name != "startupWarnings" {
		return nil, mongoerr.New(mongoerr.BadValue, "No log named '%s'", name)
	}
	return bson.D{{Key: "totalLinesWritten", Value: int32(0)}, {Key: "log", Value: bson.A{}}}, nil
}
