package conn

import (
	"net"
	"net/netip"
	"time"
)

// The connection limits: which connections the accept loop admits (the
// cap, the cap per client address, room for a new unauthenticated one)
// and how long one may stay unauthenticated.

// admit registers nc as a live connection, or closes it at once if it is
// past the cap of its address or the global cap, or the server is
// closing. A new connection past Config.MaxUnauthenticated, or past the
// global cap while some connections are unauthenticated, closes the least
// recently active unauthenticated one instead: an idle client gives way
// to one that is about to authenticate.
func (s *Server) admit(nc net.Conn) *conn {
	ip, hasIP := remoteIP(nc)
	s.mu.Lock()
	defer s.mu.Unlock()
	select {
	case <-s.done:
		nc.Close()
		return nil
	default:
	}
	if n := s.cfg.MaxConnectionsPerIP; n > 0 && hasIP && s.perIP[ip] >= n {
		s.refusedIP.Add(1)
		s.log.Warn("connection refused: too many connections from its address", "remote", nc.RemoteAddr().String(), "max_per_ip", n)
		nc.Close()
		return nil
	}
	if s.live.Load() >= int64(s.cfg.MaxConnections) {
		if s.unauth.Len() == 0 {
			s.refusedMax.Add(1)
			s.log.Warn("connection refused: too many connections", "remote", nc.RemoteAddr().String(), "max", s.cfg.MaxConnections)
			nc.Close()
			return nil
		}
		// Unauthenticated connections never keep a client out: the
		// idlest gives way (and stays counted until its goroutine ends).
		s.closeIdlestLocked()
	}
	s.live.Add(1)
	c := s.newConn(nc)
	if hasIP {
		c.ip = ip
		s.perIP[ip]++
	}
	s.conns[c] = struct{}{}
	if s.cfg.AuthTimeout > 0 || s.cfg.MaxUnauthenticated > 0 {
		c.limited, c.helloOnly = true, true
		c.unauth = s.unauth.PushBack(c)
		s.nUnauth.Add(1)
		if s.cfg.AuthTimeout > 0 {
			c.authDeadline = time.Now().Add(s.cfg.AuthTimeout)
		}
		if n := s.cfg.MaxUnauthenticated; n > 0 && s.unauth.Len() > n {
			s.closeIdlestLocked()
		}
	}
	return c
}

// closeIdlestLocked closes the unauthenticated connection that sent its
// last message (or connected) longest ago. Its goroutine ends when its
// read fails.
func (s *Server) closeIdlestLocked() {
	old := s.unauth.Front().Value.(*conn)
	s.leaveUnauthLocked(old)
	s.closedMax.Add(1)
	old.log.Info("closing connection: making room for a new one; this is the least recently active unauthenticated connection",
		"unauthenticated", s.unauth.Len()+1, "max_unauthenticated", s.cfg.MaxUnauthenticated)
	old.nc.Close()
}

// release forgets a connection that has ended.
func (s *Server) release(c *conn) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.conns, c)
	if c.ip.IsValid() {
		if s.perIP[c.ip]--; s.perIP[c.ip] <= 0 {
			delete(s.perIP, c.ip)
		}
	}
	s.leaveUnauthLocked(c)
	s.live.Add(-1)
}

func (s *Server) leaveUnauthLocked(c *conn) {
	if c.unauth != nil {
		s.unauth.Remove(c.unauth)
		c.unauth = nil
		s.nUnauth.Add(-1)
	}
}

// remoteIP is the client address of nc, if it has one (TCP).
func remoteIP(nc net.Conn) (netip.Addr, bool) {
	a, ok := nc.RemoteAddr().(*net.TCPAddr)
	if !ok {
		return netip.Addr{}, false
	}
	ip, ok := netip.AddrFromSlice(a.IP)
	return ip.Unmap(), ok
}

// The connection's side, called from its goroutine only.

// trackAuth is called once the session is open: a session that cannot
// tell whether it authenticated counts as authenticated.
func (c *conn) trackAuth() {
	if !c.limited {
		return
	}
	if a, ok := c.sess.(AuthSession); ok {
		c.authSess = a
		return
	}
	c.authenticated()
}

// received notes that an unauthenticated connection sent a message: it is
// now the most recently active one.
func (c *conn) received() {
	if c.authSess == nil {
		return
	}
	c.s.mu.Lock()
	defer c.s.mu.Unlock()
	if c.unauth != nil {
		c.s.unauth.MoveToBack(c.unauth)
	}
}

// answered updates the authentication state once a request was run, and
// before its reply is sent: hello reports whether it was a hello (or
// isMaster).
func (c *conn) answered(hello bool) {
	if c.authSess == nil {
		return
	}
	if c.authSess.Authenticated() {
		c.authenticated()
		return
	}
	if c.authDeadline.IsZero() {
		return
	}
	now := time.Now()
	switch {
	case hello && c.helloOnly:
		c.authDeadline = now.Add(2 * c.s.cfg.AuthTimeout)
	case !hello:
		c.helloOnly = false
		if dl := now.Add(c.s.cfg.AuthTimeout); dl.Before(c.authDeadline) {
			c.authDeadline = dl
		}
	}
}

// authenticated lifts the limits on unauthenticated connections.
func (c *conn) authenticated() {
	c.authSess = nil
	c.authDeadline = time.Time{}
	c.s.mu.Lock()
	defer c.s.mu.Unlock()
	c.s.leaveUnauthLocked(c)
}

// readDeadline is now+d, or the authentication deadline if that is sooner;
// byAuth reports which.
func (c *conn) readDeadline(d time.Duration) (dl time.Time, byAuth bool) {
	dl = time.Now().Add(d)
	if !c.authDeadline.IsZero() && c.authDeadline.Before(dl) {
		return c.authDeadline, true
	}
	return dl, false
}
