package conn

import (
	"bufio"
	"crypto/tls"
	"encoding/binary"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"sync"
	"time"
)

// newTLSListener wraps ln so that every accepted connection speaks TLS
// (1.2 at least). The handshake runs on the connection's first Read or
// Write, in the connection's own goroutine, so that a slow client never
// holds up Accept; it must end within timeout.
func newTLSListener(ln net.Listener, cfg *tls.Config, timeout time.Duration, log *slog.Logger) net.Listener {
	cfg = cfg.Clone()
	if cfg.MinVersion < tls.VersionTLS12 {
		cfg.MinVersion = tls.VersionTLS12
	}
	return &tlsListener{Listener: ln, log: log, cfg: cfg, timeout: timeout}
}

type tlsListener struct {
	net.Listener
	log     *slog.Logger
	cfg     *tls.Config
	timeout time.Duration
}

func (l *tlsListener) Accept() (net.Conn, error) {
	nc, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	return &tlsConn{Conn: nc, l: l}, nil
}

// tlsConn is a server connection that does its TLS handshake on first
// use. Until then it remembers the deadlines its user sets, and applies
// them once the handshake is over (the handshake has its own, shorter one).
type tlsConn struct {
	net.Conn // the raw connection; Read and Write go through tc
	l        *tlsListener

	once sync.Once
	tc   *tls.Conn // set by the handshake
	err  error     // the handshake's error

	mu              sync.Mutex // guards the fields below
	shook           bool
	readDL, writeDL time.Time
}

func (c *tlsConn) Read(p []byte) (int, error) {
	if err := c.handshake(); err != nil {
		return 0, err
	}
	return c.tc.Read(p)
}

func (c *tlsConn) Write(p []byte) (int, error) {
	if err := c.handshake(); err != nil {
		return 0, err
	}
	return c.tc.Write(p)
}

func (c *tlsConn) SetDeadline(t time.Time) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.readDL, c.writeDL = t, t
	if !c.shook {
		return nil
	}
	return c.Conn.SetDeadline(t)
}

func (c *tlsConn) SetReadDeadline(t time.Time) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.readDL = t
	if !c.shook {
		return nil
	}
	return c.Conn.SetReadDeadline(t)
}

func (c *tlsConn) SetWriteDeadline(t time.Time) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.writeDL = t
	if !c.shook {
		return nil
	}
	return c.Conn.SetWriteDeadline(t)
}

// ConnectionState returns the TLS state once the handshake is done.
func (c *tlsConn) ConnectionState() (tls.ConnectionState, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if !c.shook {
		return tls.ConnectionState{}, false
	}
	return c.tc.ConnectionState(), true
}

func (c *tlsConn) handshake() error {
	c.once.Do(func() { c.err = c.doHandshake() })
	return c.err
}

// doHandshake looks at the first bytes: a TLS record goes on to the
// handshake; a MongoDB message header is a client without tls=true, which
// is told so in the log and closed at once rather than left to time out.
func (c *tlsConn) doHandshake() error {
	remote := c.RemoteAddr().String()
	log := c.l.log
	c.mu.Lock()
	dl := time.Now().Add(c.l.timeout)
	if !c.readDL.IsZero() && c.readDL.Before(dl) {
		dl = c.readDL
	}
	c.mu.Unlock()
	if err := c.Conn.SetDeadline(dl); err != nil {
		return err
	}
	br := bufio.NewReaderSize(c.Conn, 16)
	head, err := br.Peek(3)
	if err != nil {
		log.Debug("tls handshake: no data", "remote", remote, "err", err)
		return fmt.Errorf("tls handshake: %w", err)
	}
	// A handshake record: content type 22, then protocol version 3.x.
	if head[0] != 0x16 || head[1] != 3 {
		if h, _ := br.Peek(16); looksLikeMessageHeader(h) {
			log.Warn("client sent plaintext to a TLS port; connect with tls=true", "remote", remote)
		} else {
			log.Warn("tls handshake: the client did not send a TLS ClientHello", "remote", remote)
		}
		return errNotTLS
	}
	tc := tls.Server(&bufferedConn{Conn: c.Conn, r: br}, c.l.cfg)
	if err := tc.Handshake(); err != nil {
		log.Warn("tls handshake", "remote", remote, "err", err)
		return fmt.Errorf("tls handshake: %w", err)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.tc, c.shook = tc, true
	return errors.Join(c.Conn.SetReadDeadline(c.readDL), c.Conn.SetWriteDeadline(c.writeDL))
}

// looksLikeMessageHeader reports whether h is a MongoDB message header: a
// plausible length and an opcode that clients send.
func looksLikeMessageHeader(h []byte) bool {
	if len(h) < 16 {
		return false
	}
	n := int32(binary.LittleEndian.Uint32(h[0:4]))
	switch op := binary.LittleEndian.Uint32(h[12:16]); op {
	case 2013, 2004, 2012: // OP_MSG, OP_QUERY, OP_COMPRESSED
		return n >= 16 && n <= 48<<20
	}
	return false
}

// bufferedConn reads what was peeked, then reads the connection itself.
type bufferedConn struct {
	net.Conn
	r *bufio.Reader
}

func (b *bufferedConn) Read(p []byte) (int, error) {
	if b.r.Buffered() > 0 {
		return b.r.Read(p)
	}
	return b.Conn.Read(p)
}
