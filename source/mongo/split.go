package mongo

import (
	"fmt"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/x/bsonx/bsoncore"
)

// fragments reassembles a change event that the server split with
// $changeStreamSplitLargeEvent. Each fragment is {_id: <its own token>,
// splitEvent: {fragment: n, of: m}, ...some of the event's fields}, and
// the m fragments of one event arrive one after the other. The whole
// event has every fragment's fields, in order, and the last fragment's
// token as its _id: resuming after it resumes after the whole event.
type fragments struct {
	of     int    // fragments in the event being assembled; 0 when none
	next   int    // the fragment number expected next
	fields []byte // the fields (all but _id and splitEvent) read so far
}

func (f *fragments) reset()        { *f = fragments{} }
func (f *fragments) pending() bool { return f.of > 0 }

// add takes one change-stream document, which the caller's driver reuses.
// It returns the whole event, a new buffer with room more bytes of
// capacity, when doc completes one (or is not a fragment at all), and nil
// while fragments are missing.
func (f *fragments) add(doc bson.Raw, room int) ([]byte, error) {
	split, err := doc.LookupErr("splitEvent")
	if err != nil {
		if f.pending() {
			return nil, fmt.Errorf("change event without splitEvent where fragment %d of %d was due", f.next, f.of)
		}
		return append(make([]byte, 0, len(doc)+room), doc...), nil
	}
	sd, ok := split.DocumentOK()
	if !ok {
		return nil, fmt.Errorf("splitEvent is %s, not a document", split.Type)
	}
	n, ok1 := sd.Lookup("fragment").AsInt64OK()
	of, ok2 := sd.Lookup("of").AsInt64OK()
	if !ok1 || !ok2 || of < 1 || n < 1 || n > of {
		return nil, fmt.Errorf("splitEvent %v is not {fragment: n, of: m} with 1 <= n <= m", sd)
	}
	if !f.pending() {
		if n != 1 {
			return nil, fmt.Errorf("split event starts at fragment %d of %d, not 1", n, of)
		}
		f.of, f.next = int(of), 1
	}
	if int(n) != f.next || int(of) != f.of {
		return nil, fmt.Errorf("fragment %d of %d where fragment %d of %d was due", n, of, f.next, f.of)
	}
	elems, err := doc.Elements()
	if err != nil {
		return nil, fmt.Errorf("fragment %d of %d: %w", n, of, err)
	}
	var id bson.RawElement
	for _, e := range elems {
		switch e.Key() {
		case "_id":
			id = e
		case "splitEvent":
		default:
			f.fields = append(f.fields, e...)
		}
	}
	if int(n) < f.of {
		f.next++
		return nil, nil
	}
	if id == nil {
		return nil, fmt.Errorf("fragment %d of %d has no _id (resume token)", n, of)
	}
	whole := make([]byte, 0, 4+len(id)+len(f.fields)+1+room)
	whole = bsoncore.BuildDocumentFromElements(whole, id, f.fields)
	f.reset()
	return whole, nil
}
