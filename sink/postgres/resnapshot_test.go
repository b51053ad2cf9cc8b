package postgres_test

import (
	"fmt"
	"testing"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/tide-cdc/tide/cdc"
	"github.com/tide-cdc/tide/internal/testenv"
	"github.com/tide-cdc/tide/sink/postgres"
)

// gapLine is a MongoDB re-snapshot's begin or end line.
func gapLine(t *testing.T, phase string, ts uint32, pos string) cdc.Record {
	t.Helper()
	extra, err := bson.Marshal(bson.D{{Key: "resnapshot", Value: phase}})
	if err != nil {
		t.Fatal(err)
	}
	return cdc.Record{Event: cdc.Event{Op: cdc.OpSnapshot, Namespace: "db.orders", ClusterTime: cdc.Timestamp{T: ts}, Extra: extra, Pos: cdc.Position(pos)}}
}

// TestMirrorResnapshot: after a re-snapshot (documents copied again at
// the copy's start time, between a begin and an end line), the mirror
// equals the collection: rows of documents deleted during the gap go.
func TestMirrorResnapshot(t *testing.T) {
	for _, soft := range []bool{true, false} {
		t.Run(fmt.Sprintf("soft_delete=%v", soft), func(t *testing.T) {
			dsn := testenv.Postgres(t)
			c := connect(t, dsn)
			s := openSink(t, postgres.Config{Columns: postgres.ColumnsDocument, DSN: dsn, Table: "orders", CreateTable: true, SoftDelete: soft})
			v := func(n int) bson.D { return bson.D{{Key: "v", Value: n}} }
			batches := [][]cdc.Record{{
				event(t, cdc.OpSnapshot, "a", v(1), 0, 0, `1`),
				event(t, cdc.OpSnapshot, "b", v(1), 0, 0, `2`),
				event(t, cdc.OpInsert, "c", v(1), 10, 1, `3`),
			}, {
				// The gap: b was deleted, a changed. The re-copy at 20.
				gapLine(t, "begin", 20, `4`),
				event(t, cdc.OpSnapshot, "a", v(2), 20, 0, `5`),
			}, {
				event(t, cdc.OpSnapshot, "c", v(1), 20, 0, `6`),
				gapLine(t, "end", 20, `7`),
				event(t, cdc.OpInsert, "d", v(1), 20, 1, `8`),
			}}
			for i, b := range batches {
				if err := writeBatch(t, s, cdc.Checkpoint{}, b...); err != nil {
					t.Fatalf("batch %d: %v", i, err)
				}
			}
			live := queryInt(t, c, `SELECT count(*) FROM orders WHERE NOT _tide_deleted`)
			all := queryInt(t, c, `SELECT count(*) FROM orders`)
			if live != 3 || (soft && all != 4) || (!soft && all != 3) {
				t.Errorf("%d live rows of %d, want a, c and d live and b gone (kept marked deleted when soft)", live, all)
			}
			if n := queryInt(t, c, `SELECT count(*) FROM orders WHERE _id = '{"_id":"b"}' AND NOT _tide_deleted`); n != 0 {
				t.Error("b, deleted during the gap, is still live")
			}
			if n := queryInt(t, c, `SELECT count(*) FROM orders WHERE _id = '{"_id":"a"}' AND doc->>'v' = '2'`); n != 1 {
				t.Error("a was not updated by the re-copy")
			}
		})
	}
}
