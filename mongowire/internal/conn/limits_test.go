package conn

import (
	"bufio"
	"errors"
	"net"
	"os"
	"syscall"
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
)

// stillOpen waits d for the server to close nc, and reports whether it
// did not.
func stillOpen(t *testing.T, nc net.Conn, d time.Duration) bool {
	t.Helper()
	nc.SetReadDeadline(time.Now().Add(d))
	defer nc.SetReadDeadline(time.Now().Add(10 * time.Second))
	_, err := nc.Read(make([]byte, 1))
	return errors.Is(err, os.ErrDeadlineExceeded)
}

// closedWithin reports whether the server closed nc within d.
func closedWithin(t *testing.T, nc net.Conn, d time.Duration) bool {
	t.Helper()
	begin := time.Now()
	if !closed(nc) {
		return false
	}
	if took := time.Since(begin); took > d {
		t.Errorf("closed after %v, want within %v", took, d)
	}
	return true
}

func roundTrip(t *testing.T, nc net.Conn, r *bufio.Reader, cmd bson.D) {
	t.Helper()
	send(t, nc, cmd)
	if got := receive(t, r).Index(0).Key(); got != cmd[0].Key {
		t.Fatalf("reply to %s: %s", cmd[0].Key, got)
	}
}

var hello = bson.D{{Key: "hello", Value: 1}}

// TestAuthTimeout: a connection must authenticate within AuthTimeout, or
// keep sending hellos within twice that, as a driver's monitoring
// connection does.
func TestAuthTimeout(t *testing.T) {
	const timeout = 300 * time.Millisecond
	tests := map[string]struct {
		run        func(t *testing.T, nc net.Conn, r *bufio.Reader) // ends once the server closed nc, or it stayed
		wantClosed bool
	}{
		"silent": {
			run: func(t *testing.T, nc net.Conn, _ *bufio.Reader) {
				if !closedWithin(t, nc, 3*timeout) {
					t.Error("a silent connection stayed open")
				}
			},
			wantClosed: true,
		},
		"one hello, then idle": {
			run: func(t *testing.T, nc net.Conn, r *bufio.Reader) {
				roundTrip(t, nc, r, hello)
				if !stillOpen(t, nc, timeout/2) {
					t.Fatal("closed before twice the timeout after a hello")
				}
				if !closedWithin(t, nc, 3*timeout) {
					t.Error("an idle connection stayed open")
				}
			},
			wantClosed: true,
		},
		"monitoring: a hello every 4/3 of the timeout": {
			run: func(t *testing.T, nc net.Conn, r *bufio.Reader) {
				for range 4 {
					roundTrip(t, nc, r, hello)
					if !stillOpen(t, nc, timeout*4/3) {
						t.Fatal("a connection checking the server regularly was closed")
					}
				}
			},
		},
		"a command other than hello": {
			run: func(t *testing.T, nc net.Conn, r *bufio.Reader) {
				roundTrip(t, nc, r, hello)
				roundTrip(t, nc, r, bson.D{{Key: "echo", Value: 1}})
				if !closedWithin(t, nc, 2*timeout) {
					t.Error("an unauthenticated connection stayed open")
				}
			},
			wantClosed: true,
		},
		"authenticated": {
			run: func(t *testing.T, nc net.Conn, r *bufio.Reader) {
				roundTrip(t, nc, r, hello)
				roundTrip(t, nc, r, bson.D{{Key: "auth", Value: 1}})
				if !stillOpen(t, nc, 3*timeout) {
					t.Fatal("an authenticated connection was closed")
				}
				roundTrip(t, nc, r, bson.D{{Key: "echo", Value: 1}})
			},
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			s, _ := start(t, Config{AuthTimeout: timeout})
			nc := dial(t, s)
			tc.run(t, nc, bufio.NewReader(nc))
			want := int64(0)
			if tc.wantClosed {
				want = 1
			}
			if st := s.Stats(); st.ClosedAuthTimeout != want {
				t.Errorf("ClosedAuthTimeout = %d, want %d", st.ClosedAuthTimeout, want)
			}
		})
	}
}

// TestMaxUnauthenticated: past the cap, a new connection closes the least
// recently active unauthenticated one; authenticated ones do not count.
func TestMaxUnauthenticated(t *testing.T) {
	s, _ := start(t, Config{MaxUnauthenticated: 2})
	a, b := dial(t, s), dial(t, s)
	ra, rb := bufio.NewReader(a), bufio.NewReader(b)
	roundTrip(t, b, rb, hello)
	roundTrip(t, a, ra, hello) // a is now the more recently active
	if st := s.Stats(); st.Unauthenticated != 2 {
		t.Fatalf("Unauthenticated = %d, want 2", st.Unauthenticated)
	}

	c := dial(t, s) // the third: b, idle the longest, makes room
	if !closed(b) {
		t.Fatal("the least recently active unauthenticated connection stayed open")
	}
	rc := bufio.NewReader(c)
	roundTrip(t, c, rc, bson.D{{Key: "auth", Value: 1}})
	roundTrip(t, a, ra, bson.D{{Key: "echo", Value: 1}})

	d := dial(t, s) // a and d: within the cap, c is authenticated
	rd := bufio.NewReader(d)
	roundTrip(t, d, rd, hello)
	roundTrip(t, a, ra, hello)
	roundTrip(t, c, rc, bson.D{{Key: "echo", Value: 1}})
	if st := s.Stats(); st.Unauthenticated != 2 || st.ClosedUnauthenticated != 1 || st.Current != 3 {
		t.Errorf("stats = %+v, want 2 unauthenticated, 1 closed to make room, 3 current", st)
	}
}

// TestConnectionCapMakesRoom: at the global cap, an unauthenticated
// connection makes room for a new one; authenticated ones never do.
func TestConnectionCapMakesRoom(t *testing.T) {
	s, _ := start(t, Config{MaxConnections: 2, AuthTimeout: time.Minute})
	a, b := dial(t, s), dial(t, s)
	ra, rb := bufio.NewReader(a), bufio.NewReader(b)
	roundTrip(t, a, ra, bson.D{{Key: "auth", Value: 1}})
	roundTrip(t, b, rb, hello)

	c := dial(t, s)
	if !closed(b) {
		t.Fatal("at the cap, the unauthenticated connection stayed open")
	}
	rc := bufio.NewReader(c)
	roundTrip(t, c, rc, bson.D{{Key: "auth", Value: 1}})
	if !closed(dial(t, s)) {
		t.Fatal("a connection past a cap of authenticated ones was served")
	}
	roundTrip(t, a, ra, bson.D{{Key: "echo", Value: 1}})
	roundTrip(t, c, rc, bson.D{{Key: "echo", Value: 1}})
	if st := s.Stats(); st.ClosedUnauthenticated != 1 || st.RefusedMax != 1 {
		t.Errorf("stats = %+v, want 1 closed to make room, 1 refused", st)
	}
}

// TestMaxConnectionsPerIP: the connection past the cap of its address is
// closed at once; another address still gets in.
func TestMaxConnectionsPerIP(t *testing.T) {
	s, _ := start(t, Config{MaxConnectionsPerIP: 2})
	for range 2 {
		nc := dial(t, s)
		roundTrip(t, nc, bufio.NewReader(nc), hello)
	}
	if third := dial(t, s); !closed(third) {
		t.Fatal("a connection past the per-address cap was served")
	}
	if st := s.Stats(); st.RefusedPerIP != 1 || st.Current != 2 {
		t.Errorf("stats = %+v, want 1 refused per address, 2 current", st)
	}

	// All of 127.0.0.0/8 is loopback on Linux; elsewhere only 127.0.0.1 may be.
	d := net.Dialer{LocalAddr: &net.TCPAddr{IP: net.IPv4(127, 0, 0, 2)}}
	other, err := d.Dial("tcp", s.Addr())
	if errors.Is(err, syscall.EADDRNOTAVAIL) {
		t.Skipf("no second loopback address: %v", err)
	}
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	other.SetDeadline(time.Now().Add(10 * time.Second))
	roundTrip(t, other, bufio.NewReader(other), hello)
}
