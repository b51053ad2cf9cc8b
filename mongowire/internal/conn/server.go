// Package conn is the connection layer of the mongowire server: it
// listens (TLS-only if configured), accepts connections up to a cap, and
// runs one loop per connection that reads a framed message within its
// deadlines, parses it, hands it to the command layer and writes the
// reply. It knows requests and replies, not commands: the command layer
// is a Handler, which opens a Session per connection.
//
// Limits on connections belong here (limits.go): the cap, the cap per
// client address, and the deadlines. The accept loop admits a connection
// or refuses it; the limits that depend on a connection's authentication
// (how long it may stay unauthenticated, how many such connections) learn
// it from an optional Session method, AuthSession's Authenticated,
// discovered at run time as net/http discovers http.Flusher.
package conn

import (
	"container/list"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/netip"
	"sync"
	"sync/atomic"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/tide-cdc/tide/mongowire/internal/mongoerr"
)

// Config configures a Server. New applies no defaults: the mongowire
// package does, in one place.
type Config struct {
	Addr string // the listen address
	// MaxConnections caps the live connections: one beyond is accepted
	// and closed at once, unless some are unauthenticated (see
	// MaxUnauthenticated): then the least recently active of those is
	// closed to make room.
	MaxConnections int
	// MaxConnectionsPerIP caps the live connections from one client IP
	// address the same way; 0: no cap.
	MaxConnectionsPerIP int
	// AuthTimeout and MaxUnauthenticated bound the connections whose
	// Session is an AuthSession that has not yet authenticated; 0 leaves
	// them unbounded.
	//
	// AuthTimeout closes such a connection once it has gone this long
	// without authenticating: counting from connect; or, while it has sent
	// nothing but hellos, from its last hello, with twice as long (a
	// driver's monitoring connection never authenticates and checks the
	// server every heartbeatFrequencyMS, 10 s by default); after any other
	// message it has at most AuthTimeout left.
	//
	// MaxUnauthenticated caps them: a new connection past the cap closes
	// the one that sent its last message longest ago, so that a client
	// about to authenticate always finds a slot, while idle ones give way.
	// Past MaxConnections, the same one makes room.
	AuthTimeout        time.Duration
	MaxUnauthenticated int
	// HeaderTimeout bounds the wait for the first message header after
	// connect, IdleTimeout the wait between messages, BodyTimeout the
	// time to read a message once its first byte arrived (and to write a
	// reply).
	HeaderTimeout, IdleTimeout, BodyTimeout time.Duration
	// TLS, if set, makes the server TLS-only; the handshake must end
	// within TLSHandshakeTimeout.
	TLS                 *tls.Config
	TLSHandshakeTimeout time.Duration
	Logger              *slog.Logger
}

// Handler is the command layer. Open is called once per connection, from
// the connection's goroutine, before its first message.
type Handler interface {
	Open(Info) Session
}

// Info describes a connection to the command layer.
type Info struct {
	ID     int64        // unique in the Server, from 1
	Remote net.Addr     // the client's address
	Log    *slog.Logger // the server's logger with the connection's id and address
}

// Session answers the requests of one connection. Only the connection's
// goroutine calls it, so it needs no locking of its own.
type Session interface {
	// Command answers one OP_MSG command (the kind-0 document, kind-1
	// sequences merged in) with the reply document. ErrClose ends the
	// connection without a reply; any other error ends it too, logged.
	Command(ctx context.Context, cmd bson.Raw) ([]byte, error)
	// Hello answers the legacy OP_QUERY handshake: name is hello,
	// isMaster or ismaster, cmd the command document. Errors as Command.
	Hello(ctx context.Context, name string, cmd bson.Raw) ([]byte, error)
	// ErrorReply is the reply document for an OP_MSG that cannot be run:
	// malformed, but with its framing intact.
	ErrorReply(*mongoerr.Error) []byte
	// Closing reports whether the connection must end once the reply
	// just sent is out (e.g. too many failed authentications).
	Closing() bool
}

// An AuthSession is a Session that knows whether its client has
// authenticated; Config.AuthTimeout and Config.MaxUnauthenticated apply to
// it until Authenticated, asked after every request, first reports true.
// A Session that is not one counts as authenticated from the start.
type AuthSession interface {
	Session
	Authenticated() bool
}

// Stats are a Server's connection and network counters.
type Stats struct {
	Current      int64 // connections being served
	TotalCreated int64 // connections served since start
	BytesIn      int64 // bytes of the messages read
	BytesOut     int64 // bytes of the replies written
	Requests     int64 // messages read

	Unauthenticated int64 // connections being served that have not authenticated
	// Connections refused at accept: past Config.MaxConnections, past
	// Config.MaxConnectionsPerIP.
	RefusedMax, RefusedPerIP int64
	// Connections closed: not authenticated within Config.AuthTimeout; the
	// least recently active unauthenticated one, past
	// Config.MaxUnauthenticated.
	ClosedAuthTimeout, ClosedUnauthenticated int64
}

// Server listens and serves connections. New configures it, Listen
// listens, Serve accepts in a goroutine it owns, Close stops it and Wait
// waits for every goroutine it started.
type Server struct {
	cfg     Config
	handler Handler
	log     *slog.Logger

	ln   net.Listener
	addr string // the actual listen address, once started

	cancel    context.CancelFunc // cancels every connection's context
	done      chan struct{}      // closed by Close
	closeOnce sync.Once
	wg        sync.WaitGroup // the accept loop and every connection

	mu     sync.Mutex // guards the fields below
	conns  map[*conn]struct{}
	perIP  map[netip.Addr]int // live connections per client address
	unauth list.List          // of *conn: unauthenticated, least recently active first

	live       atomic.Int64 // changed with mu held, read without
	nUnauth    atomic.Int64 // unauth.Len(), read without mu
	refusedMax atomic.Int64
	refusedIP  atomic.Int64
	closedTime atomic.Int64 // auth timeouts
	closedMax  atomic.Int64 // unauthenticated connections closed to make room
	totalConns atomic.Int64
	nextConnID atomic.Int64
	nextReqID  atomic.Int32
	bytesIn    atomic.Int64
	bytesOut   atomic.Int64
	requests   atomic.Int64
}

// New returns a server that will hand the connections to h. It does no I/O.
func New(cfg Config, h Handler) *Server {
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	return &Server{
		cfg:     cfg,
		handler: h,
		log:     cfg.Logger,
		done:    make(chan struct{}),
		conns:   make(map[*conn]struct{}),
		perIP:   make(map[netip.Addr]int),
	}
}

// Listen opens the listener on Config.Addr; Addr is valid from then on.
// Clients may connect, but are answered only once Serve runs, so that the
// caller can finish its setup with the actual address first.
func (s *Server) Listen() error {
	ln, err := net.Listen("tcp", s.cfg.Addr)
	if err != nil {
		return fmt.Errorf("listen: %w", err)
	}
	if s.cfg.TLS != nil {
		ln = newTLSListener(ln, s.cfg.TLS, s.cfg.TLSHandshakeTimeout, s.log)
	}
	s.ln = ln
	s.addr = ln.Addr().String()
	return nil
}

// Serve accepts connections in a goroutine it owns until Close, and
// returns at once.
func (s *Server) Serve() {
	ctx, cancel := context.WithCancel(context.Background())
	s.cancel = cancel
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		s.acceptLoop(ctx)
	}()
}

// Addr returns the actual listen address once Start has returned.
func (s *Server) Addr() string { return s.addr }

// Stats returns the connection and network counters.
func (s *Server) Stats() Stats {
	return Stats{
		Current:      s.live.Load(),
		TotalCreated: s.totalConns.Load(),
		BytesIn:      s.bytesIn.Load(),
		BytesOut:     s.bytesOut.Load(),
		Requests:     s.requests.Load(),

		Unauthenticated:       s.nUnauth.Load(),
		RefusedMax:            s.refusedMax.Load(),
		RefusedPerIP:          s.refusedIP.Load(),
		ClosedAuthTimeout:     s.closedTime.Load(),
		ClosedUnauthenticated: s.closedMax.Load(),
	}
}

// Close stops accepting, cancels every connection's context and closes
// its network connection. It does not wait for the connections' goroutines
// to end (a command may first need its caller to release it): Wait does.
// Close may be called more than once, and before Start.
func (s *Server) Close() error {
	var err error
	s.closeOnce.Do(func() {
		close(s.done)
		if s.ln == nil { // never listened
			return
		}
		if s.cancel != nil {
			s.cancel()
		}
		err = s.ln.Close()
		if errors.Is(err, net.ErrClosed) {
			err = nil
		}
		s.mu.Lock()
		for c := range s.conns {
			c.nc.Close()
		}
		s.mu.Unlock()
	})
	return err
}

// Wait waits for the accept loop and every connection's goroutine to end.
func (s *Server) Wait() { s.wg.Wait() }

func (s *Server) acceptLoop(ctx context.Context) {
	var backoff time.Duration
	for {
		nc, err := s.ln.Accept()
		if err != nil {
			select {
			case <-s.done:
				return
			default:
			}
			if errors.Is(err, net.ErrClosed) {
				return
			}
			// A transient failure (e.g. too many open files): back off
			// as net/http does rather than spin.
			backoff = min(max(2*backoff, 5*time.Millisecond), time.Second)
			s.log.Warn("accept", "err", err, "retry_in", backoff)
			select {
			case <-time.After(backoff):
			case <-s.done:
				return
			}
			continue
		}
		backoff = 0
		c := s.admit(nc)
		if c == nil {
			continue
		}
		s.wg.Add(1)
		go func() {
			defer s.wg.Done()
			defer c.nc.Close()
			defer s.release(c) // first, so that the counters are right once the client sees the close
			c.serve(ctx)
		}()
	}
}
