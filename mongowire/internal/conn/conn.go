package conn

import (
	"bufio"
	"container/list"
	"context"
	"errors"
	"io"
	"log/slog"
	"net"
	"net/netip"
	"os"
	"runtime/debug"
	"slices"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/tide-cdc/tide/mongowire/internal/mongoerr"
	"github.com/tide-cdc/tide/mongowire/internal/wire"
)

// conn is one client connection. Only its serve goroutine touches it,
// except the Server, which closes nc (Close, or to make room for a new
// unauthenticated connection) and owns unauth.
type conn struct {
	s    *Server
	nc   net.Conn
	r    *bufio.Reader
	id   int64
	ip   netip.Addr // the client's address; invalid if not TCP
	log  *slog.Logger
	sess Session // the command layer's side of the connection
	out  []byte  // reply buffer, reused

	unauth *list.Element // in Server.unauth while unauthenticated; guarded by Server.mu

	// The limits on unauthenticated connections (limits.go), set by
	// Server.admit before the goroutine starts.
	limited      bool        // they apply: Config.AuthTimeout or MaxUnauthenticated is set
	authSess     AuthSession // sess, until it authenticated; nil if the limits do not apply
	authDeadline time.Time   // close if still unauthenticated by then; zero: never
	helloOnly    bool        // every message so far was a hello
	readByAuth   bool        // the current read ends at authDeadline
}

func (s *Server) newConn(nc net.Conn) *conn {
	id := s.nextConnID.Add(1)
	s.totalConns.Add(1)
	log := s.log.With("conn", id, "remote", nc.RemoteAddr().String())
	return &conn{
		s:   s,
		nc:  nc,
		r:   bufio.NewReaderSize(nc, 32<<10),
		id:  id,
		log: log,
	}
}

// serve reads and answers messages until the client leaves, a message is
// malformed beyond recovery, a deadline passes, or the server closes. The
// caller closes nc.
func (c *conn) serve(ctx context.Context) {
	defer func() {
		// Handlers recover their own panics; one here is a framing bug.
		// It ends this connection, never the server.
		if p := recover(); p != nil {
			c.log.Error("connection panicked", "panic", p, "stack", string(debug.Stack()))
		}
	}()
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	c.sess = c.s.handler.Open(Info{ID: c.id, Remote: c.nc.RemoteAddr(), Log: c.log})
	c.trackAuth()
	first := true
	for {
		msg, h, err := c.readMessage(first)
		if err != nil {
			if c.readByAuth && errors.Is(err, os.ErrDeadlineExceeded) {
				c.s.closedTime.Add(1)
				c.log.Info("closing connection: not authenticated in time", "auth_timeout", c.s.cfg.AuthTimeout)
				return
			}
			c.logReadError(err, first)
			return
		}
		first = false
		c.received()
		c.s.bytesIn.Add(int64(h.Length))
		c.s.requests.Add(1)
		switch h.OpCode {
		case wire.OpMsg:
			err = c.handleMsg(ctx, h, msg)
		case wire.OpQuery:
			err = c.handleQuery(ctx, h, msg)
		case wire.OpCompressed:
			c.log.Warn("closing connection: OP_COMPRESSED received, but compression is never advertised")
			return
		default:
			c.log.Warn("closing connection: unsupported opcode", "opcode", h.OpCode)
			return
		}
		if err != nil {
			if !errors.Is(err, ErrClose) {
				c.log.Info("closing connection", "err", err)
			}
			return
		}
	}
}

func (c *conn) logReadError(err error, first bool) {
	var we *wire.Error
	switch {
	case errors.As(err, &we):
		c.log.Warn("closing connection: bad message header", "err", err)
	case errors.Is(err, os.ErrDeadlineExceeded):
		if first {
			c.log.Info("closing connection: no message header in time after connect")
		} else {
			c.log.Debug("closing connection: deadline passed", "err", err)
		}
	case errors.Is(err, io.EOF), errors.Is(err, net.ErrClosed):
		c.log.Debug("connection closed")
	default:
		c.log.Debug("closing connection", "err", err)
	}
}

// readMessage reads one whole message. Its first byte must arrive within
// the first-header or idle deadline, the rest within the body deadline. The
// length is checked before anything is allocated, and a large body grows
// its buffer as bytes arrive rather than trusting the declared length.
func (c *conn) readMessage(first bool) ([]byte, wire.Header, error) {
	wait := c.s.cfg.IdleTimeout
	if first {
		wait = c.s.cfg.HeaderTimeout
	}
	dl, byAuth := c.readDeadline(wait)
	c.readByAuth = byAuth
	if err := c.nc.SetReadDeadline(dl); err != nil {
		return nil, wire.Header{}, err
	}
	var hdr [wire.HeaderLen]byte
	if _, err := io.ReadFull(c.r, hdr[:1]); err != nil {
		return nil, wire.Header{}, err
	}
	// A message has begun: the rest of it, header included, must arrive
	// within the body deadline (and the authentication deadline).
	dl, c.readByAuth = c.readDeadline(c.s.cfg.BodyTimeout)
	if err := c.nc.SetReadDeadline(dl); err != nil {
		return nil, wire.Header{}, err
	}
	if _, err := io.ReadFull(c.r, hdr[1:]); err != nil {
		return nil, wire.Header{}, err
	}
	h, err := wire.ParseHeader(hdr[:])
	if err != nil {
		return nil, h, err
	}
	n := int(h.Length)
	const step = 1 << 20
	buf := make([]byte, wire.HeaderLen, min(n, step))
	copy(buf, hdr[:])
	for len(buf) < n {
		if len(buf) == cap(buf) {
			buf = slices.Grow(buf, min(n-len(buf), cap(buf)))
		}
		k, err := c.r.Read(buf[len(buf):min(n, cap(buf))])
		buf = buf[:len(buf)+k]
		if err != nil && len(buf) < n {
			if errors.Is(err, io.EOF) {
				err = io.ErrUnexpectedEOF
			}
			return nil, h, err
		}
	}
	return buf, h, nil
}

// handleMsg answers one OP_MSG. A malformed message whose framing is
// intact gets an error reply and the connection stays; one that breaks the
// framing rules gets an error reply and the connection closes.
func (c *conn) handleMsg(ctx context.Context, h wire.Header, msg []byte) error {
	m, err := wire.ParseMsg(msg, wire.MaxCommandDepth)
	if err != nil {
		var we *wire.Error
		if !errors.As(err, &we) {
			return err
		}
		c.log.Debug("malformed OP_MSG", "err", err)
		c.answered(false)
		if m.MoreToCome() {
			if we.Close {
				return err
			}
			return nil
		}
		if werr := c.writeMsg(h.RequestID, c.sess.ErrorReply(we.Err)); werr != nil {
			return werr
		}
		if we.Close {
			return err
		}
		return nil
	}
	reply, err := c.sess.Command(ctx, m.Command)
	if err != nil {
		return err
	}
	hello := false
	if e, err := m.Command.IndexErr(0); err == nil {
		hello = isHello(e.Key())
	}
	// Before the reply: the client may act on it at once.
	c.answered(hello)
	if m.MoreToCome() { // fire-and-forget: execute, never answer
		return c.closeIfFailedTooOften()
	}
	if err := c.writeMsg(h.RequestID, reply); err != nil {
		return err
	}
	return c.closeIfFailedTooOften()
}

// isHello reports whether name is the handshake's command, which drivers'
// monitoring connections also send.
func isHello(name string) bool { return name == "hello" || name == "isMaster" || name == "ismaster" }

// closeIfFailedTooOften ends the connection once the session asks for it
// (too many failed authentications), after the last reply is sent.
func (c *conn) closeIfFailedTooOften() error {
	if c.sess.Closing() {
		return ErrClose
	}
	return nil
}

// handleQuery answers the legacy OP_QUERY handshake (hello/isMaster on
// admin.$cmd) with OP_REPLY and refuses any other OP_QUERY, as MongoDB 6+.
func (c *conn) handleQuery(ctx context.Context, h wire.Header, msg []byte) error {
	q, err := wire.ParseQuery(msg, wire.MaxCommandDepth)
	if err != nil {
		var we *wire.Error
		if !errors.As(err, &we) {
			return err
		}
		c.log.Debug("malformed OP_QUERY", "err", err)
		c.answered(false)
		if werr := c.writeReply(h.RequestID, wire.ReplyQueryFailure, queryFailure(we.Err)); werr != nil {
			return werr
		}
		if we.Close {
			return err
		}
		return nil
	}
	cmd := q.Query
	if inner, ok := cmd.Lookup("$query").DocumentOK(); ok {
		cmd = inner
	}
	name := ""
	if e, err := cmd.IndexErr(0); err == nil {
		name = e.Key()
	}
	switch {
	case !isCmdNamespace(q.Collection):
		c.answered(false)
		return c.writeReply(h.RequestID, wire.ReplyQueryFailure, queryFailure(mongoerr.New(mongoerr.UnsupportedOpQueryCommand,
			"Unsupported OP_QUERY command on %s. The client driver may require an upgrade.", q.Collection)))
	case !isHello(name):
		c.answered(false)
		return c.writeReply(h.RequestID, wire.ReplyQueryFailure, queryFailure(mongoerr.New(mongoerr.UnsupportedOpQueryCommand,
			"Unsupported OP_QUERY command: %s. The client driver may require an upgrade.", name)))
	}
	reply, err := c.sess.Hello(ctx, name, cmd)
	if err != nil {
		return err
	}
	c.answered(true)
	if err := c.writeReply(h.RequestID, 0, reply); err != nil {
		return err
	}
	return c.closeIfFailedTooOften()
}

func isCmdNamespace(ns string) bool {
	const suffix = ".$cmd"
	return len(ns) > len(suffix) && ns[len(ns)-len(suffix):] == suffix
}

func queryFailure(e *mongoerr.Error) []byte {
	b, _ := bson.Marshal(bson.D{
		{Key: "$err", Value: e.Message},
		{Key: "ok", Value: 0.0},
		{Key: "errmsg", Value: e.Message},
		{Key: "code", Value: e.Code},
		{Key: "codeName", Value: e.CodeName},
	})
	return b
}

func (c *conn) writeMsg(responseTo int32, doc []byte) error {
	c.out = wire.AppendMsg(c.out[:0], c.s.nextReqID.Add(1), responseTo, doc)
	return c.write()
}

func (c *conn) writeReply(responseTo, flags int32, doc []byte) error {
	c.out = wire.AppendReply(c.out[:0], c.s.nextReqID.Add(1), responseTo, flags, doc)
	return c.write()
}

func (c *conn) write() error {
	if err := c.nc.SetWriteDeadline(time.Now().Add(c.s.cfg.BodyTimeout)); err != nil {
		return err
	}
	c.s.bytesOut.Add(int64(len(c.out)))
	_, err := c.nc.Write(c.out)
	if cap(c.out) > 1<<20 { // do not pin a huge reply buffer to an idle connection
		c.out = nil
	}
	return err
}
