package mongowire

import (
	"context"
	"log/slog"
	"net"
	"net/netip"

	"go.mongodb.org/mongo-driver/v2/bson"

	netconn "github.com/tide-cdc/tide/mongowire/internal/conn"
	"github.com/tide-cdc/tide/mongowire/internal/mongoerr"
)

// The wall between the connection layer and the commands: internal/conn
// owns the listener, TLS, the accept loop and each connection's framing,
// deadlines and cap, and hands every parsed request to the connection's
// conn here, which answers it with a reply document. Nothing in this
// package reads or writes a socket.

// connHandler opens the command layer's side of each connection. It is a
// type of its own so that Server does not export the conn.Handler method.
type connHandler struct{ s *Server }

func (h connHandler) Open(info netconn.Info) netconn.Session {
	c := &conn{
		s:          h.s,
		id:         info.ID,
		remote:     info.Remote.String(),
		remoteAddr: info.Remote,
		log:        info.Log,
	}
	if a, ok := info.Remote.(*net.TCPAddr); ok {
		if ip, ok := netip.AddrFromSlice(a.IP); ok {
			c.ip = ip.Unmap()
		}
	}
	return c
}

// conn is one client connection as the commands see it: who it is, what
// it authenticated as, and the client's application name. Only the
// connection's goroutine uses it.
type conn struct {
	s          *Server
	id         int64
	remote     string
	remoteAddr net.Addr   // nil for a conn made by a test without a connection
	ip         netip.Addr // the client's IP address; invalid if remoteAddr is not TCP
	log        *slog.Logger
	appName    string // from the handshake's client metadata
	auth       connAuth
}

// errCloseConn asks the connection layer to end the connection without a
// reply (a fail point's closeConnection).
var errCloseConn = netconn.ErrClose

// Command answers one OP_MSG command.
func (c *conn) Command(ctx context.Context, cmd bson.Raw) ([]byte, error) {
	return c.s.dispatch(ctx, c, cmd)
}

// Hello answers the legacy OP_QUERY handshake, fail points included.
func (c *conn) Hello(ctx context.Context, name string, cmd bson.Raw) ([]byte, error) {
	s := c.s
	r := &request{name: canonicalCommand(name), db: "admin", cmd: cmd, legacy: true}
	if s.cfg.EnableTestCommands {
		// failCommand applies to the handshake too, as mongod's.
		if act, ok := s.failpoints.match(r, c.appName); ok {
			if reply, err, handled := s.failCommand(ctx, act); handled {
				return reply, err
			}
		}
	}
	return s.runCommand(ctx, c, r)
}

// ErrorReply answers an OP_MSG that cannot be run.
func (c *conn) ErrorReply(err *mongoerr.Error) []byte { return c.s.errorReply(err) }

// Closing ends the connection once it failed to authenticate
// Config.AuthFailureLimit times, after the last refusal is sent.
func (c *conn) Closing() bool { return c.auth.closing }

// Authenticated tells the connection layer when the limits on
// unauthenticated connections (Config.AuthTimeout,
// Config.MaxUnauthenticatedConnections) stop applying: at the first
// successful authentication.
func (c *conn) Authenticated() bool { return c.auth.user != nil }

// ConnStats are a Server's connection counters.
type ConnStats struct {
	Current int64 // connections being served
	// Unauthenticated counts the connections being served that have not
	// authenticated (with Config.Auth; 0 without).
	Unauthenticated int64
	// Connections refused at accept: past Config.MaxConnections (all of
	// them authenticated), past Config.MaxConnectionsPerIP.
	RefusedMaxConnections, RefusedPerIP int64
	// Connections closed: not authenticated within Config.AuthTimeout;
	// the least recently active unauthenticated one, to make room for a
	// new connection past Config.MaxUnauthenticatedConnections or
	// Config.MaxConnections.
	ClosedAuthTimeout, ClosedUnauthenticated int64
}

// ConnStats returns a snapshot of the connection counters; before Start,
// all are zero.
func (s *Server) ConnStats() ConnStats {
	if s.conns == nil {
		return ConnStats{}
	}
	st := s.conns.Stats()
	return ConnStats{
		Current:               st.Current,
		Unauthenticated:       st.Unauthenticated,
		RefusedMaxConnections: st.RefusedMax,
		RefusedPerIP:          st.RefusedPerIP,
		ClosedAuthTimeout:     st.ClosedAuthTimeout,
		ClosedUnauthenticated: st.ClosedUnauthenticated,
	}
}
