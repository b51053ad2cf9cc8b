package kafka_test

import (
	"sync"
	"testing"
	"time"

	"github.com/tide-cdc/tide/cdc"
	"github.com/tide-cdc/tide/cdc/cdctest"
	"github.com/tide-cdc/tide/sink/kafka"
)

// TestContract runs the conformance suite with checkpoint: sink: each
// subtest gets a cluster of its own; what is durable is what a
// read_committed consumer sees. Records go out in Put, inside the
// batch's transaction, so nothing uncommitted is visible.
func TestContract(t *testing.T) {
	var mu sync.Mutex
	clusters := map[string][]string{}
	brokers := func(t *testing.T) []string {
		mu.Lock()
		defer mu.Unlock()
		if clusters[t.Name()] == nil {
			clusters[t.Name()] = cluster(t)
		}
		return clusters[t.Name()]
	}
	config := func(t *testing.T) kafka.Config {
		c := kafka.DefaultConfig()
		c.Brokers, c.Topic, c.Pipeline, c.Logger = brokers(t), "out", cdctest.Pipeline, testLogger(t)
		c.Partitions = 1 // one order to compare with
		return c
	}
	cdctest.TestSink(t, cdctest.SinkHarness{
		New: func(t *testing.T) cdc.Sink { return kafka.New(config(t)) },
		Committed: func(t *testing.T) [][]byte {
			var data [][]byte
			for _, r := range readTopic(t, brokers(t), "out") {
				data = append(data, r.Value)
			}
			return data
		},
		Checkpoints: func(t *testing.T, s cdc.Sink) cdctest.Store { return s.(*kafka.Sink).Checkpoints() },
		FailOpen: func(t *testing.T) cdc.Sink {
			c := config(t)
			c.Brokers = []string{"127.0.0.1:1"} // nothing listens on port 1
			c.MaxOutage = 200 * time.Millisecond
			return kafka.New(c)
		},
	})
}
