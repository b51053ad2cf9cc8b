package testenv

import (
	"context"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// TestNATSCluster checks that the cluster replicates an R3 bucket and
// keeps serving it with one node stopped, and that the node comes back.
func TestNATSCluster(t *testing.T) {
	c := NATSCluster(t, 3)
	nc, err := nats.Connect(c.URL(), nats.MaxReconnects(-1), nats.ReconnectWait(50*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	kv, err := js.CreateKeyValue(ctx, jetstream.KeyValueConfig{Bucket: "b", Replicas: 3})
	if err != nil {
		t.Fatalf("create R3 bucket: %v", err)
	}
	if _, err := kv.Put(ctx, "k", []byte("1")); err != nil {
		t.Fatal(err)
	}
	c.Stop(1)
	if c.Server(1) != nil {
		t.Fatal("Server(1) is not nil after Stop")
	}
	put := func(v string) {
		t.Helper()
		for {
			_, err := kv.Put(ctx, "k", []byte(v))
			if err == nil {
				return
			}
			if ctx.Err() != nil {
				t.Fatalf("put with a node stopped: %v", err)
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
	put("2")
	c.Restart(1)
	put("3")
	e, err := kv.Get(ctx, "k")
	if err != nil || string(e.Value()) != "3" {
		t.Fatalf("get = %v, %v; want 3", e, err)
	}
}

func TestMedian(t *testing.T) {
	v := []float64{3, 1, 2}
	for _, tc := range []struct {
		in   []float64
		want float64
	}{{v, 2}, {[]float64{4, 1, 3, 2}, 2.5}, {[]float64{7}, 7}, {nil, 0}} {
		if got := Median(tc.in); got != tc.want {
			t.Errorf("Median(%v) = %v, want %v", tc.in, got, tc.want)
		}
	}
	if v[0] != 3 || v[1] != 1 {
		t.Errorf("Median sorted its argument: %v", v)
	}
}
