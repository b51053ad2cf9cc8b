package status

import (
	"time"

	"github.com/tide-cdc/tide/cdc"
	"github.com/tide-cdc/tide/pipeline"
)

// SourceView is what every display of a pipeline shows of its source
// (the status page, tide run's progress line, a worker's table): read
// from the source's optional abilities (package cdc), never from its
// concrete type, so a program's own source shows the same way.
type SourceView struct {
	// Lag is the source's (cdc.Lagger), its time made closer by the
	// wall time of the last committed change.
	Lag cdc.Lag
	// Snapshot is the source's copy (cdc.SnapshotReporter); Snapshots
	// says whether the source copies at all.
	Snapshot  cdc.SnapshotProgress
	Snapshots bool
	// Details are the source's own status details (cdc.StatusDetailer).
	Details map[string]any
}

// ViewSource reads src's abilities, with st the pipeline's statistics.
//
// The lag is the pipeline's (pipeline.Stats.Lag) where it knows it: the
// age of the oldest change not yet committed, to the millisecond, 0 when
// caught up. Otherwise it is the source's (now minus the cluster time of
// its committed position, in whole seconds), made closer by the wall
// time of the last committed change.
func ViewSource(src cdc.Source, st pipeline.Stats, now time.Time) SourceView {
	var v SourceView
	if l, ok := src.(cdc.Lagger); ok {
		v.Lag = l.Lag(now)
	}
	// The pipeline's own lag is the honest one: the age of the oldest
	// change read and not committed, 0 when the source is caught up.
	// Where it cannot tell (the source is not open yet, or retrying), the
	// source's own measure stands.
	if lag, ok := st.Lag(now); ok {
		v.Lag.Time, v.Lag.TimeKnown = lag, true
	} else if v.Lag.TimeKnown && !st.LastWallTime.IsZero() {
		v.Lag.Time = min(v.Lag.Time, max(0, now.Sub(st.LastWallTime)))
	}
	if r, ok := src.(cdc.SnapshotReporter); ok {
		v.Snapshot, v.Snapshots = r.SnapshotProgress(), true
	}
	if d, ok := src.(cdc.StatusDetailer); ok {
		v.Details = d.StatusDetails()
	}
	return v
}
