// Package deadletter stores the changes a pipeline set aside with
// on_error: dead_letter, for a sink that does not keep them in its own
// transaction: a JSON-lines file (File) or a JetStream subject (NATS).
// Each letter holds the original change, the stage that failed, the
// error, the namespace, the position and the time, so that `tide
// dead-letters replay` can send it through the sink again.
//
// A letter's ID is derived from the pipeline, the stage and the
// position: a batch read again after a crash sets the same changes aside
// under the same IDs, and a store keeps each ID once.
package deadletter

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/tide-cdc/tide/cdc"
	"github.com/tide-cdc/tide/encode"
)

// Letter is a dead letter as stored: one JSON object.
type Letter struct {
	ID        string          `json:"id"`
	Pipeline  string          `json:"pipeline"`
	Stage     string          `json:"stage"`
	Error     string          `json:"error"`
	Namespace string          `json:"namespace"`
	Position  json.RawMessage `json:"position"`
	Time      time.Time       `json:"time"`
	Change    Change          `json:"change"`
	// Dropped, when set, says why the change's documents are not in the
	// letter (a store with a record size limit, such as a Kafka topic,
	// keeps where the change is and why it failed).
	Dropped string `json:"dropped,omitempty"`
}

// Change is the original change, raw: documents as canonical Extended
// JSON (every BSON type kept), a message's payload as bytes (base64).
type Change struct {
	Op            string              `json:"op"`
	ClusterTime   cdc.Timestamp       `json:"cluster_time"`
	WallTimeMS    int64               `json:"wall_time_ms,omitempty"`
	DocumentKey   json.RawMessage     `json:"document_key,omitempty"`
	FullDocument  json.RawMessage     `json:"full_document,omitempty"`
	PreImage      json.RawMessage     `json:"before,omitempty"`
	UpdateDesc    json.RawMessage     `json:"update_description,omitempty"`
	ResumeToken   json.RawMessage     `json:"resume_token,omitempty"`
	Extra         json.RawMessage     `json:"extra,omitempty"`
	Payload       []byte              `json:"payload,omitempty"`
	PayloadFormat cdc.PayloadFormat   `json:"payload_format,omitempty"`
	Headers       map[string][]string `json:"headers,omitempty"`
}

// ID is the identity of the letter of the change at pos that failed at
// stage, in pipeline.
func ID(pipeline, stage string, pos cdc.Position) string {
	h := sha256.New()
	for _, s := range []string{pipeline, stage, string(pos)} {
		fmt.Fprintf(h, "%d:%s", len(s), s)
	}
	return hex.EncodeToString(h.Sum(nil)[:16])
}

// New makes the stored form of d.
func New(pipeline string, d cdc.DeadLetter) (Letter, error) {
	ev := &d.Event
	l := Letter{
		ID: ID(pipeline, d.Stage, ev.Pos), Pipeline: pipeline, Stage: d.Stage, Error: d.Err,
		Namespace: ev.Namespace, Time: d.Time.UTC(),
		Change: Change{Op: string(ev.Op), ClusterTime: ev.ClusterTime, WallTimeMS: ev.WallTimeMS,
			Payload: ev.Payload, PayloadFormat: ev.PayloadFormat, Headers: ev.Headers},
	}
	if json.Valid(ev.Pos) {
		l.Position = json.RawMessage(ev.Pos)
	} else {
		l.Position, _ = json.Marshal(string(ev.Pos))
	}
	for _, f := range []struct {
		dst *json.RawMessage
		doc []byte
	}{{&l.Change.DocumentKey, ev.DocumentKey}, {&l.Change.FullDocument, ev.FullDocument}, {&l.Change.PreImage, ev.PreImage},
		{&l.Change.UpdateDesc, ev.UpdateDesc}, {&l.Change.ResumeToken, ev.ResumeToken}, {&l.Change.Extra, ev.Extra}} {
		if f.doc == nil {
			continue
		}
		out, err := encode.AppendCanonical(nil, f.doc)
		if err != nil {
			// A document that does not encode is why some letters exist:
			// keep its bytes.
			out, _ = json.Marshal(map[string][]byte{"$bson": f.doc})
		}
		*f.dst = out
	}
	return l, nil
}

// Event returns the letter's change as the source handed it out.
func (l *Letter) Event() (cdc.Event, error) {
	c := &l.Change
	pos := []byte(l.Position)
	var quoted string
	if json.Unmarshal(l.Position, &quoted) == nil {
		pos = []byte(quoted) // a position that was not JSON, kept as a string (New)
	}
	ev := cdc.Event{Pos: cdc.Position(pos), Op: cdc.Op(c.Op), Namespace: l.Namespace, ClusterTime: c.ClusterTime,
		WallTimeMS: c.WallTimeMS, Payload: c.Payload, PayloadFormat: c.PayloadFormat, Headers: c.Headers}
	for _, f := range []struct {
		name string
		dst  *[]byte
		doc  json.RawMessage
	}{{"document_key", &ev.DocumentKey, c.DocumentKey}, {"full_document", &ev.FullDocument, c.FullDocument}, {"before", &ev.PreImage, c.PreImage},
		{"update_description", &ev.UpdateDesc, c.UpdateDesc}, {"resume_token", &ev.ResumeToken, c.ResumeToken}, {"extra", &ev.Extra, c.Extra}} {
		if len(f.doc) == 0 {
			continue
		}
		var kept struct {
			BSON []byte `json:"$bson"`
		}
		if json.Unmarshal(f.doc, &kept) == nil && kept.BSON != nil {
			*f.dst = kept.BSON
			continue
		}
		var doc bson.Raw
		if err := bson.UnmarshalExtJSON(f.doc, true, &doc); err != nil {
			return cdc.Event{}, fmt.Errorf("dead letter %s: %s: %w", l.ID, f.name, err)
		}
		*f.dst = doc
	}
	return ev, nil
}

// DeadLetter returns the letter as the pipeline set it aside; the error
// says why documents were dropped from it, if they were.
func (l *Letter) DeadLetter() (cdc.DeadLetter, error) {
	ev, err := l.Event()
	if err != nil {
		return cdc.DeadLetter{}, err
	}
	e := l.Error
	if l.Dropped != "" {
		e += " (" + l.Dropped + ")"
	}
	return cdc.DeadLetter{Event: ev, Stage: l.Stage, Err: e, Time: l.Time}, nil
}
