package nats

import (
	"bytes"
	"fmt"
	"testing"

	"github.com/tide-cdc/tide/internal/testenv"
)

// TestQueueBoundedByMaxBufferedBytes: with nothing polled, the source
// queues no more bytes than three quarters of MaxBufferedBytes, however
// many messages its queue has room for, and then hands every message out
// in order.
func TestQueueBoundedByMaxBufferedBytes(t *testing.T) {
	const n, size = 100, 64 << 10
	s := testenv.NATS(t)
	nc := connectTo(t, s)
	js := newStream(t, nc, "BIG", "big.>")
	big := func(i int) []byte {
		p := fmt.Appendf(nil, `{"n":%d,"pad":"`, i)
		p = append(p, bytes.Repeat([]byte{'x'}, size-len(p)-2)...)
		return append(p, '"', '}')
	}
	publish(t, js, "big.data", 0, n, big)

	cfg := jsConfig(t, nc, "BIG", "tide")
	cfg.MaxBufferedBytes = 1 << 20
	cfg.MaxAckPending = -1 // nothing bounds the deliveries but the budget
	src := openSource(t, cfg, nil)
	limit := cfg.MaxBufferedBytes / 4 * 3
	eventually(t, "queue full by bytes", func() bool { return src.room.inUse() > limit-2*size })
	if used := src.room.inUse(); used > limit {
		t.Fatalf("queue holds %d bytes, budget %d", used, limit)
	}
	if q := len(src.queue); q > int(limit/size)+1 {
		t.Fatalf("queue holds %d messages of %d bytes with a budget of %d", q, size, limit)
	}
	got := pollN(t, src, n)
	for i, ev := range got {
		if k := number(t, ev); k != i {
			t.Fatalf("event %d is message %d", i, k)
		}
	}
	if used := src.room.inUse(); used != 0 {
		t.Errorf("after everything was polled the budget holds %d bytes", used)
	}
}
