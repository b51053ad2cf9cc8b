package mongo

import (
	"slices"
	"strings"
	"time"

	"github.com/tide-cdc/tide/cdc"
)

// The source's optional abilities (package cdc): what a status page, a
// progress line or a worker's table shows of it.
var (
	_ cdc.Lagger           = (*Source)(nil)
	_ cdc.SnapshotReporter = (*Source)(nil)
	_ cdc.StatusDetailer   = (*Source)(nil)
)

// Lag is how long ago the change at the acknowledged position was made,
// in the whole seconds of its cluster time; unknown before the first
// acknowledgement.
func (s *Source) Lag(now time.Time) cdc.Lag {
	st := s.Stats()
	if st.Committed.T == 0 {
		return cdc.Lag{}
	}
	return cdc.Lag{Time: st.Lag(now), TimeKnown: true, At: st.Committed}
}

// SnapshotProgress reports the initial snapshot, one entry per
// collection. The source hands out one marker before the copy (the start
// position) and one after it (the stream's start): the copy is over at
// the second, or at the first change.
func (s *Source) SnapshotProgress() cdc.SnapshotProgress {
	st := s.Stats()
	p := cdc.SnapshotProgress{Copying: true}
	for op, n := range st.Events {
		if op == cdc.OpMarker && n > 1 || op != cdc.OpMarker && op != cdc.OpSnapshot && n > 0 {
			p.Copying = false
		}
	}
	switch {
	case st.SnapshotByNamespace != nil:
		for ns, np := range st.SnapshotByNamespace {
			p.Collections = append(p.Collections, cdc.NamespaceProgress{Namespace: ns, Done: np.Done, Total: np.Total})
		}
		slices.SortFunc(p.Collections, func(a, b cdc.NamespaceProgress) int { return strings.Compare(a.Namespace, b.Namespace) })
	case st.SnapshotTotal > 0 || st.SnapshotDone > 0:
		p.Collections = []cdc.NamespaceProgress{{Namespace: s.cfg.Database + "." + s.cfg.Collection, Done: st.SnapshotDone, Total: st.SnapshotTotal}}
	}
	return p
}

var _ cdc.PositionTimer = (*Source)(nil)

// PositionTime is the cluster time of a position of this source, in whole
// seconds: the time of the change it follows. It needs no connection.
func (s *Source) PositionTime(p cdc.Position) (time.Time, bool) {
	pos, err := parsePosition(p)
	if err != nil {
		return time.Time{}, false
	}
	ts, ok := pos.time()
	if !ok || ts.T == 0 {
		return time.Time{}, false
	}
	return time.Unix(int64(ts.T), 0), true
}
