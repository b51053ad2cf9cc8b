package worker

import (
	"hash/fnv"
	"slices"
	"strings"
)

// Assign maps each pipeline to one of workers, the same way on every
// worker that knows the same two sets, so that a group agrees on who runs
// what without a leader. It is rendezvous hashing with bounded loads: each
// pipeline, in name order, goes to the worker that ranks highest for it
// among those not yet full. The loads differ by at most one, and a worker joining or leaving moves few
// pipelines. With no workers, Assign returns an empty map.
func Assign(pipelines, workers []string) map[string]string {
	out := make(map[string]string, len(pipelines))
	if len(workers) == 0 {
		return out
	}
	ps := slices.Clone(pipelines)
	slices.Sort(ps)
	ps = slices.Compact(ps)
	ws := slices.Clone(workers)
	slices.Sort(ws)
	ws = slices.Compact(ws)
	floor, extra := len(ps)/len(ws), len(ps)%len(ws) // extra workers get floor+1
	full := 0
	load := make(map[string]int, len(ws))
	ranked := make([]string, len(ws))
	for _, p := range ps {
		copy(ranked, ws)
		slices.SortFunc(ranked, func(a, b string) int {
			ha, hb := score(a, p), score(b, p)
			switch {
			case ha > hb:
				return -1
			case ha < hb:
				return 1
			}
			return strings.Compare(a, b)
		})
		for _, w := range ranked {
			if load[w] < floor || (load[w] == floor && full < extra) {
				if load[w] == floor {
					full++
				}
				out[p] = w
				load[w]++
				break
			}
		}
	}
	return out
}

// score is the rendezvous weight of worker for pipeline: FNV-1a, then a
// 64-bit finaliser so that names differing in one letter spread well.
func score(worker, pipeline string) uint64 {
	h := fnv.New64a()
	h.Write([]byte(worker))
	h.Write([]byte{0})
	h.Write([]byte(pipeline))
	x := h.Sum64()
	x ^= x >> 33
	x *= 0xff51afd7ed558ccd
	x ^= x >> 33
	x *= 0xc4ceb9fe1a85ec53
	x ^= x >> 33
	return x
}
