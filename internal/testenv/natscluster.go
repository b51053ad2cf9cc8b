package testenv

import (
	"fmt"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
)

// Cluster is a NATS cluster of in-process nats-server nodes with
// JetStream, on loopback ports, for tests of replicated (R3) streams and
// buckets and of a node's loss. Its methods are safe for concurrent use.
type Cluster struct {
	t     testing.TB
	name  string
	opts  []server.Options // per node: fixed client and route ports, store directory
	mu    sync.Mutex       // guards nodes
	nodes []*server.Server // nil while a node is stopped
}

// NATSCluster starts an n-node NATS cluster with JetStream (n >= 1; use 3
// for R3), each node storing on files in its own t.TempDir(), and waits
// until JetStream has a meta leader that every node follows. Ports are
// fixed for the cluster's life, so a node stopped with Stop comes back on
// the same ports with Restart. Every node is shut down when the test ends.
func NATSCluster(t testing.TB, n int) *Cluster {
	t.Helper()
	if n < 1 {
		t.Fatalf("NATSCluster: %d nodes, want at least 1", n)
	}
	c := &Cluster{t: t, name: fmt.Sprintf("tide-test-%d", time.Now().UnixNano()%1e6)}
	ports := freePorts(t, 2*n)
	for i := range n {
		c.opts = append(c.opts, server.Options{
			ServerName: fmt.Sprintf("n%d", i+1),
			Host:       "127.0.0.1",
			Port:       ports[i],
			JetStream:  true,
			StoreDir:   t.TempDir(),
			NoLog:      true,
			NoSigs:     true,
			Cluster: server.ClusterOpts{
				Name: c.name,
				Host: "127.0.0.1",
				Port: ports[n+i],
			},
		})
	}
	c.nodes = make([]*server.Server, n)
	t.Cleanup(c.shutdown)
	for i := range n {
		c.nodes[i] = c.start(i)
	}
	c.WaitReady()
	return c
}

// URLs returns the client URLs of every node, stopped or not, as a client
// that should fail over lists them.
func (c *Cluster) URLs() []string {
	urls := make([]string, len(c.opts))
	for i, o := range c.opts {
		urls[i] = fmt.Sprintf("nats://127.0.0.1:%d", o.Port)
	}
	return urls
}

// URL returns the URLs joined with commas, as nats.Connect takes them.
func (c *Cluster) URL() string { return strings.Join(c.URLs(), ",") }

// Server returns node i (from 0), or nil while it is stopped.
func (c *Cluster) Server(i int) *server.Server {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.nodes[i]
}

// Stop shuts node i down, as a crash of its process would (its store
// stays for Restart).
func (c *Cluster) Stop(i int) {
	c.t.Helper()
	c.mu.Lock()
	s := c.nodes[i]
	c.nodes[i] = nil
	c.mu.Unlock()
	if s == nil {
		c.t.Fatalf("NATSCluster: node %d is already stopped", i)
	}
	s.Shutdown()
	s.WaitForShutdown()
}

// Restart starts node i again on its ports and store, and waits until
// the cluster is ready again.
func (c *Cluster) Restart(i int) {
	c.t.Helper()
	c.mu.Lock()
	running := c.nodes[i] != nil
	c.mu.Unlock()
	if running {
		c.t.Fatalf("NATSCluster: node %d is running", i)
	}
	s := c.start(i)
	c.mu.Lock()
	c.nodes[i] = s
	c.mu.Unlock()
	c.WaitReady()
}

// peersWait bounds the wait for the meta leader to know every node.
const peersWait = 5 * time.Second

// WaitReady waits until every running node is routed to the others and
// follows a JetStream meta leader that can place streams on all of them;
// it fails the test after 20s.
func (c *Cluster) WaitReady() {
	c.t.Helper()
	start := time.Now()
	deadline := start.Add(20 * time.Second)
	for {
		c.mu.Lock()
		var running []*server.Server
		for _, s := range c.nodes {
			if s != nil {
				running = append(running, s)
			}
		}
		c.mu.Unlock()
		leader, current := false, true
		for _, s := range running {
			// The leader should also have the stats of every running
			// node, or it refuses to place a replicated stream ("no
			// suitable peers for placement"); on a loaded machine they
			// can take long, so that part of the wait gives up after
			// peersWait and leaves the retry to the clients.
			if s.JetStreamIsLeader() && (len(s.JetStreamClusterPeers()) >= len(running) || time.Since(start) > peersWait) {
				leader = true
			}
			if !s.JetStreamIsCurrent() || s.NumRoutes() < len(running)-1 {
				current = false
			}
		}
		if leader && current {
			return
		}
		if time.Now().After(deadline) {
			c.t.Fatalf("NATSCluster: no JetStream meta leader followed by all %d running nodes after 20s", len(running))
		}
		time.Sleep(25 * time.Millisecond)
	}
}

func (c *Cluster) start(i int) *server.Server {
	c.t.Helper()
	o := c.opts[i] // a copy: the server keeps and edits its options
	o.Routes = server.RoutesFromStr(routesString(c.opts))
	s, err := server.NewServer(&o)
	if err != nil {
		c.t.Fatalf("start nats-server %s: %v", o.ServerName, err)
	}
	s.Start()
	if !s.ReadyForConnections(10 * time.Second) {
		s.Shutdown()
		c.t.Fatalf("nats-server %s not ready for connections after 10s", o.ServerName)
	}
	return s
}

func (c *Cluster) shutdown() {
	c.mu.Lock()
	nodes := c.nodes
	c.nodes = make([]*server.Server, len(nodes))
	c.mu.Unlock()
	for _, s := range nodes {
		if s != nil {
			s.Shutdown()
		}
	}
	for _, s := range nodes {
		if s != nil {
			s.WaitForShutdown()
		}
	}
}

func routesString(opts []server.Options) string {
	r := make([]string, len(opts))
	for i, o := range opts {
		r[i] = fmt.Sprintf("nats-route://127.0.0.1:%d", o.Cluster.Port)
	}
	return strings.Join(r, ",")
}

// freePorts returns n distinct loopback ports that were free a moment ago.
// Holding all the listeners until the end keeps them distinct.
func freePorts(t testing.TB, n int) []int {
	t.Helper()
	ports := make([]int, n)
	ls := make([]net.Listener, n)
	for i := range n {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatalf("find a free port: %v", err)
		}
		ls[i] = l
		ports[i] = l.Addr().(*net.TCPAddr).Port
	}
	for _, l := range ls {
		l.Close()
	}
	return ports
}
