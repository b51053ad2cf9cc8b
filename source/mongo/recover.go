package mongo

import (
	"encoding/json"
	"fmt"
	"math"
	"regexp"
	"strconv"
	"strings"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/tide-cdc/tide/cdc"
)

// The recovery commands (tide checkpoint set, tide snapshot) write
// positions with these functions. Each keeps the catalog epoch of the
// position it replaces, so that a multi-collection checkpoint's identity
// (its catalog.<n>) still describes the new position; the rest of the
// identity (deployment, stream settings, collection UUIDs) is the
// checkpoint's, checked by Open against the server as always.

var (
	timestampCall = regexp.MustCompile(`^Timestamp\(\s*(\d+)\s*,\s*(\d+)\s*\)$`)
	timestampDot  = regexp.MustCompile(`^(\d+)\.(\d+)$`)
)

// ParseClusterTime reads a cluster time in one of three forms:
// Timestamp(sec, inc) and sec.inc name one exact cluster time (as mongosh
// prints it, and as the tide_mongo_* metrics and checkpoint show print
// it); an RFC 3339 time in whole seconds, such as 2026-12-02T01:20:00Z,
// stands for Timestamp(sec, 0), so that resuming after it starts with the
// first change of that second.
func ParseClusterTime(s string) (cdc.Timestamp, error) {
	s = strings.TrimSpace(s)
	parse := func(sec, inc string) (cdc.Timestamp, error) {
		t, err1 := strconv.ParseUint(sec, 10, 32)
		i, err2 := strconv.ParseUint(inc, 10, 32)
		if err1 != nil || err2 != nil {
			return cdc.Timestamp{}, fmt.Errorf("cluster time %q: seconds and increment must each fit in 32 bits", s)
		}
		if t == 0 {
			return cdc.Timestamp{}, fmt.Errorf("cluster time %q: seconds must not be 0", s)
		}
		return cdc.Timestamp{T: uint32(t), I: uint32(i)}, nil
	}
	if m := timestampCall.FindStringSubmatch(s); m != nil {
		return parse(m[1], m[2])
	}
	if m := timestampDot.FindStringSubmatch(s); m != nil {
		return parse(m[1], m[2])
	}
	t, err := time.Parse(time.RFC3339Nano, s)
	if err != nil {
		return cdc.Timestamp{}, fmt.Errorf("cluster time %q is not an RFC 3339 time (2026-12-02T01:20:00Z), Timestamp(sec, inc) or sec.inc", s)
	}
	if t.Nanosecond() != 0 {
		return cdc.Timestamp{}, fmt.Errorf("cluster time %q has a fraction of a second: cluster times count whole seconds (and an increment within the second); "+
			"use Timestamp(sec, inc) for a point inside a second", s)
	}
	if t.Unix() <= 0 || t.Unix() > math.MaxUint32 {
		return cdc.Timestamp{}, fmt.Errorf("cluster time %q is outside the range of cluster times (1970 to 2106)", s)
	}
	return cdc.Timestamp{T: uint32(t.Unix())}, nil
}

// FormatClusterTime renders ts as Timestamp(sec, inc) with its UTC time.
func FormatClusterTime(ts cdc.Timestamp) string {
	return fmt.Sprintf("Timestamp(%d, %d) (%s)", ts.T, ts.I, time.Unix(int64(ts.T), 0).UTC().Format(time.RFC3339))
}

// prevEpoch reads the catalog epoch of the position being replaced.
func prevEpoch(prev cdc.Position) (*uint64, error) {
	if len(prev) == 0 {
		return nil, nil
	}
	p, err := parsePosition(prev)
	if err != nil {
		return nil, fmt.Errorf("the checkpoint's current position: %w", err)
	}
	return p.Catalog, nil
}

func marshalPos(p position) (cdc.Position, error) {
	b, err := json.Marshal(p)
	if err != nil {
		return nil, fmt.Errorf("encode position: %w", err)
	}
	if _, err := parsePosition(b); err != nil { // never write what Open refuses
		return nil, err
	}
	return b, nil
}

// ClusterTimePosition returns the position that resumes with the first
// change after ts (startAtOperationTime is inclusive, so the source opens
// the stream at the cluster time right after ts).
func ClusterTimePosition(prev cdc.Position, ts cdc.Timestamp) (cdc.Position, error) {
	epoch, err := prevEpoch(prev)
	if err != nil {
		return nil, err
	}
	return marshalPos(position{AfterClusterTime: &clusterTime{T: ts.T, I: ts.I}, Catalog: epoch})
}

// ResumeTokenPosition returns the position that resumes after the event
// whose resume token (its _id, as Extended JSON) is tokenJSON.
func ResumeTokenPosition(prev cdc.Position, tokenText string) (cdc.Position, error) {
	epoch, err := prevEpoch(prev)
	if err != nil {
		return nil, err
	}
	var tok bson.Raw
	if err := bson.UnmarshalExtJSON([]byte(tokenText), false, &tok); err != nil {
		return nil, fmt.Errorf("resume token %s is not a JSON document: %v", quote(tokenText), err)
	}
	if s, ok := tok.Lookup("_data").StringValueOK(); !ok || s == "" {
		return nil, fmt.Errorf(`resume token %s has no _data string: a resume token is a change event's _id, such as {"_data": "8265..."}`, quote(tokenText))
	}
	return marshalPos(position{ResumeToken: tokenJSON(tok), Catalog: epoch})
}

// ResnapshotPosition returns the position that makes the next run take a
// new start token and copy the collection(s) again; the gap it closes
// began at prev's cluster time.
func ResnapshotPosition(prev cdc.Position, now time.Time) (cdc.Position, error) {
	rs := &resnapshotPos{Requested: now.UTC().Format(time.RFC3339)}
	if len(prev) > 0 {
		p, err := parsePosition(prev)
		if err != nil {
			return nil, fmt.Errorf("the checkpoint's current position: %w", err)
		}
		if p.Resnapshot != nil {
			rs.After = p.Resnapshot.After
		} else if ts, ok := p.time(); ok {
			rs.After = &clusterTime{T: ts.T, I: ts.I}
		}
	}
	return marshalPos(position{Resnapshot: rs})
}

// DescribePosition says in words where a position resumes, for the
// confirmation of the recovery commands.
func DescribePosition(p cdc.Position) string {
	if len(p) == 0 {
		return "no position (a fresh start)"
	}
	pos, err := parsePosition(p)
	if err != nil {
		return fmt.Sprintf("an unreadable position %.200s (%v)", p, err)
	}
	at := ""
	if ts, ok := pos.time(); ok {
		at = " at cluster time " + FormatClusterTime(ts)
	}
	switch {
	case pos.AfterClusterTime != nil:
		return "the first change after cluster time " + FormatClusterTime(cdc.Timestamp{T: pos.AfterClusterTime.T, I: pos.AfterClusterTime.I})
	case pos.Resnapshot != nil:
		return "a re-snapshot, requested " + pos.Resnapshot.Requested
	case pos.Snapshot != nil && pos.Snapshot.Gap:
		return "a re-snapshot in progress, streaming from its start token" + at + " once the copy is done"
	case pos.Snapshot != nil:
		return "an initial snapshot in progress, streaming from its start token" + at + " once the copy is done"
	case pos.StartAfterToken != nil:
		return "after the invalidate event " + string(pos.StartAfterToken) + at
	}
	return "after resume token " + string(pos.ResumeToken) + at
}

// The Config's side of the recovery commands (tide.Repositioner): the
// functions above, for a pipeline whose source this Config configures.

// PositionAfterClusterTime is ClusterTimePosition for a cluster time
// written as ParseClusterTime reads it.
func (Config) PositionAfterClusterTime(prev cdc.Position, clusterTime string) (cdc.Position, error) {
	ts, err := ParseClusterTime(clusterTime)
	if err != nil {
		return nil, err
	}
	return ClusterTimePosition(prev, ts)
}

// PositionAfterEvent is ResumeTokenPosition.
func (Config) PositionAfterEvent(prev cdc.Position, token string) (cdc.Position, error) {
	return ResumeTokenPosition(prev, token)
}

// PositionForResnapshot is ResnapshotPosition.
func (Config) PositionForResnapshot(prev cdc.Position, now time.Time) (cdc.Position, error) {
	return ResnapshotPosition(prev, now)
}

// DescribePosition is DescribePosition.
func (Config) DescribePosition(p cdc.Position) string { return DescribePosition(p) }
