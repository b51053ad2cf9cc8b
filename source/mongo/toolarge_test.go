package mongo

import (
	"context"
	"fmt"
	"regexp"
	"strings"
	"testing"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"

	"github.com/tide-cdc/tide/cdc"
)

// An insert of a document just under 16 MiB makes a change event over the
// limit whose fullDocument alone is too large for a fragment: the error
// states the field's real size, under 16 MiB, against the limit, and names
// tide checkpoint set with the event's resume token and cluster time; both
// positions it names resume with the next change.
func TestEventJustUnder16MiB(t *testing.T) {
	e := newEnv(t)
	cfg := e.config(t)
	src := openSource(t, cfg, nil)
	doc := bson.D{{Key: "_id", Value: 1}, {Key: "a", Value: strings.Repeat("x", 16<<20-200)}}
	raw, err := bson.Marshal(doc)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := e.coll.InsertOne(context.Background(), doc); err != nil {
		t.Fatal(err)
	}
	_, err = pollUntil(t, src, func([]cdc.Event) bool { return false })
	field := 1 + len("fullDocument") + 1 + len(raw) // the element: type, name, NUL, document
	wantErr(t, err, nil,
		fmt.Sprintf("its field fullDocument alone is %d bytes (15.99 MiB)", field),
		"over the 16777216-byte (16 MiB) limit of a change event",
		"tide checkpoint set -f FILE --resume-token '{\"_data\":\"", "(resumes right after this event)", "--cluster-time ")
	if strings.Contains(err.Error(), "over 16 MiB") {
		t.Errorf("error says a field of %d bytes is over 16 MiB: %v", field, err)
	}
	if !isCode(err, codeBSONObjectTooLarge) {
		t.Errorf("error %v does not wrap the server's", err)
	}
	src.Close()

	m := regexp.MustCompile(`--resume-token '(\{"_data":"[0-9A-F]+"\})'.* or --cluster-time ([0-9]+)\.([0-9]+) `).FindStringSubmatch(err.Error())
	if m == nil {
		t.Fatalf("no resume token and cluster time to step past the event in %v", err)
	}
	insert(t, e.coll, 2)
	for name, pos := range map[string]string{
		"resume token": `{"resume_token":` + m[1] + `}`,
		"cluster time": fmt.Sprintf(`{"after_cluster_time":{"t":%s,"i":%s}}`, m[2], m[3]),
	} {
		t.Run(name, func(t *testing.T) {
			cp := checkpointOf(cdc.Position(pos), src.Identity())
			again := openSource(t, cfg, &cp)
			evs, err := pollUntil(t, again, countOps(1))
			if err != nil {
				t.Fatal(err)
			}
			if got := nonMarkers(evs); got[0].Op != cdc.OpInsert || docID(t, got[0]) != 2 {
				t.Fatalf("after stepping past the large event: %v, want the insert of 2", ops(got))
			}
		})
	}
}

// A server without $changeStreamSplitLargeEvent reports the whole event's
// size: the error states it and says the server cannot split it.
func TestTooLargeWithoutSplit(t *testing.T) {
	const data = "826B12C9B9000000022B042C0100296E5A1004"
	for name, tc := range map[string]struct {
		msg   string
		split bool
		words []string
	}{
		"event size": {
			msg: `BSONObj size: 16777300 (0x1000054) is invalid. Size must be between 0 and 16793600(16MB) First element: _id: { _data: "` + data + `" }`,
			words: []string{"a change event (resume token {\"_data\":\"" + data + "\"}, cluster time Timestamp(1796393401, 2))",
				"is 16777300 bytes (16.00 MiB), over the 16777216-byte (16 MiB) limit", "has no $changeStreamSplitLargeEvent",
				"upgrade the server", "--resume-token '{\"_data\":\"" + data + "\"}'", "--cluster-time 1796393401.2"},
		},
		"nothing known": {
			msg:   "BSONObjectTooLarge",
			split: true,
			words: []string{"a change event is over the 16777216-byte (16 MiB) limit", "tide checkpoint set -f FILE --cluster-time T, with T the event's cluster time"},
		},
	} {
		t.Run(name, func(t *testing.T) {
			err := explain("shop.orders", tc.split, mongo.CommandError{Code: codeBSONObjectTooLarge, Message: tc.msg})
			wantErr(t, err, nil, tc.words...)
			if !isCode(err, codeBSONObjectTooLarge) {
				t.Errorf("error %v does not wrap the server's", err)
			}
		})
	}
}
