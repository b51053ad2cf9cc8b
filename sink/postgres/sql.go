package postgres

import (
	"strconv"
	"strings"

	"github.com/jackc/pgx/v5"
)

// stageTable is the session's temporary staging table; rows vanish at
// every commit.
const stageTable = "tide_stage"

// checkpointTable holds one checkpoint row per pipeline.
const checkpointTable = "tide_checkpoints"

// column is a column the sink writes, and its type as format_type
// prints it.
type column struct {
	name, typ string
}

var mirrorColumns = []column{
	{"_id", "text"},
	{"doc", "jsonb"},
	{"_tide_op", "text"},
	{"_tide_cluster_time", "bigint"},
	{"_tide_deleted", "boolean"},
	{"_tide_synced_at", "timestamp with time zone"},
}

var appendColumns = []column{
	{"id", "bigint"},
	{"_namespace", "text"},
	{"_op", "text"},
	{"_document_key", "jsonb"},
	{"_cluster_time_s", "bigint"},
	{"_cluster_time_i", "bigint"},
	{"_wall_time_ms", "bigint"},
	{"_full_document", "jsonb"},
	{"_before", "jsonb"},
	{"_update_desc", "jsonb"},
	{"_extra", "jsonb"},
	{"_headers", "jsonb"},
	{"_resume_token", "jsonb"},
	{"_tide_synced_at", "timestamp with time zone"},
}

// plainKey is the plain form of a document-layout row's key, the
// generated column _key: an _id that is a string, or an ObjectId, int or
// long, as its text ('abc', '5f1d…', '42'); any other key (another type,
// or a compound key) as the canonical Extended JSON _id holds. It is not
// unique ("1" and 1 share one), so _id stays the primary key.
const plainKey = `CASE WHEN (_id::jsonb - '_id') <> '{}'::jsonb THEN _id
	WHEN jsonb_typeof(_id::jsonb -> '_id') = 'string' THEN _id::jsonb ->> '_id'
	ELSE coalesce(_id::jsonb -> '_id' ->> '$oid', _id::jsonb -> '_id' ->> '$numberInt', _id::jsonb -> '_id' ->> '$numberLong',
	_id::jsonb -> '_id' ->> '$numberDouble', _id) END`

// mirrorStageColumns are the mirror's staging table's columns, in COPY
// order. t is the index of the row's table among the sink's tables: one
// COPY stages the rows of every table, and each table's statements take
// their own.
var mirrorStageColumns = []string{"_id", "doc", "op", "ct", "del", "t"}

// statements are the SQL texts of one sink, with its identifiers quoted.
type statements struct {
	table       string // quoted schema.table
	checkpoints string // quoted schema.tide_checkpoints
	columns     string // quoted schema.tide_columns

	// recordColumns inserts rows of tide_columns for table $1, from
	// parallel arrays (recordArgs); a decision recorded once stays.
	recordColumns string

	createTable       string
	createKeyIndex    string // document layout: the index on _key
	createCheckpoints string
	createStage       string

	// Applying a staged batch (mirror). Each applies every staged row of
	// its kind; the ...One variant applies the row with _id = $1, to find
	// the one a failing statement chokes on.
	upsert, upsertOne string

	// Mirror mode, for a collection's drop and rename: the rows with a
	// cluster time up to $1 are dropped (deleted, or marked deleted), or
	// cleared (deleted) once moved to the new name's table.
	dropRows, clearRows string
	delete, deleteOne   string

	saveCheckpoint  string
	loadCheckpoint  string
	checkCheckpoint string
}

// newStatements returns the statements of cfg.Table, the sink's first
// table.
func newStatements(cfg Config) statements { return newStatementsFor(cfg, 0) }

// newStatementsFor returns the statements of cfg.Table, whose rows are
// staged with t = tbl.
func newStatementsFor(cfg Config, tbl int) statements {
	ofTable := " t = " + strconv.Itoa(tbl) // an integer: nothing to quote
	s := statements{
		table:       pgx.Identifier{cfg.Schema, cfg.Table}.Sanitize(),
		checkpoints: pgx.Identifier{cfg.Schema, checkpointTable}.Sanitize(),
		columns:     pgx.Identifier{cfg.Schema, columnsTable}.Sanitize(),
	}
	s.recordColumns = `INSERT INTO ` + s.columns + ` (table_name, column_name, path, bson_type, pg_type, decision, note)
	SELECT $1, c, p::text[], b, t, d, n FROM unnest($2::text[], $3::text[], $4::text[], $5::text[], $6::text[], $7::text[]) AS u(c, p, b, t, d, n)
	ON CONFLICT DO NOTHING`
	s.createCheckpoints = `CREATE TABLE IF NOT EXISTS ` + s.checkpoints + ` (
	pipeline text PRIMARY KEY,
	checkpoint jsonb NOT NULL,
	updated_at timestamptz NOT NULL DEFAULT now())`
	s.saveCheckpoint = `INSERT INTO ` + s.checkpoints + ` AS c (pipeline, checkpoint, updated_at) VALUES ($1, $2, now())
	ON CONFLICT (pipeline) DO UPDATE SET checkpoint = excluded.checkpoint, updated_at = excluded.updated_at`
	s.loadCheckpoint = `SELECT checkpoint FROM ` + s.checkpoints + ` WHERE pipeline = $1`
	s.checkCheckpoint = `SELECT coalesce((SELECT checkpoint = $2::jsonb FROM ` + s.checkpoints + ` WHERE pipeline = $1), false)`

	stage := "pg_temp." + stageTable
	if cfg.Mode == ModeAppend {
		s.createTable = `CREATE TABLE IF NOT EXISTS ` + s.table + ` (
	id bigserial PRIMARY KEY,
	_namespace text,
	_op text NOT NULL,
	_document_key jsonb,
	_cluster_time_s bigint,
	_cluster_time_i bigint,
	_wall_time_ms bigint,
	_full_document jsonb,
	_before jsonb,
	_update_desc jsonb,
	_extra jsonb,
	_headers jsonb,
	_resume_token jsonb,
	_tide_synced_at timestamptz NOT NULL DEFAULT now())`
		// Rows are COPYed straight into the table (envelope.go): no
		// staging table, no statement.
		return s
	}

	s.createTable = `CREATE TABLE IF NOT EXISTS ` + s.table + ` (
	_id text PRIMARY KEY,
	doc jsonb,
	_tide_op text NOT NULL,
	_tide_cluster_time bigint NOT NULL,
	_tide_deleted boolean NOT NULL DEFAULT false,
	_tide_synced_at timestamptz NOT NULL DEFAULT now(),
	_key text GENERATED ALWAYS AS (` + plainKey + `) STORED)`
	s.createKeyIndex = `CREATE INDEX IF NOT EXISTS ` + pgx.Identifier{shorten(cfg.Table + "_key")}.Sanitize() + ` ON ` + s.table + ` (_key)`
	s.createStage = `CREATE TEMP TABLE IF NOT EXISTS ` + stageTable + ` (_id text, doc jsonb, op text, ct bigint, del boolean, t int) ON COMMIT DELETE ROWS`

	// The guard: a row is only replaced by an event at least as recent.
	// Equal cluster times replace, so that a replayed batch, or events of
	// one MongoDB transaction, apply in order.
	cols := `(_id, doc, _tide_op, _tide_cluster_time, _tide_deleted, _tide_synced_at)`
	guard := ` WHERE t._tide_cluster_time <= excluded._tide_cluster_time`
	up := `INSERT INTO ` + s.table + ` AS t ` + cols + `
	SELECT _id, doc, op, ct, false, now() FROM ` + stage + ` WHERE NOT del AND` + ofTable + `%s
	ON CONFLICT (_id) DO UPDATE SET doc = excluded.doc, _tide_op = excluded._tide_op,
	_tide_cluster_time = excluded._tide_cluster_time, _tide_deleted = false, _tide_synced_at = excluded._tide_synced_at` + guard
	s.upsert = strings.Replace(up, "%s", "", 1)
	s.upsertOne = strings.Replace(up, "%s", " AND _id = $1", 1)

	var del string
	if cfg.SoftDelete {
		// A document deleted before the mirror saw it still gets a row,
		// so that a replayed older insert cannot bring it back.
		del = `INSERT INTO ` + s.table + ` AS t ` + cols + `
	SELECT _id, NULL, op, ct, true, now() FROM ` + stage + ` WHERE del AND` + ofTable + `%s
	ON CONFLICT (_id) DO UPDATE SET _tide_op = excluded._tide_op,
	_tide_cluster_time = excluded._tide_cluster_time, _tide_deleted = true, _tide_synced_at = excluded._tide_synced_at` + guard
	} else {
		del = `DELETE FROM ` + s.table + ` AS t USING ` + stage + ` AS s
	WHERE s.del AND s.` + strings.TrimSpace(ofTable) + ` AND t._id = s._id AND t._tide_cluster_time <= s.ct%s`
	}
	s.clearRows = `DELETE FROM ` + s.table + ` WHERE _tide_cluster_time <= $1`
	s.dropRows = s.clearRows
	if cfg.SoftDelete {
		s.dropRows = `UPDATE ` + s.table + ` SET _tide_op = 'drop', _tide_cluster_time = $1, _tide_deleted = true, _tide_synced_at = now()
	WHERE _tide_cluster_time <= $1 AND NOT _tide_deleted`
	}
	s.delete = strings.Replace(del, "%s", "", 1)
	s.deleteOne = strings.Replace(del, "%s", " AND s._id = $1", 1)
	if cfg.SoftDelete {
		s.deleteOne = strings.Replace(del, "%s", " AND _id = $1", 1)
	}
	return s
}

// moveRows copies the rows of from with a cluster time up to $1 into to,
// where no more recent row for their _id is, for a collection's rename.
// The move runs after the batch's rows, so a later delete of the batch in
// the new table (staged with t = toTbl) found no row to delete: without
// soft_delete it leaves no row to stop the move either, so the move skips
// those _ids itself rather than bring deleted documents back.
func moveRows(from, to *statements, toTbl int) string {
	cols := `_id, doc, _tide_op, _tide_cluster_time, _tide_deleted, _tide_synced_at`
	return `INSERT INTO ` + to.table + ` AS t (` + cols + `) SELECT ` + cols + ` FROM ` + from.table + ` AS f WHERE _tide_cluster_time <= $1
	AND NOT EXISTS (SELECT 1 FROM pg_temp.` + stageTable + ` AS s WHERE s.del AND s.t = ` + strconv.Itoa(toTbl) + ` AND s._id = f._id AND s.ct > $1)
	ON CONFLICT (_id) DO UPDATE SET doc = excluded.doc, _tide_op = excluded._tide_op, _tide_cluster_time = excluded._tide_cluster_time,
	_tide_deleted = excluded._tide_deleted, _tide_synced_at = now() WHERE t._tide_cluster_time <= excluded._tide_cluster_time`
}
