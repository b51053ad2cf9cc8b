package mongo

import (
	"bytes"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"strconv"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/x/bsonx/bsoncore"

	"github.com/tide-cdc/tide/cdc"
)

// maxTokenBytes bounds a resume token read from a checkpoint. Real tokens
// are a few hundred bytes; a document key can make them longer.
const maxTokenBytes = 64 << 10

// position is the JSON form of a cdc.Position. Exactly one field is set.
type position struct {
	ResumeToken     json.RawMessage `json:"resume_token,omitempty"`
	StartAfterToken json.RawMessage `json:"start_after_token,omitempty"`
	Snapshot        *snapshotPos    `json:"snapshot,omitempty"`
	// AfterClusterTime, written by tide checkpoint set --cluster-time,
	// resumes with the first event after that cluster time.
	AfterClusterTime *clusterTime `json:"after_cluster_time,omitempty"`
	// Resnapshot, written by tide snapshot, makes the next Open take a new
	// start token and copy the collections again.
	Resnapshot *resnapshotPos `json:"resnapshot,omitempty"`
	// Catalog, for many collections, names the checkpoint identity's
	// catalog.<n>: the captured collections as of this position.
	Catalog *uint64 `json:"catalog,omitempty"`
	// ISnap, beside a stream position, is the progress of the incremental
	// snapshots running there, by id.
	ISnap map[string]isnapPosRun `json:"isnap,omitempty"`
}

// snapshotPos is a position inside the initial snapshot: the stream
// starts from StartToken once the copy is done, and the copy resumes
// after LastID (null before the first document).
//
// A snapshot of many collections has Next and Active instead of LastID:
// the collections of the catalog, in name order, before Next were
// started, and those not in Active are done; an active one resumes after
// its _id (null: from the start); Turn is the active one whose document
// comes next.
type snapshotPos struct {
	// Gap marks a re-snapshot (tide snapshot): the copy closes a gap in
	// the change history, and ends with a snapshot line saying so.
	Gap        bool                       `json:"gap,omitempty"`
	StartToken json.RawMessage            `json:"start_token"`
	LastID     json.RawMessage            `json:"last_id,omitempty"`
	Next       *int                       `json:"next,omitempty"`
	Active     map[string]json.RawMessage `json:"active,omitempty"`
	Turn       string                     `json:"turn,omitempty"` // the active collection whose document comes next
}

// clusterTime is a cdc.Timestamp in a position.
type clusterTime struct {
	T uint32 `json:"t"`
	I uint32 `json:"i"`
}

// resnapshotPos asks for a re-snapshot; After is the cluster time of the
// position it replaced, where the gap began (absent if unknown).
type resnapshotPos struct {
	Requested string       `json:"requested"` // RFC 3339, when tide snapshot wrote it
	After     *clusterTime `json:"after,omitempty"`
}

// gapPos marks a snapshot position as a re-snapshot's:
// {"snapshot":{"gap":true,...}}.
func gapPos(p cdc.Position) cdc.Position {
	const prefix = `{"snapshot":{`
	if !bytes.HasPrefix(p, []byte(prefix)) {
		panic(fmt.Sprintf("mongosource: %q is not a snapshot position", p))
	}
	b := make([]byte, 0, len(p)+11)
	b = append(b, prefix...)
	b = append(b, `"gap":true,`...)
	return append(b, p[len(prefix):]...)
}

// resumePos returns {"resume_token": tok}.
func resumePos(tok bson.Raw) cdc.Position {
	return tokenPos(`{"resume_token":`, tok)
}

// startAfterPos returns {"start_after_token": tok}.
func startAfterPos(tok bson.Raw) cdc.Position {
	return tokenPos(`{"start_after_token":`, tok)
}

func tokenPos(prefix string, tok bson.Raw) cdc.Position {
	return appendTokenPos(nil, prefix, tok)
}

// resumePrefix starts a resume position.
const resumePrefix = `{"resume_token":`

// appendResumePos appends {"resume_token": tok} to dst.
func appendResumePos(dst []byte, tok bson.Raw) cdc.Position {
	return appendTokenPos(dst, resumePrefix, tok)
}

func appendTokenPos(dst []byte, prefix string, tok bson.Raw) cdc.Position {
	dst = append(dst, prefix...)
	dst = appendTokenJSON(dst, tok)
	return append(dst, '}')
}

// posRoom is the length of the resume position of the change event ev,
// for the common token, or 0.
func posRoom(ev bson.Raw) int {
	id, ok := bsoncore.Document(ev).Lookup("_id").DocumentOK()
	if !ok {
		return 0
	}
	data, ok := plainToken(bson.Raw(id))
	if !ok {
		return 0
	}
	return len(resumePrefix) + len(`{"_data":""}`) + len(data) + 1
}

// tokenJSON returns tok as canonical Extended JSON.
func tokenJSON(tok bson.Raw) []byte { return appendTokenJSON(nil, tok) }

// appendTokenJSON appends tok as canonical Extended JSON. The common
// token, {_data: "<hex>"}, is written directly.
func appendTokenJSON(dst []byte, tok bson.Raw) []byte {
	if data, ok := plainToken(tok); ok {
		dst = append(dst, `{"_data":"`...)
		dst = append(dst, data...)
		return append(dst, `"}`...)
	}
	j, err := bson.MarshalExtJSON(tok, true, false)
	if err != nil { // tok came from the server as valid BSON
		panic(fmt.Sprintf("mongosource: resume token %x is not valid BSON: %v", []byte(tok), err))
	}
	return append(dst, j...)
}

// plainToken returns the _data of a token that holds nothing else, if it
// needs no JSON escaping.
func plainToken(tok bson.Raw) ([]byte, bool) {
	_, rem, ok := bsoncore.ReadLength(tok)
	if !ok || len(rem) < 1 {
		return nil, false
	}
	el, rest, ok := bsoncore.ReadElement(rem[:len(rem)-1])
	if !ok || len(rest) != 0 || el.Key() != "_data" {
		return nil, false
	}
	s, ok := stringBytes(el.Value())
	if !ok {
		return nil, false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !(c >= '0' && c <= '9' || c >= 'A' && c <= 'F' || c >= 'a' && c <= 'f') {
			return nil, false
		}
	}
	return s, true
}

// parseToken validates a token from a checkpoint: present, bounded,
// canonical Extended JSON of a document with a non-empty string _data.
func parseToken(field string, j json.RawMessage) (bson.Raw, error) {
	if len(j) == 0 || bytes.Equal(j, []byte("null")) {
		return nil, fmt.Errorf("%s is empty", field)
	}
	if len(j) > maxTokenBytes {
		return nil, fmt.Errorf("%s is %d bytes, more than the %d a resume token may have", field, len(j), maxTokenBytes)
	}
	var tok bson.Raw
	if err := bson.UnmarshalExtJSON(j, true, &tok); err != nil {
		return nil, fmt.Errorf("%s is not canonical Extended JSON: %v", field, err)
	}
	data, err := tok.LookupErr("_data")
	if err != nil {
		return nil, fmt.Errorf("%s has no _data", field)
	}
	if s, ok := data.StringValueOK(); !ok || s == "" {
		return nil, fmt.Errorf("%s._data is not a non-empty string", field)
	}
	var compact bytes.Buffer
	if err := json.Compact(&compact, j); err != nil {
		return nil, fmt.Errorf("%s is not JSON: %v", field, err)
	}
	if !bytes.Equal(compact.Bytes(), tokenJSON(tok)) {
		return nil, fmt.Errorf("%s is not in canonical form (want %s)", field, tokenJSON(tok))
	}
	return tok, nil
}

// parsePosition decodes and validates a checkpoint position.
func parsePosition(p cdc.Position) (position, error) {
	var pos position
	dec := json.NewDecoder(bytes.NewReader(p))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&pos); err != nil {
		return pos, fmt.Errorf("checkpoint position %.200q is not a mongo position: %v", p, err)
	}
	n := 0
	if pos.ResumeToken != nil {
		n++
		if _, err := parseToken("resume_token", pos.ResumeToken); err != nil {
			return pos, fmt.Errorf("checkpoint position: %w", err)
		}
	}
	if pos.StartAfterToken != nil {
		n++
		if _, err := parseToken("start_after_token", pos.StartAfterToken); err != nil {
			return pos, fmt.Errorf("checkpoint position: %w", err)
		}
	}
	if pos.Snapshot != nil {
		n++
		if _, err := parseToken("snapshot.start_token", pos.Snapshot.StartToken); err != nil {
			return pos, fmt.Errorf("checkpoint position: %w", err)
		}
		if _, err := parseLastID(pos.Snapshot.LastID); err != nil {
			return pos, fmt.Errorf("checkpoint position: %w", err)
		}
		if pos.Snapshot.Next != nil && *pos.Snapshot.Next < 0 {
			return pos, fmt.Errorf("checkpoint position: snapshot.next is negative")
		}
		for ns, id := range pos.Snapshot.Active {
			if _, err := parseLastID(id); err != nil {
				return pos, fmt.Errorf("checkpoint position: snapshot.active[%s]: %w", quote(ns), err)
			}
		}
	}
	if pos.AfterClusterTime != nil {
		n++
		if pos.AfterClusterTime.T == 0 {
			return pos, fmt.Errorf("checkpoint position: after_cluster_time.t is 0")
		}
	}
	if pos.Resnapshot != nil {
		n++
		if _, err := time.Parse(time.RFC3339, pos.Resnapshot.Requested); err != nil {
			return pos, fmt.Errorf("checkpoint position: resnapshot.requested is not an RFC 3339 time: %v", err)
		}
	}
	if n != 1 {
		return pos, fmt.Errorf("checkpoint position %.200q must hold exactly one of resume_token, start_after_token, snapshot, after_cluster_time, resnapshot", p)
	}
	return pos, nil
}

// time returns the cluster time the position stands for.
func (pos position) time() (cdc.Timestamp, bool) {
	switch {
	case pos.AfterClusterTime != nil:
		return cdc.Timestamp{T: pos.AfterClusterTime.T, I: pos.AfterClusterTime.I}, true
	case pos.Resnapshot != nil:
		return cdc.Timestamp{}, false
	case pos.Snapshot != nil:
		return tokenTimeJSON(pos.Snapshot.StartToken)
	case pos.StartAfterToken != nil:
		return tokenTimeJSON(pos.StartAfterToken)
	}
	return tokenTimeJSON(pos.ResumeToken)
}

func tokenTimeJSON(j json.RawMessage) (cdc.Timestamp, bool) {
	tok, err := parseToken("token", j)
	if err != nil {
		return cdc.Timestamp{}, false
	}
	data, _ := tok.Lookup("_data").StringValueOK()
	return tokenTime(data)
}

// snapshotPosJSON returns {"snapshot":{"start_token":…,"last_id":…}};
// idJSON is the canonical Extended JSON of the last _id, or nil.
func snapshotPosJSON(startToken []byte, idJSON []byte) cdc.Position {
	if idJSON == nil {
		idJSON = []byte("null")
	}
	b := make([]byte, 0, len(startToken)+len(idJSON)+48)
	b = append(b, `{"snapshot":{"start_token":`...)
	b = append(b, startToken...)
	b = append(b, `,"last_id":`...)
	b = append(b, idJSON...)
	return append(b, `}}`...)
}

// idJSON returns the canonical Extended JSON of an _id value.
func idJSON(id bson.RawValue) ([]byte, error) {
	d := bsoncore.BuildDocumentFromElements(nil, bsoncore.AppendValueElement(nil, "_id", bsoncore.Value{Type: bsoncore.Type(id.Type), Data: id.Value}))
	j, err := bson.MarshalExtJSON(bson.Raw(d), true, false)
	if err != nil {
		return nil, fmt.Errorf("encode _id as Extended JSON: %w", err)
	}
	// j is {"_id":<value>}
	const prefix = `{"_id":`
	if !bytes.HasPrefix(j, []byte(prefix)) || j[len(j)-1] != '}' {
		return nil, fmt.Errorf("encode _id as Extended JSON: unexpected form %.100q", j)
	}
	return j[len(prefix) : len(j)-1], nil
}

// parseLastID decodes a snapshot's last_id; a zero RawValue for null.
func parseLastID(j json.RawMessage) (bson.RawValue, error) {
	if len(j) == 0 || bytes.Equal(j, []byte("null")) {
		return bson.RawValue{}, nil
	}
	if len(j) > maxTokenBytes {
		return bson.RawValue{}, fmt.Errorf("snapshot.last_id is %d bytes, more than %d", len(j), maxTokenBytes)
	}
	var doc bson.Raw
	wrapped := append(append([]byte(`{"_id":`), j...), '}')
	if err := bson.UnmarshalExtJSON(wrapped, true, &doc); err != nil {
		return bson.RawValue{}, fmt.Errorf("snapshot.last_id is not canonical Extended JSON: %v", err)
	}
	return doc.Lookup("_id"), nil
}

// tokenTime returns the cluster time at the start of a resume token's
// _data (hex characters 2 to 17 after the 0x82 Timestamp tag).
func tokenTime(data string) (cdc.Timestamp, bool) {
	if len(data) < 18 || data[:2] != "82" {
		return cdc.Timestamp{}, false
	}
	var b [8]byte
	if _, err := hex.Decode(b[:], []byte(data[2:18])); err != nil {
		return cdc.Timestamp{}, false
	}
	t := uint32(b[0])<<24 | uint32(b[1])<<16 | uint32(b[2])<<8 | uint32(b[3])
	i := uint32(b[4])<<24 | uint32(b[5])<<16 | uint32(b[6])<<8 | uint32(b[7])
	return cdc.Timestamp{T: t, I: i}, true
}

// positionTime returns the cluster time a position stands for: its
// token's, or the snapshot's start token's, or the one tide checkpoint
// set wrote.
func positionTime(p cdc.Position) (cdc.Timestamp, bool) {
	const key = `"_data":"`
	i := bytes.Index(p, []byte(key))
	if i < 0 {
		if bytes.Contains(p, []byte(`"after_cluster_time"`)) {
			if pos, err := parsePosition(p); err == nil {
				return pos.time()
			}
		}
		return cdc.Timestamp{}, false
	}
	rest := p[i+len(key):]
	j := bytes.IndexByte(rest, '"')
	if j < 0 {
		return cdc.Timestamp{}, false
	}
	return tokenTime(string(rest[:j]))
}

// quote is strconv.Quote, shortened for messages.
func quote(s string) string {
	if len(s) > 80 {
		s = s[:80] + "…"
	}
	return strconv.Quote(s)
}
