package postgres_test

import (
	"fmt"
	"strconv"
	"sync"
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/tide-cdc/tide/cdc"
	"github.com/tide-cdc/tide/cdc/cdctest"
	"github.com/tide-cdc/tide/encode"
	"github.com/tide-cdc/tide/internal/testenv"
	"github.com/tide-cdc/tide/sink/postgres"
)

// TestContract runs the conformance suite in both modes and both
// layouts, with the sink keeping the checkpoint (its Checkpoints is the
// suite's store) and without. Each subtest gets a database of its own.
func TestContract(t *testing.T) {
	for _, mode := range []string{postgres.ModeAppend, postgres.ModeMirror} {
		for _, columns := range []string{postgres.ColumnsDocument, postgres.ColumnsAuto} {
			for _, keep := range []bool{true, false} {
				t.Run(fmt.Sprintf("%s/%s/keeps_checkpoint=%v", mode, columns, keep), func(t *testing.T) {
					testenv.Postgres(t) // skips, saying why, without PostgreSQL
					testContract(t, mode, columns, keep)
				})
			}
		}
	}
}

func testContract(t *testing.T, mode, columns string, keep bool) {
	var mu sync.Mutex
	dsns := map[string]string{}
	dsn := func(t *testing.T) string {
		mu.Lock()
		defer mu.Unlock()
		if dsns[t.Name()] == "" {
			dsns[t.Name()] = testenv.Postgres(t)
		}
		return dsns[t.Name()]
	}
	config := func(t *testing.T) postgres.Config {
		return postgres.Config{Columns: columns, DSN: dsn(t), Table: "cdctest", Mode: mode, CreateTable: true,
			Pipeline: cdctest.Pipeline, Logger: testLogger(t)}
	}
	h := cdctest.SinkHarness{
		New: func(t *testing.T) cdc.Sink { return postgres.New(config(t)) },
		Committed: func(t *testing.T) [][]byte {
			c := connect(t, dsn(t))
			var exists bool
			if err := c.QueryRow(t.Context(), `SELECT to_regclass('cdctest') IS NOT NULL`).Scan(&exists); err != nil || !exists {
				return nil // not opened yet
			}
			q := `SELECT _full_document->>'text' FROM cdctest ORDER BY id`
			switch {
			case mode == postgres.ModeMirror && columns == postgres.ColumnsAuto:
				q = `SELECT text FROM cdctest ORDER BY _id`
			case mode == postgres.ModeMirror:
				q = `SELECT doc->>'text' FROM cdctest ORDER BY (doc->>'_id')::int`
			case columns == postgres.ColumnsAuto:
				q = `SELECT text FROM cdctest ORDER BY id`
				var made bool
				if err := c.QueryRow(t.Context(), `SELECT EXISTS (SELECT 1 FROM pg_attribute WHERE attrelid = 'cdctest'::regclass AND attname = 'text')`).Scan(&made); err != nil {
					t.Fatal(err)
				}
				if !made {
					return nil // made by Open; no row yet
				}
			}
			rows, err := c.Query(t.Context(), q)
			if err != nil {
				t.Fatal(err)
			}
			defer rows.Close()
			var out [][]byte
			for rows.Next() {
				var text string
				if err := rows.Scan(&text); err != nil {
					t.Fatal(err)
				}
				out = append(out, []byte(text))
			}
			if err := rows.Err(); err != nil {
				t.Fatal(err)
			}
			return out
		},
		Record: contractRecord,
		Want:   func(i int) []byte { return []byte("record " + strconv.Itoa(i)) },
		FailOpen: func(t *testing.T) cdc.Sink {
			// Nothing listens there: connecting is retried (the server may
			// be restarting) for RetryTimeout, then Open fails.
			return postgres.New(postgres.Config{Columns: postgres.ColumnsDocument, DSN: "postgres://tide@127.0.0.1:1/none?connect_timeout=2", Table: "cdctest", RetryTimeout: time.Second,
				Pipeline: cdctest.Pipeline, Logger: testLogger(t)})
		},
	}
	if keep {
		h.Checkpoints = func(t *testing.T, s cdc.Sink) cdctest.Store { return s.(*postgres.Sink).Checkpoints() }
	}
	cdctest.TestSink(t, h)
}

// contractRecord is the suite's record i as a MongoDB insert of
// {_id: i, text: "record i"}, encoded as the pipeline encodes it.
func contractRecord(i int) cdc.Record {
	key, err := bson.Marshal(bson.D{{Key: "_id", Value: i}})
	if err != nil {
		panic(err)
	}
	doc, err := bson.Marshal(bson.D{{Key: "_id", Value: i}, {Key: "text", Value: "record " + strconv.Itoa(i)}})
	if err != nil {
		panic(err)
	}
	ev := cdc.Event{
		Pos: cdctest.DefaultRecord(i).Pos, Op: cdc.OpInsert, Namespace: "db.items",
		ClusterTime: cdc.Timestamp{T: 1700000000, I: uint32(i + 1)}, DocumentKey: key, FullDocument: doc,
	}
	data, err := encode.Envelope(nil, &ev)
	if err != nil {
		panic(err)
	}
	return cdc.Record{Event: ev, Data: data}
}
