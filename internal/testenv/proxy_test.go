package testenv

import (
	"errors"
	"io"
	"net"
	"os"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// echoServer accepts connections and echoes what they send until the test
// ends.
func echoServer(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			wg.Add(1)
			go func() {
				defer wg.Done()
				defer c.Close()
				io.Copy(c, c)
			}()
		}
	}()
	t.Cleanup(func() { ln.Close(); wg.Wait() })
	return ln.Addr().String()
}

func dialProxy(t *testing.T, p *Proxy) net.Conn {
	t.Helper()
	c, err := net.Dial("tcp", p.Addr())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

func echo(t *testing.T, c net.Conn, msg string) {
	t.Helper()
	if _, err := c.Write([]byte(msg)); err != nil {
		t.Fatalf("write %q: %v", msg, err)
	}
	got := make([]byte, len(msg))
	c.SetReadDeadline(time.Now().Add(10 * time.Second))
	if _, err := io.ReadFull(c, got); err != nil || string(got) != msg {
		t.Fatalf("echo of %q: got %q, %v", msg, got, err)
	}
}

// waitClosed requires c to be closed by the proxy within 10s.
func waitClosed(t *testing.T, c net.Conn) {
	t.Helper()
	c.SetReadDeadline(time.Now().Add(10 * time.Second))
	if _, err := c.Read(make([]byte, 1)); err == nil || errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("read after the break: %v, want the connection closed", err)
	}
}

func TestProxyCut(t *testing.T) {
	p := StartProxy(t, echoServer(t))
	c := dialProxy(t, p)
	echo(t, c, "hello")
	p.Cut()
	waitClosed(t, c)
	if p.Cuts() != 1 {
		t.Errorf("Cuts() = %d, want 1", p.Cuts())
	}
	echo(t, dialProxy(t, p), "again") // a new connection is forwarded
}

func TestProxyDropAfter(t *testing.T) {
	p := StartProxy(t, echoServer(t))
	p.DropAfter(5, 300*time.Millisecond)
	c := dialProxy(t, p)
	echo(t, c, "hello") // 5 bytes: not past the mark
	if _, err := c.Write([]byte("lost")); err != nil {
		t.Fatal(err)
	}
	// Dropped without an error: nothing comes back, the connection stays
	// open until the drop ends.
	c.SetReadDeadline(time.Now().Add(100 * time.Millisecond))
	if n, err := c.Read(make([]byte, 4)); !errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("read during the drop: %d bytes, %v; want nothing and no error", n, err)
	}
	waitClosed(t, c)
	if p.Cuts() != 1 {
		t.Errorf("Cuts() = %d, want 1", p.Cuts())
	}
	echo(t, dialProxy(t, p), "forwarded again") // the drop happens once
}
