package mongowire_test

import (
	"runtime"
	"runtime/debug"
	"sync"
	"sync/atomic"
	"time"
)

// sampleHeap samples the heap in use every interval until the returned
// function is called, which returns the peak above the level at the
// start (after a collection): what the memory tests and benchmarks
// measure a query or a load by.
func sampleHeap(every time.Duration) (stop func() uint64) {
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	base := ms.HeapInuse
	var peak atomic.Uint64
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() {
		tick := time.NewTicker(every)
		defer tick.Stop()
		for {
			var ms runtime.MemStats
			runtime.ReadMemStats(&ms)
			if ms.HeapInuse > peak.Load() {
				peak.Store(ms.HeapInuse)
			}
			select {
			case <-done:
				return
			case <-tick.C:
			}
		}
	})
	return func() uint64 {
		close(done)
		wg.Wait()
		return peak.Load() - min(base, peak.Load())
	}
}

// sampleLiveHeap is sampleHeap with the collector at GOGC=10 while it
// samples, so that the heap in use is what the query holds, not garbage
// that a collector slowed by a loaded machine has yet to take back: what
// a test bounds. A query that holds too much shows all the same.
func sampleLiveHeap(every time.Duration) (stop func() uint64) {
	gogc := debug.SetGCPercent(10)
	stopSampling := sampleHeap(every)
	return func() uint64 {
		defer debug.SetGCPercent(gogc)
		return stopSampling()
	}
}
