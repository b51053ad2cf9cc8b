package postgres_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/tide-cdc/tide/cdc"
	"github.com/tide-cdc/tide/encode"
	"github.com/tide-cdc/tide/internal/testenv"
	"github.com/tide-cdc/tide/pipeline"
	"github.com/tide-cdc/tide/sink/postgres"
	"github.com/tide-cdc/tide/source/generate"
)

// failSeven fails the transform of every change whose seq ends in 7.
type failSeven struct{}

func (failSeven) Apply(ev *cdc.Event) (bool, error) {
	if strings.HasSuffix(string(ev.Pos), "7}") {
		return false, errors.New("poisoned")
	}
	return true, nil
}

// TestDeadLettersInTheTransaction: with on_error dead_letter, the changes
// that fail their transform go to tide_dead_letters in the transaction of
// their batch, with the checkpoint; a second run of the pipeline after a
// restart from an older checkpoint writes none twice.
func TestDeadLettersInTheTransaction(t *testing.T) {
	dsn := testenv.Postgres(t)
	c := connect(t, dsn)
	run := func(count int64) {
		sink := postgres.New(postgres.Config{Columns: postgres.ColumnsDocument, DSN: dsn, Table: "dl_rows", CreateTable: true, Pipeline: "dl", Logger: testLogger(t)})
		p := pipeline.New(pipeline.Config{Name: "dl", MaxRecords: 50, Transform: failSeven{}, OnError: pipeline.OnErrorDeadLetter},
			generate.New(generate.Config{Count: count, PayloadBytes: 4}), encode.Envelope, sink, sink.Checkpoints())
		ctx, cancel := context.WithTimeout(t.Context(), 60*time.Second)
		defer cancel()
		if err := p.Run(ctx); err != nil {
			t.Fatal(err)
		}
	}
	run(200)
	if _, err := c.Exec(t.Context(), `UPDATE tide_checkpoints SET checkpoint = jsonb_set(checkpoint, '{source}', '{"seq": 100}') WHERE pipeline = 'dl'`); err != nil {
		t.Fatal(err)
	}
	run(300) // 101..300 again: the letters of 101..200 are there already
	if n := queryInt(t, c, `SELECT count(*) FROM tide_dead_letters WHERE pipeline = 'dl' AND stage = 'transform'`); n != 30 {
		t.Fatalf("tide_dead_letters holds %d letters, want 30", n)
	}
	if n := queryInt(t, c, `SELECT count(*) FROM dl_rows`); n != 270 {
		t.Fatalf("dl_rows holds %d rows, want 270", n)
	}
	var errText, payload string
	if err := c.QueryRow(t.Context(), `SELECT error, change->'full_document'->>'payload' FROM tide_dead_letters WHERE position = '{"seq":17}'`).Scan(&errText, &payload); err != nil {
		t.Fatal(err)
	}
	if errText != "poisoned" || payload != "xxxx" {
		t.Fatalf("letter of seq 17: error %q, payload %q", errText, payload)
	}
	if seq := checkpointSeq(t, c, "dl"); seq != 300 {
		t.Fatalf("checkpoint at seq %d, want 300", seq)
	}
}

// TestRefusedRowsSetAside: a CHECK constraint refuses some rows; with
// on_error dead_letter the batch is split, the refused rows go to
// tide_dead_letters (stage sink) and the others are committed, once,
// across a replay from an older checkpoint.
func TestRefusedRowsSetAside(t *testing.T) {
	dsn := testenv.Postgres(t)
	c := connect(t, dsn)
	run := func(count int64) error {
		sink := postgres.New(postgres.Config{Columns: postgres.ColumnsDocument, DSN: dsn, Table: "checked_rows", CreateTable: true, Pipeline: "checked", Logger: testLogger(t)})
		p := pipeline.New(pipeline.Config{Name: "checked", MaxRecords: 64, OnError: pipeline.OnErrorDeadLetter},
			generate.New(generate.Config{Count: count, PayloadBytes: 4}), encode.Envelope, sink, sink.Checkpoints())
		ctx, cancel := context.WithTimeout(t.Context(), 60*time.Second)
		defer cancel()
		return p.Run(ctx)
	}
	if err := run(1); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Exec(t.Context(), `ALTER TABLE checked_rows ADD CONSTRAINT no_sevens CHECK ((doc->>'seq')::int % 10 <> 7)`); err != nil {
		t.Fatal(err)
	}
	if err := run(300); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Exec(t.Context(), `UPDATE tide_checkpoints SET checkpoint = jsonb_set(checkpoint, '{source}', '{"seq": 150}') WHERE pipeline = 'checked'`); err != nil {
		t.Fatal(err)
	}
	if err := run(400); err != nil {
		t.Fatal(err)
	}
	if n := queryInt(t, c, `SELECT count(*) FROM tide_dead_letters WHERE pipeline = 'checked' AND stage = 'sink'`); n != 40 {
		t.Fatalf("tide_dead_letters holds %d refused rows, want 40", n)
	}
	if n := queryInt(t, c, `SELECT count(*) FROM checked_rows`); n != 360 {
		t.Fatalf("checked_rows holds %d rows, want 360", n)
	}
	var errText string
	if err := c.QueryRow(t.Context(), `SELECT error FROM tide_dead_letters WHERE pipeline = 'checked' AND position = '{"seq":17}'`).Scan(&errText); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(errText, "no_sevens") {
		t.Fatalf("letter of seq 17: error %q, want the constraint named", errText)
	}
	if seq := checkpointSeq(t, c, "checked"); seq != 400 {
		t.Fatalf("checkpoint at seq %d, want 400", seq)
	}

	// With on_error: fail (the default), the refusal stops the pipeline.
	if _, err := c.Exec(t.Context(), `DELETE FROM checked_rows WHERE (doc->>'seq')::int > 390`); err != nil {
		t.Fatal(err)
	}
	sink := postgres.New(postgres.Config{Columns: postgres.ColumnsDocument, DSN: dsn, Table: "checked_rows", Pipeline: "checked", Logger: testLogger(t)})
	p := pipeline.New(pipeline.Config{Name: "checked"}, generate.New(generate.Config{Count: 500, PayloadBytes: 4}), encode.Envelope, sink, sink.Checkpoints())
	if err := p.Run(t.Context()); !errors.Is(err, cdc.ErrRefused) || !strings.Contains(err.Error(), "no_sevens") {
		t.Fatalf("Run with on_error fail = %v, want the refusal", err)
	}
}
