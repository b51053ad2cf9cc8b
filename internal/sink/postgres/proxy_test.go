package postgres_test

import (
	"bytes"
	"io"
	"net"
	"net/url"
	"sync"
	"testing"

	"github.com/tide-cdc/tide/internal/sink/postgres"
	"github.com/tide-cdc/tide/internal/testenv"
)

// cutProxy forwards TCP connections to a PostgreSQL server and, on chosen
// COMMITs (counted across connections from 1), breaks the connection:
// after forwarding the COMMIT (the server commits, the client never hears
// of it), or instead of forwarding it (the server rolls back).
type cutProxy struct {
	l        net.Listener
	upstream string
	after    map[int]bool // cut after forwarding these commits
	before   map[int]bool // cut before forwarding these commits

	wg sync.WaitGroup

	mu      sync.Mutex // guards the fields below
	commits int
	cuts    int
	conns   []net.Conn
	closed  bool
}

func startCutProxy(t *testing.T, upstream string, after, before []int) *cutProxy {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &cutProxy{l: l, upstream: upstream, after: map[int]bool{}, before: map[int]bool{}}
	for _, n := range after {
		p.after[n] = true
	}
	for _, n := range before {
		p.before[n] = true
	}
	p.wg.Add(1)
	go p.accept()
	t.Cleanup(p.close)
	return p
}

func (p *cutProxy) addr() string { return p.l.Addr().String() }

func (p *cutProxy) track(c net.Conn) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return false
	}
	p.conns = append(p.conns, c)
	return true
}

func (p *cutProxy) close() {
	p.mu.Lock()
	p.closed = true
	for _, c := range p.conns {
		c.Close()
	}
	p.mu.Unlock()
	p.l.Close()
	p.wg.Wait()
}

func (p *cutProxy) accept() {
	defer p.wg.Done()
	for {
		client, err := p.l.Accept()
		if err != nil {
			return
		}
		server, err := net.Dial("tcp", p.upstream)
		if err != nil {
			client.Close()
			continue
		}
		if !p.track(client) || !p.track(server) {
			client.Close()
			server.Close()
			return
		}
		p.wg.Add(2)
		go func() { // server -> client
			defer p.wg.Done()
			io.Copy(client, server)
			client.Close()
		}()
		go func() { // client -> server
			defer p.wg.Done()
			p.forward(client, server.(*net.TCPConn))
		}()
	}
}

// commitQuery is how pgx sends COMMIT: the statement text, NUL-ended.
var commitQuery = []byte("commit\x00")

func (p *cutProxy) forward(client net.Conn, server *net.TCPConn) {
	buf := make([]byte, 64<<10)
	for {
		n, err := client.Read(buf)
		if n > 0 {
			chunk := buf[:n]
			cut, forward := false, true
			if bytes.Contains(chunk, commitQuery) {
				p.mu.Lock()
				p.commits++
				switch {
				case p.after[p.commits]:
					cut = true
				case p.before[p.commits]:
					cut, forward = true, false
				}
				if cut {
					p.cuts++
				}
				p.mu.Unlock()
			}
			if forward {
				if _, err := server.Write(chunk); err != nil {
					client.Close()
					return
				}
			}
			if cut {
				// The client loses its connection at once. The server
				// gets a clean end of input after what was forwarded, so
				// it runs a forwarded COMMIT and rolls back otherwise;
				// its replies go nowhere.
				client.Close()
				server.CloseWrite()
				return
			}
		}
		if err != nil {
			server.CloseWrite()
			return
		}
	}
}

func (p *cutProxy) cutCount() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.cuts
}

// TestConnectionCutAroundCommit: connections break right after COMMIT was
// forwarded (the batch committed, but the sink never heard) and right
// before (it did not). Append mode shows any duplicate as an extra row:
// every event must be there exactly once, and the checkpoint row must
// name the last.
func TestConnectionCutAroundCommit(t *testing.T) {
	for _, mode := range []string{postgres.ModeAppend, postgres.ModeMirror} {
		t.Run(mode, func(t *testing.T) {
			dsn := testenv.Postgres(t)
			c := connect(t, dsn)
			u, _ := url.Parse(dsn)
			// Commits 1 and 2 create tables and sessions; batches follow.
			proxy := startCutProxy(t, u.Host, []int{3, 6, 7}, []int{10})
			via := *u
			via.Host = proxy.addr()

			cfg := postgres.Config{DSN: via.String(), Table: "events", Mode: mode, CreateTable: true, SoftDelete: true,
				Pipeline: "cut", CheckpointInSink: true, Logger: testLogger(t)}
			const n = 3000
			if err := runGenerate(t, "cut", postgres.New(cfg).WithCheckpoint(), n, 30, 200); err != nil {
				t.Fatalf("run: %v", err)
			}
			if got := proxy.cutCount(); got != 4 {
				t.Fatalf("proxy cut %d connections, want 4: the test did not test", got)
			}
			key := `(doc->>'seq')::bigint`
			if mode == postgres.ModeAppend {
				key = `(_full_document->>'seq')::bigint`
			}
			if got := queryInt(t, c, `SELECT count(*) FROM events`); got != n {
				t.Errorf("rows = %d, want %d", got, n)
			}
			if got := queryInt(t, c, `SELECT count(DISTINCT `+key+`) FROM events WHERE `+key+` BETWEEN 1 AND $1`, n); got != n {
				t.Errorf("distinct events = %d, want %d", got, n)
			}
			if got := checkpointSeq(t, c, "cut"); got != n {
				t.Errorf("checkpoint seq = %d, want %d", got, n)
			}
		})
	}
}
