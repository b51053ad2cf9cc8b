package testenv

import (
	"io"
	"net"
	"sync"
	"testing"
	"time"
)

// Proxy forwards TCP connections from a port of 127.0.0.1 to a target
// address, and breaks them as a failing network does: at once (Cut), or
// by losing what clients send for a while, silently, and then the
// connections (DropAfter). Clients that reconnect through it are
// forwarded again. It stops when the test ends.
type Proxy struct {
	ln     net.Listener
	target string
	wg     sync.WaitGroup // the accept loop, the copiers, a pending drop
	stop   chan struct{}  // closed by close: a pending drop ends

	mu       sync.Mutex // guards the fields below
	conns    map[net.Conn]struct{}
	closed   bool
	cuts     int
	sent     int64         // bytes from clients, forwarded or dropped
	dropAt   int64         // with dropFor > 0, drop once sent passes it
	dropFor  time.Duration // how long to drop; 0: no drop to come
	dropping bool
	down     bool // Down: every connection is reset as it is accepted
}

// StartProxy starts a proxy to target, the address of a TCP server.
func StartProxy(t testing.TB, target string) *Proxy {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("proxy listen: %v", err)
	}
	p := &Proxy{ln: ln, target: target, stop: make(chan struct{}), conns: map[net.Conn]struct{}{}}
	p.wg.Add(1)
	go p.accept()
	t.Cleanup(p.close)
	return p
}

// Addr is the proxy's address, host:port, for clients to connect to.
func (p *Proxy) Addr() string { return p.ln.Addr().String() }

// Cut resets every connection the proxy carries, both ways.
func (p *Proxy) Cut() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.cuts++
	p.closeConnsLocked(true)
}

// Cuts is how many times the proxy has broken its connections, by Cut or
// at the end of a drop.
func (p *Proxy) Cuts() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.cuts
}

// Down takes the server away, as a stopped database: every connection
// is reset, and so is each new one as it is accepted, until Up.
func (p *Proxy) Down() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.down = true
	p.cuts++
	p.closeConnsLocked(true)
}

// Up ends Down: connections are forwarded again.
func (p *Proxy) Up() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.down = false
}

// DropAfter arms one drop: once clients have sent n more bytes, the proxy
// discards what they send for d, without an error, then closes every
// connection. What they sent meanwhile is lost, and they learn of it only
// by what never comes back.
func (p *Proxy) DropAfter(n int64, d time.Duration) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.dropAt, p.dropFor = p.sent+n, d
}

func (p *Proxy) accept() {
	defer p.wg.Done()
	for {
		client, err := p.ln.Accept()
		if err != nil {
			return // closed
		}
		p.mu.Lock()
		down := p.down
		p.mu.Unlock()
		if down {
			if tc, ok := client.(*net.TCPConn); ok {
				tc.SetLinger(0)
			}
			client.Close() // as a server that is down: the client retries
			continue
		}
		server, err := net.DialTimeout("tcp", p.target, time.Second)
		if err != nil {
			client.Close() // the server is down: the client retries
			continue
		}
		if !p.track(client, server) {
			client.Close()
			server.Close()
			return
		}
		p.wg.Add(2)
		go func() {
			defer p.wg.Done()
			io.Copy(client, server)
			p.untrack(client, server)
		}()
		go func() {
			defer p.wg.Done()
			p.forward(server, client)
			p.untrack(client, server)
		}()
	}
}

func (p *Proxy) track(cs ...net.Conn) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return false
	}
	for _, c := range cs {
		p.conns[c] = struct{}{}
	}
	return true
}

// untrack closes a pair whose copy ended, which ends the other copy too.
func (p *Proxy) untrack(cs ...net.Conn) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, c := range cs {
		c.Close()
		delete(p.conns, c)
	}
}

// forward copies the client's bytes to the server, or drops them while a
// drop lasts; the bytes that pass an armed drop's mark start it.
func (p *Proxy) forward(server, client net.Conn) {
	buf := make([]byte, 32<<10)
	for {
		n, err := client.Read(buf)
		if n > 0 {
			p.mu.Lock()
			p.sent += int64(n)
			if p.dropFor > 0 && !p.dropping && p.sent > p.dropAt {
				p.dropping = true
				p.wg.Add(1)
				go p.endDrop(p.dropFor)
				p.dropFor = 0
			}
			drop := p.dropping
			p.mu.Unlock()
			if !drop {
				if _, err := server.Write(buf[:n]); err != nil {
					return
				}
			}
		}
		if err != nil {
			return
		}
	}
}

// endDrop ends a drop after d by closing every connection.
func (p *Proxy) endDrop(d time.Duration) {
	defer p.wg.Done()
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
	case <-p.stop:
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	p.dropping = false
	p.cuts++
	p.closeConnsLocked(false)
}

// closeConnsLocked closes every connection: with reset, by a TCP reset
// rather than an orderly close.
func (p *Proxy) closeConnsLocked(reset bool) {
	for c := range p.conns {
		if tc, ok := c.(*net.TCPConn); ok && reset {
			tc.SetLinger(0)
		}
		c.Close()
	}
}

func (p *Proxy) close() {
	p.mu.Lock()
	p.closed = true
	p.closeConnsLocked(true)
	p.mu.Unlock()
	close(p.stop)
	p.ln.Close()
	p.wg.Wait()
}
