package mongowire

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"sync"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.opentelemetry.io/otel/trace"

	"github.com/tide-cdc/tide/internal/faultfs"
	netconn "github.com/tide-cdc/tide/mongowire/internal/conn" // the package's type conn is a connection's command-layer state
	"github.com/tide-cdc/tide/mongowire/internal/mql"
	"github.com/tide-cdc/tide/mongowire/internal/store"
)

// How the package is built: the listener, TLS, the accept loop and each
// connection's framing, deadlines and cap live in internal/conn, which
// knows requests and replies, not commands; conn.go is the wall, where a
// connection's parsed request enters command dispatch (dispatch.go) and
// one file per command (cmd_<name>.go), with the $out and $merge stages
// that write (stage_out.go, stage_merge.go), cursors, retryable-write
// sessions, transactions (txn.go) and fail points. Handlers reach the data
// through one door, Server.data (data.go). Framing lives in internal/wire,
// the query language in internal/mql, storage (documents, indexes, oplog,
// cluster clock) in internal/store and change streams in
// internal/changestream. Cursors hold a cursorSource, so that sources
// other than a materialised result plug into find/aggregate/getMore
// unchanged: an aggregate holding a $changeStream stage goes to
// Server.openChangeStream.

// Config configures a Server. The zero value of every field is its default.
type Config struct {
	// Addr is the listen address, default "127.0.0.1:27017";
	// "127.0.0.1:0" picks a free port.
	Addr string
	// Advertise is the host:port announced in hello (hosts, primary, me);
	// default: the actual listen address.
	Advertise string
	// ReplSet is the replica-set name, default "rs0".
	ReplSet string
	// DataDir keeps the data across restarts; "" keeps it in memory. One
	// server at a time holds it: on Unix, Start on a directory in use fails.
	DataDir string
	// MaxConnections caps live client connections, default 1000; a client
	// beyond it is accepted and closed at once, unless (with Auth) some
	// connections have not authenticated: then the least recently active
	// of those is closed to make room.
	MaxConnections int
	// MaxConnectionsPerIP caps the live connections from one client IP
	// address in the same way, default a quarter of MaxConnections;
	// negative: no cap.
	MaxConnectionsPerIP int
	// EnableTestCommands enables configureFailPoint.
	EnableTestCommands bool
	// OplogBytes bounds the oplog (default 256 MiB); OplogMinRetention keeps
	// entries at least this long even past the bound.
	OplogBytes        int64
	OplogMinRetention time.Duration
	// TTLMonitorInterval is how often expired documents of TTL indexes
	// are deleted (default 60 s, mongod's ttlMonitorSleepSecs); negative
	// disables the monitor.
	TTLMonitorInterval time.Duration
	// HeaderTimeout bounds the wait for the first message header after
	// connect (default 30s), IdleTimeout the wait between messages (10m),
	// BodyTimeout the time to read a message once its header arrived (30s).
	HeaderTimeout, IdleTimeout, BodyTimeout time.Duration
	// CursorTimeout closes cursors idle this long (default 10m), as
	// mongod's cursorTimeoutMillis.
	CursorTimeout time.Duration
	// TransactionLifetimeLimit aborts a transaction still open this long
	// after it started (transactionLifetimeLimitSeconds), default 60s.
	TransactionLifetimeLimit time.Duration
	// Logger receives the server's logs; nil discards them.
	// Tracer, if set, traces every command: one span per command, named
	// after it, with its database; a command that fails is marked so.
	// Nil traces nothing, at no cost (tide serve --otlp-endpoint).
	Tracer trace.Tracer
	Logger *slog.Logger

	// TLS, if set, makes the server TLS-only (tls.go): a connection must
	// open with a TLS handshake, which must end within
	// TLSHandshakeTimeout (default 10s); versions below TLS 1.2 are never
	// negotiated. TLSFiles.Config builds one from PEM files.
	TLS                 *tls.Config
	TLSHandshakeTimeout time.Duration
	// Auth requires clients to authenticate (SCRAM-SHA-256 or SCRAM-SHA-1)
	// and checks every command against the user's roles. Without it every
	// command is allowed, though users can still be created and used.
	Auth bool
	// AdminUser, if set and no user exists yet, is created at Start in
	// the admin database with the root role and AdminPassword, which is
	// used once and then forgotten; only salted keys are stored.
	AdminUser, AdminPassword string
	// AuthFailureLimit closes a connection after this many failed
	// authentications (default 10). AuthFailureDelay is the pause before
	// answering the third consecutive failure of a connection or a user
	// (default 100ms; negative: none); it doubles with every further
	// failure, up to AuthFailureMaxDelay (default 5s).
	AuthFailureLimit                      int
	AuthFailureDelay, AuthFailureMaxDelay time.Duration
	// With Auth, AuthTimeout closes a connection that has not
	// authenticated this long after connect (default 10s; negative:
	// never). A driver's monitoring connection never authenticates: it
	// sends hello every heartbeatFrequencyMS (10 s by default), so a
	// connection that has sent nothing but hellos is closed only once
	// twice AuthTimeout passed since its last one.
	AuthTimeout time.Duration
	// With Auth, MaxUnauthenticatedConnections caps the connections that
	// have not authenticated (default 64; negative: no cap): a new
	// connection past it closes the least recently active of them, so
	// that idle ones give way to a client about to authenticate.
	MaxUnauthenticatedConnections int

	// Query memory (querymem.go). MaxQueryMemory is the server-wide
	// budget for what running queries hold in memory at once; a query
	// that would pass it fails with 146 ExceededMemoryLimit. 0 is a
	// quarter of the machine's physical memory (DefaultMaxQueryMemory);
	// negative is unlimited. StageMemoryLimit is what one blocking stage
	// ($sort, $group, ...) may hold before it spills to disk, or fails
	// with 292 under allowDiskUse: false (default 100 MiB, as mongod);
	// LookupMemoryLimit bounds the documents one $lookup gathers for one
	// input document, past which it fails with 4568 (default 100 MiB).
	// Spills go to DataDir/_tmp, or to the system's temporary directory
	// without a DataDir.
	MaxQueryMemory    int64
	StageMemoryLimit  int64
	LookupMemoryLimit int64
}

// Server is the embedded server. New configures it, Start listens and
// serves, Close stops everything it started.
type Server struct {
	cfg      Config
	log      *slog.Logger
	fs       faultfs.FS // writes the files of DataDir; nil is the real file system (tests cut the power under it)
	commands map[string]command

	// openChangeStream opens the source of a change-stream cursor for an
	// aggregate holding a $changeStream stage: cmd is the whole
	// aggregate command, coll is "" for a database or cluster stream. The
	// returned extras go into the first reply's cursor document (e.g.
	// postBatchResumeToken). Nil means change streams are not supported.
	openChangeStream func(ctx context.Context, db, coll string, cmd bson.Raw) (cursorSource, bson.D, error)

	rawStore  *store.Store    // handlers reach it only through data (data.go)
	dirLock   *os.File        // held while serving DataDir
	conns     *netconn.Server // the listener and the connections; nil until Start
	addr      string          // actual listen address
	advertise string
	started   time.Time
	processID bson.ObjectID
	now       func() time.Time // the clock of cursor timeouts; tests replace it

	done      chan struct{} // closed by Close
	closeOnce sync.Once
	closeErr  error

	cursors    cursorTable
	sessions   sessionTable
	local      localSessions // $listLocalSessions (stage_listlocalsessions.go)
	txns       txnTable      // sessions' transactions (txn.go)
	failpoints failPoints
	auth       authState  // users and authentication counters (auth_users.go)
	counters   opCounters // serverStatus opcounters and network (cmd_serverstatus.go)
	top        topTable   // the top command (cmd_top.go)

	queryBudget *mql.Budget // shared by every query's run (querymem.go)
}

// New returns a server configured by cfg, with defaults applied. It does no I/O.
func New(cfg Config) *Server {
	if cfg.Addr == "" {
		cfg.Addr = "127.0.0.1:27017"
	}
	if cfg.ReplSet == "" {
		cfg.ReplSet = "rs0"
	}
	if cfg.MaxConnections <= 0 {
		cfg.MaxConnections = 1000
	}
	if cfg.MaxConnectionsPerIP == 0 {
		cfg.MaxConnectionsPerIP = max(cfg.MaxConnections/4, 1)
	}
	if cfg.AuthTimeout == 0 {
		cfg.AuthTimeout = 10 * time.Second
	}
	if cfg.MaxUnauthenticatedConnections == 0 {
		cfg.MaxUnauthenticatedConnections = 64
	}
	if cfg.HeaderTimeout <= 0 {
		cfg.HeaderTimeout = 30 * time.Second
	}
	if cfg.IdleTimeout <= 0 {
		cfg.IdleTimeout = 10 * time.Minute
	}
	if cfg.BodyTimeout <= 0 {
		cfg.BodyTimeout = 30 * time.Second
	}
	if cfg.CursorTimeout <= 0 {
		cfg.CursorTimeout = 10 * time.Minute
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.AuthFailureLimit <= 0 {
		cfg.AuthFailureLimit = 10
	}
	if cfg.AuthFailureDelay == 0 {
		cfg.AuthFailureDelay = 100 * time.Millisecond
	}
	if cfg.AuthFailureMaxDelay <= 0 {
		cfg.AuthFailureMaxDelay = 5 * time.Second
	}
	s := &Server{
		cfg:       cfg,
		log:       cfg.Logger,
		done:      make(chan struct{}),
		now:       time.Now,
		processID: bson.NewObjectID(),
	}
	s.queryBudget = newQueryBudget(cfg.MaxQueryMemory)
	s.commands = s.commandTable()
	s.openChangeStream = s.openChangeStreamSource // cmd_changestream.go
	s.cursors.init()
	s.sessions.init()
	return s
}

// Start opens the store, listens, and serves in goroutines it owns until
// Close. It returns once the listener is ready: URI and Addr are valid
// from then on. A server starts once; Start after Start or Close fails.
func (s *Server) Start() error {
	select {
	case <-s.done:
		return errors.New("mongowire: start after close")
	default:
	}
	if s.conns != nil {
		return errors.New("mongowire: server already started")
	}
	if s.cfg.DataDir != "" {
		lock, err := lockDataDir(s.cfg.DataDir)
		if err != nil {
			return err
		}
		s.dirLock = lock
	}
	st, err := store.Open(store.Config{
		Dir:               s.cfg.DataDir,
		OplogBytes:        s.cfg.OplogBytes,
		OplogMinRetention: s.cfg.OplogMinRetention,
		TTLInterval:       s.cfg.TTLMonitorInterval,
		Logger:            s.log,
		FS:                s.fs,
	})
	if err != nil {
		s.unlockDataDir()
		return fmt.Errorf("open store: %w", err)
	}
	s.rawStore = st
	if err := s.clearSpillDir(); err != nil {
		st.Close()
		s.unlockDataDir()
		return err
	}
	if err := errors.Join(s.loadUsers(), s.createAdminUser()); err != nil {
		st.Close()
		s.unlockDataDir()
		return err
	}
	tlsTimeout := s.cfg.TLSHandshakeTimeout
	if tlsTimeout <= 0 {
		tlsTimeout = DefaultTLSHandshakeTimeout
	}
	// The limits on unauthenticated connections apply with Auth only;
	// negative values mean none, as 0 does to internal/conn.
	var authTimeout time.Duration
	var maxUnauth int
	if s.cfg.Auth {
		authTimeout = max(s.cfg.AuthTimeout, 0)
		maxUnauth = max(s.cfg.MaxUnauthenticatedConnections, 0)
	}
	conns := netconn.New(netconn.Config{
		Addr:                s.cfg.Addr,
		MaxConnections:      s.cfg.MaxConnections,
		MaxConnectionsPerIP: max(s.cfg.MaxConnectionsPerIP, 0),
		AuthTimeout:         authTimeout,
		MaxUnauthenticated:  maxUnauth,
		HeaderTimeout:       s.cfg.HeaderTimeout,
		IdleTimeout:         s.cfg.IdleTimeout,
		BodyTimeout:         s.cfg.BodyTimeout,
		TLS:                 s.cfg.TLS,
		TLSHandshakeTimeout: tlsTimeout,
		Logger:              s.log,
	}, connHandler{s})
	if err := conns.Listen(); err != nil {
		st.Close()
		s.unlockDataDir()
		return err
	}
	s.conns = conns
	s.addr = conns.Addr()
	s.advertise = s.cfg.Advertise
	if s.advertise == "" {
		s.advertise = s.addr
	}
	s.started = time.Now()
	conns.Serve()
	s.log.Debug("mongowire listening", "addr", s.addr, "advertise", s.advertise, "replset", s.cfg.ReplSet)
	return nil
}

// Addr returns the actual listen address, e.g. "127.0.0.1:54321", once
// Start has returned.
func (s *Server) Addr() string { return s.addr }

// URI returns a connection string for the replica set, e.g.
// "mongodb://127.0.0.1:54321/?replicaSet=rs0" (with "&tls=true" on a TLS
// server), once Start has returned.
// The official drivers and mongosh connect with it as they would to a
// one-member replica set.
func (s *Server) URI() string {
	uri := "mongodb://" + s.advertise + "/?replicaSet=" + s.cfg.ReplSet
	if s.cfg.TLS != nil {
		uri += "&tls=true"
	}
	return uri
}

// Close stops accepting, closes every connection and cursor, waits for
// every goroutine the server started, and closes the store. It may be
// called more than once, and before Start; later calls return the first
// call's error.
func (s *Server) Close() error {
	s.closeOnce.Do(func() {
		close(s.done)
		if s.conns == nil { // never started
			return
		}
		lnErr := s.conns.Close()
		s.closeTransactions() // a write waiting for one goes on, so that its connection can end
		s.conns.Wait()
		s.cursors.closeAll()
		s.closeErr = errors.Join(lnErr, s.rawStore.Close())
		s.unlockDataDir()
	})
	return s.closeErr
}

// unlockDataDir releases the data directory's lock, if held.
func (s *Server) unlockDataDir() {
	if s.dirLock != nil {
		s.dirLock.Close()
		s.dirLock = nil
	}
}
