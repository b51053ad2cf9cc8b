package postgres_test

import (
	"fmt"
	"testing"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/tide-cdc/tide/cdc"
	"github.com/tide-cdc/tide/internal/testenv"
	"github.com/tide-cdc/tide/sink/postgres"
)

// TestTemplatedMirrorDeleteAfterRename: a delete in the new name's table,
// in the batch of the rename, is not undone by the rows the rename moves
// there after the batch's rows (found end to end by
// TestMultiCollectionPostgresSIGKILL in cmd/tide).
func TestTemplatedMirrorDeleteAfterRename(t *testing.T) {
	for _, soft := range []bool{false, true} {
		t.Run(fmt.Sprintf("soft_delete=%v", soft), func(t *testing.T) {
			dsn := testenv.Postgres(t)
			c := connect(t, dsn)
			s := openSink(t, postgres.Config{Columns: postgres.ColumnsDocument, DSN: dsn, Table: "{coll}", CreateTable: true, SoftDelete: soft})
			v := func(n int) bson.D { return bson.D{{Key: "v", Value: n}} }
			batches := [][]cdc.Record{{
				nsEvent(t, "db.x", cdc.OpInsert, 1, v(1), 10, 1, `1`),
				nsEvent(t, "db.x", cdc.OpInsert, 2, v(2), 10, 2, `2`),
				nsEvent(t, "db.x", cdc.OpInsert, 3, v(3), 10, 3, `3`),
			}, {
				renameEvent(t, "db.x", "db.y", 11, 1, `4`),
				nsEvent(t, "db.y", cdc.OpDelete, 2, nil, 12, 1, `5`),
				nsEvent(t, "db.y", cdc.OpUpdate, 3, v(30), 12, 2, `6`),
			}}
			check := func(when string) {
				t.Helper()
				var got string
				if soft {
					got = mirrorRowsWhere(t, c, "y", "NOT _tide_deleted")
				} else {
					got = mirrorRows(t, c, "y")
				}
				if want := "1:1 3:30"; got != want {
					t.Errorf("%s: table y holds %s, want %s (the deleted _id 2 brought back by the move?)", when, got, want)
				}
				if got := mirrorRows(t, c, "x"); got != "" {
					t.Errorf("%s: table x holds %s after the rename, want nothing", when, got)
				}
			}
			for i, b := range batches {
				if err := writeBatch(t, s, cdc.Checkpoint{}, b...); err != nil {
					t.Fatalf("batch %d: %v", i, err)
				}
			}
			check("after the batches")
			if err := writeBatch(t, s, cdc.Checkpoint{}, batches[1]...); err != nil {
				t.Fatalf("replay: %v", err)
			}
			check("after a replay of the last")
		})
	}
}
