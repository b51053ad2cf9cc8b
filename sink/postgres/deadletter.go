package postgres

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/tide-cdc/tide/cdc"
	"github.com/tide-cdc/tide/encode"
)

// DeadLetterTable is the table of the pipeline's dead letters, in the
// sink's schema: written in the transaction of the batch they came from,
// so that exactly-once (checkpoint: sink) holds for them too.
const DeadLetterTable = "tide_dead_letters"

var _ cdc.DeadLetterSink = (*Sink)(nil)

// deadLetters are the dead letters of the batch being written.
type deadLetters struct {
	rows [][]any // pipeline, position, stage, error, namespace, at, change
}

func (d *deadLetters) reset() {
	clear(d.rows)
	d.rows = d.rows[:0]
}

// PutDeadLetters stages the pipeline's dead letters (changes that failed
// to decode, transform or encode) for the batch's Commit, which inserts
// them into tide_dead_letters in the batch's transaction; a letter the
// table holds already (by pipeline and position) is not inserted again.
func (s *Sink) PutDeadLetters(_ context.Context, letters []cdc.DeadLetter) error {
	for _, l := range letters {
		change, err := letterChange(&l.Event)
		if err != nil {
			return fmt.Errorf("postgres sink: dead letter at %s: %w", l.Event.Pos, err)
		}
		pos := string(l.Event.Pos)
		if !json.Valid(l.Event.Pos) {
			pos = strconv.Quote(pos)
		}
		s.dead.rows = append(s.dead.rows, []any{s.cfg.Pipeline, pos, l.Stage, l.Err, l.Event.Namespace, l.Time, string(change)})
	}
	return nil
}

// letterChange is the change of a dead letter as JSON: its documents as
// canonical Extended JSON, every BSON type kept.
func letterChange(ev *cdc.Event) ([]byte, error) {
	out := []byte(`{"op":`)
	out = encode.AppendString(out, string(ev.Op))
	out = append(out, `,"cluster_time":{"t":`...)
	out = strconv.AppendUint(out, uint64(ev.ClusterTime.T), 10)
	out = append(out, `,"i":`...)
	out = strconv.AppendUint(out, uint64(ev.ClusterTime.I), 10)
	out = append(out, `},"wall_time_ms":`...)
	out = strconv.AppendInt(out, ev.WallTimeMS, 10)
	for _, f := range []struct {
		name string
		doc  []byte
	}{{"document_key", ev.DocumentKey}, {"full_document", ev.FullDocument}, {"before", ev.PreImage}, {"update_description", ev.UpdateDesc}} {
		if f.doc == nil {
			continue
		}
		out = append(out, `,"`...)
		out = append(out, f.name...)
		out = append(out, `":`...)
		var err error
		if out, err = encode.AppendCanonical(out, f.doc); err != nil {
			return nil, fmt.Errorf("%s: %w", f.name, err)
		}
	}
	if ev.Payload != nil {
		b, err := json.Marshal(ev.Payload) // base64
		if err != nil {
			return nil, err
		}
		out = append(out, `,"payload":`...)
		out = append(out, b...)
	}
	return append(out, '}'), nil
}

// queueDeadLetters creates tide_dead_letters if missing, in the
// transaction begun (a statement of its own: the batch's statements are
// prepared before any runs), and queues the insert of the staged
// letters. It returns what each queued statement does, for errors.
func (s *Sink) queueDeadLetters(ctx context.Context, b *pgx.Batch) (what, sql []string, err error) {
	if len(s.dead.rows) == 0 {
		return nil, nil, nil
	}
	tbl := pgx.Identifier{s.cfg.Schema, DeadLetterTable}.Sanitize()
	create := `CREATE TABLE IF NOT EXISTS ` + tbl + ` (
	pipeline text NOT NULL,
	position jsonb NOT NULL,
	stage text NOT NULL,
	error text NOT NULL,
	namespace text NOT NULL,
	at timestamptz NOT NULL,
	change jsonb NOT NULL,
	PRIMARY KEY (pipeline, position, stage))`
	if _, err := s.conn.Exec(ctx, create); err != nil {
		return nil, nil, classify(err, &batchError{what: "create " + tbl, sql: create, err: err})
	}
	insert := `INSERT INTO ` + tbl + ` (pipeline, position, stage, error, namespace, at, change)
	VALUES ($1, $2::jsonb, $3, $4, $5, $6, $7::jsonb) ON CONFLICT DO NOTHING`
	for _, r := range s.dead.rows {
		b.Queue(insert, r...)
		what, sql = append(what, "insert dead letter into "+tbl), append(sql, insert)
	}
	return what, sql, nil
}

// KeepDeadLetters is what on_error: dead_letter in a pipeline file
// switches on: the sink keeps them itself, in tide_dead_letters.
func (c *Config) KeepDeadLetters() {}

// Is makes a refusal of the rows themselves (a data exception: a value
// of the wrong type or out of range; an integrity constraint: CHECK, NOT
// NULL, a unique or foreign key) a cdc.ErrRefused, which the runtime
// answers, with on_error skip or dead_letter, by splitting the batch to
// set the refused rows aside.
func (e *batchError) Is(target error) bool {
	if target != cdc.ErrRefused {
		return false
	}
	var pe *pgconn.PgError
	return errors.As(e.err, &pe) && (strings.HasPrefix(pe.Code, "22") || strings.HasPrefix(pe.Code, "23"))
}

// ReadDeadLetters returns the dead letters of pipeline in
// tide_dead_letters, oldest first: `tide dead-letters list` and `replay`
// read them through this ability of the Config.
func (c *Config) ReadDeadLetters(ctx context.Context, pipeline string) ([]cdc.DeadLetter, error) {
	conn, err := pgx.Connect(ctx, c.DSN)
	if err != nil {
		return nil, fmt.Errorf("postgres sink: connect: %w", err)
	}
	defer conn.Close(context.WithoutCancel(ctx))
	schema := c.Schema
	if schema == "" {
		schema = "public"
	}
	tbl := pgx.Identifier{schema, DeadLetterTable}.Sanitize()
	var exists bool
	if err := conn.QueryRow(ctx, `SELECT to_regclass($1) IS NOT NULL`, tbl).Scan(&exists); err != nil || !exists {
		return nil, err
	}
	rows, err := conn.Query(ctx, `SELECT position::text, stage, error, namespace, at, change::text FROM `+tbl+` WHERE pipeline = $1 ORDER BY at, position::text`, pipeline)
	if err != nil {
		return nil, fmt.Errorf("postgres sink: read %s: %w", tbl, err)
	}
	defer rows.Close()
	var out []cdc.DeadLetter
	for rows.Next() {
		var d cdc.DeadLetter
		var pos, change string
		if err := rows.Scan(&pos, &d.Stage, &d.Err, &d.Event.Namespace, &d.Time, &change); err != nil {
			return nil, fmt.Errorf("postgres sink: read %s: %w", tbl, err)
		}
		d.Event.Pos = cdc.Position(pos)
		if err := parseLetterChange([]byte(change), &d.Event); err != nil {
			return nil, fmt.Errorf("postgres sink: dead letter at %s: %w", pos, err)
		}
		out = append(out, d)
	}
	return out, rows.Err()
}

// parseLetterChange reads what letterChange wrote into ev.
func parseLetterChange(text []byte, ev *cdc.Event) error {
	var c struct {
		Op          string `json:"op"`
		ClusterTime struct {
			T uint32 `json:"t"`
			I uint32 `json:"i"`
		} `json:"cluster_time"`
		WallTimeMS   int64           `json:"wall_time_ms"`
		DocumentKey  json.RawMessage `json:"document_key"`
		FullDocument json.RawMessage `json:"full_document"`
		Before       json.RawMessage `json:"before"`
		UpdateDesc   json.RawMessage `json:"update_description"`
		Payload      []byte          `json:"payload"`
	}
	if err := json.Unmarshal(text, &c); err != nil {
		return err
	}
	ev.Op, ev.ClusterTime, ev.WallTimeMS, ev.Payload = cdc.Op(c.Op), cdc.Timestamp{T: c.ClusterTime.T, I: c.ClusterTime.I}, c.WallTimeMS, c.Payload
	for _, f := range []struct {
		dst *[]byte
		doc json.RawMessage
	}{{&ev.DocumentKey, c.DocumentKey}, {&ev.FullDocument, c.FullDocument}, {&ev.PreImage, c.Before}, {&ev.UpdateDesc, c.UpdateDesc}} {
		if len(f.doc) == 0 {
			continue
		}
		var doc bson.Raw
		if err := bson.UnmarshalExtJSON(f.doc, true, &doc); err != nil {
			return err
		}
		*f.dst = doc
	}
	return nil
}
