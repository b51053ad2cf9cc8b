package postgres_test

import (
	"bytes"
	"io"
	"log/slog"
	"net"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/tide-cdc/tide/internal/testenv"
	"github.com/tide-cdc/tide/sink/postgres"
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
		// A cut connection stays cut: the cancel request that pgx sends
		// for a connection it lost does not get through either, so the
		// server finishes what it received.
		head := make([]byte, 8)
		client.SetReadDeadline(time.Now().Add(10 * time.Second))
		if _, err := io.ReadFull(client, head); err != nil || bytes.Equal(head[4:], cancelRequestCode) {
			client.Close()
			continue
		}
		client.SetReadDeadline(time.Time{})
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
		if _, err := server.Write(head); err != nil {
			client.Close()
			server.Close()
			continue
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

// cancelRequestCode follows the length of a CancelRequest packet.
var cancelRequestCode = []byte{0x04, 0xd2, 0x16, 0x2e}

// commitFlight marks the client's message flight that carries a batch's
// checkpoint (the parameter of its upsert into tide_checkpoints) and,
// after it, the batch's COMMIT; a flight ends with a Sync message.
var (
	commitFlight = []byte(`{"source":`)
	syncMessage  = []byte{'S', 0, 0, 0, 4}
)

func (p *cutProxy) forward(client net.Conn, server *net.TCPConn) {
	buf := make([]byte, 64<<10)
	inFlight, cutAfter := false, false
	for {
		n, err := client.Read(buf)
		if n > 0 {
			chunk := buf[:n]
			if !inFlight && bytes.Contains(chunk, commitFlight) {
				inFlight = true
				p.mu.Lock()
				p.commits++
				switch {
				case p.after[p.commits]:
					cutAfter = true
					p.cuts++
				case p.before[p.commits]:
					// The server never sees the COMMIT: it rolls back
					// when its input ends.
					p.cuts++
					p.mu.Unlock()
					client.Close()
					server.CloseWrite()
					return
				}
				p.mu.Unlock()
			}
			if _, err := server.Write(chunk); err != nil {
				client.Close()
				return
			}
			if inFlight && bytes.HasSuffix(chunk, syncMessage) {
				inFlight = false
				if cutAfter {
					// The whole flight, COMMIT included, went through; the
					// client loses its connection before any answer. The
					// server commits, and its replies go nowhere.
					client.Close()
					server.CloseWrite()
					return
				}
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
			proxy := startCutProxy(t, u.Host, []int{3, 6, 7}, []int{10})
			via := *u
			via.Host = proxy.addr()

			var logs testenv.Buffer
			cfg := postgres.Config{Columns: postgres.ColumnsDocument, DSN: via.String(), Table: "events", Mode: mode, CreateTable: true, SoftDelete: true,
				Pipeline: "cut",
				Logger:   slog.New(slog.NewTextHandler(io.MultiWriter(&logs, t.Output()), &slog.HandlerOptions{Level: slog.LevelInfo}))}
			const n = 3000
			if err := runGenerate(t, "cut", postgres.New(cfg), n, 30, 200); err != nil {
				t.Fatalf("run: %v", err)
			}
			if got := proxy.cutCount(); got != 4 {
				t.Fatalf("proxy cut %d connections, want 4: the test did not test", got)
			}
			// Both outcomes of a lost COMMIT were met and recognised.
			for _, w := range []string{"lost commit had succeeded", "lost commit had not succeeded"} {
				if !strings.Contains(logs.String(), w) {
					t.Errorf("the sink never logged %q", w)
				}
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
