package nats

import (
	"io"
	"net"
	"sync"
	"testing"
	"time"
)

// lossyProxy forwards TCP connections to a NATS server. Once the clients
// have sent it cutAfter bytes, it drops whatever they send for a while and
// then closes their connections: what they published meanwhile is lost
// without an error, as on a network that fails. New connections are
// forwarded again.
type lossyProxy struct {
	l        net.Listener
	upstream string
	cutAfter int64
	dropFor  time.Duration

	wg sync.WaitGroup

	mu       sync.Mutex // guards the fields below
	sent     int64      // bytes from clients, forwarded or dropped
	dropping bool
	cuts     int
	conns    []net.Conn
	closed   bool
}

func startLossyProxy(t *testing.T, upstream string, cutAfter int64, dropFor time.Duration) *lossyProxy {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &lossyProxy{l: l, upstream: upstream, cutAfter: cutAfter, dropFor: dropFor}
	p.wg.Add(1)
	go p.accept()
	t.Cleanup(p.close)
	return p
}

func (p *lossyProxy) url() string { return "nats://" + p.l.Addr().String() }

func (p *lossyProxy) cutCount() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.cuts
}

func (p *lossyProxy) track(cs ...net.Conn) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return false
	}
	p.conns = append(p.conns, cs...)
	return true
}

func (p *lossyProxy) close() {
	p.mu.Lock()
	p.closed = true
	p.closeConnsLocked()
	p.mu.Unlock()
	p.l.Close()
	p.wg.Wait()
}

func (p *lossyProxy) closeConnsLocked() {
	for _, c := range p.conns {
		c.Close()
	}
	p.conns = nil
}

func (p *lossyProxy) accept() {
	defer p.wg.Done()
	for {
		client, err := p.l.Accept()
		if err != nil {
			return // closed
		}
		server, err := net.Dial("tcp", p.upstream)
		if err != nil {
			client.Close()
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
			client.Close()
		}()
		go func() {
			defer p.wg.Done()
			p.forward(server, client)
			server.Close()
		}()
	}
}

// forward copies the client's bytes to the server, dropping them while
// the proxy drops; the first time cutAfter is passed, it starts dropping
// and, dropFor later, closes every connection.
func (p *lossyProxy) forward(server, client net.Conn) {
	buf := make([]byte, 32<<10)
	for {
		n, err := client.Read(buf)
		if n > 0 {
			p.mu.Lock()
			p.sent += int64(n)
			if p.cuts == 0 && !p.dropping && p.sent > p.cutAfter {
				p.dropping = true
				p.wg.Add(1)
				go p.cutLater()
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

func (p *lossyProxy) cutLater() {
	defer p.wg.Done()
	t := time.NewTimer(p.dropFor)
	defer t.Stop()
	<-t.C
	p.mu.Lock()
	defer p.mu.Unlock()
	p.dropping = false
	p.cuts++
	p.closeConnsLocked()
}
