package nats

import "sync"

// budget bounds the bytes of events in the queue. The one reader goroutine
// takes room before it queues an event; Poll gives it back as it hands the
// event out. An event larger than the whole budget still passes, alone.
type budget struct {
	max   int64
	freed chan struct{} // one pending wake-up for the reader

	mu   sync.Mutex // guards used
	used int64
}

func newBudget(max int64) *budget {
	return &budget{max: max, freed: make(chan struct{}, 1)}
}

// take waits until n bytes fit, or stop is closed (it then reports false).
func (b *budget) take(n int64, stop <-chan struct{}) bool {
	for {
		b.mu.Lock()
		if b.used == 0 || b.used+n <= b.max {
			b.used += n
			b.mu.Unlock()
			return true
		}
		b.mu.Unlock()
		select {
		case <-b.freed:
		case <-stop:
			return false
		}
	}
}

// give returns n bytes taken by take.
func (b *budget) give(n int64) {
	if n == 0 {
		return
	}
	b.mu.Lock()
	b.used -= n
	b.mu.Unlock()
	select {
	case b.freed <- struct{}{}:
	default:
	}
}

// inUse returns the bytes taken and not yet given back.
func (b *budget) inUse() int64 {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.used
}
