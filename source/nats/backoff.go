package nats

import (
	"math/rand/v2"
	"time"
)

const (
	backoffBase   = 500 * time.Millisecond
	backoffCap    = 5 * time.Second
	backoffJitter = 0.2
)

// backoff returns how long to wait after the n-th consecutive fetch error
// (n ≥ 1): 500ms, 1s, 2s, 4s, then 5s, each spread ±20% by r, a uniform
// number in [0, 1).
func backoff(n int, r float64) time.Duration {
	d := backoffBase
	for i := 1; i < n && d < backoffCap; i++ {
		d *= 2
	}
	d = min(d, backoffCap)
	return time.Duration(float64(d) * (1 - backoffJitter + 2*backoffJitter*r))
}

// jitter is the random source of backoff: math/rand/v2's top-level
// generator, seeded from the operating system's entropy, so that many
// pipelines that failed together do not retry together.
func jitter() float64 { return rand.Float64() }
