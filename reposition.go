package tide

import (
	"time"

	"github.com/tide-cdc/tide/cdc"
	mongosource "github.com/tide-cdc/tide/source/mongo"
)

// A Repositioner is a source's Config whose positions an operator can
// move, for `tide checkpoint set` and `tide snapshot`: each method returns
// prev, the checkpoint's position, moved, keeping what else it records.
type Repositioner interface {
	// PositionAfterClusterTime resumes with the first change after a
	// cluster time, such as Timestamp(1764638400, 3).
	PositionAfterClusterTime(prev cdc.Position, clusterTime string) (cdc.Position, error)
	// PositionAfterEvent resumes after the event of a resume token.
	PositionAfterEvent(prev cdc.Position, token string) (cdc.Position, error)
	// PositionForResnapshot makes the next run copy the data again and
	// stream on from there.
	PositionForResnapshot(prev cdc.Position, now time.Time) (cdc.Position, error)
	// DescribePosition says where a position stands, for people.
	DescribePosition(p cdc.Position) string
}

// ErrInvalidated is wrapped by the error of a pipeline whose MongoDB
// change stream was invalidated: its collection was dropped or renamed
// under it, or its database dropped (tide run exits with code 3).
var ErrInvalidated = mongosource.ErrInvalidated

// A SnapshotRecorder is a source's Config that can record an incremental
// snapshot request in a stopped pipeline's checkpoint (tide snapshot
// --collection), for the next run to carry out. It changes cp.Meta and
// returns the snapshot's id.
type SnapshotRecorder interface {
	RecordSnapshot(cp *cdc.Checkpoint, req cdc.SnapshotRequest, now time.Time) (string, error)
}

var _ SnapshotRecorder = mongosource.Config{}
