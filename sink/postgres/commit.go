package postgres

import (
	"context"
	"errors"
	"fmt"
	"math"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/tide-cdc/tide/cdc"
	"github.com/tide-cdc/tide/internal/retry"
	"github.com/tide-cdc/tide/internal/sinkcheckpoint"
)

// connect opens the connection and the session's staging table. If an
// earlier connection was lost in the middle of a batch, it first waits
// until that connection's server process is gone, so that its transaction
// has surely committed or rolled back, and holds no locks, before the
// batch is looked at or sent again.
func (s *Sink) connect(ctx context.Context) error {
	cc, err := pgx.ParseConfig(s.cfg.DSN)
	if err != nil {
		return fmt.Errorf("postgres sink: dsn: %w", err)
	}
	if _, ok := cc.RuntimeParams["application_name"]; !ok {
		cc.RuntimeParams["application_name"] = "tide"
	}
	conn, err := pgx.ConnectConfig(ctx, cc)
	if err != nil {
		return fmt.Errorf("postgres sink: connect: %w", err)
	}
	if s.sql.createStage != "" {
		// Room for a large batch in the staging table before it spills to
		// disk; it must be set before the session's first temporary table.
		if _, err := conn.Exec(ctx, `SET temp_buffers = '64MB'`); err != nil {
			conn.Close(context.Background())
			return fmt.Errorf("postgres sink: set temp_buffers: %w", err)
		}
		if _, err := conn.Exec(ctx, s.sql.createStage); err != nil {
			conn.Close(context.Background())
			return fmt.Errorf("postgres sink: create staging table: %w", err)
		}
	}
	if s.stage.partial {
		if _, err := conn.Exec(ctx, deltaFunctions); err != nil {
			conn.Close(context.Background())
			return fmt.Errorf("postgres sink: create the session's functions of partial updates: %w", err)
		}
	}
	s.conn = conn
	s.session++ // the staging tables of typed tables are made again
	if err := s.settle(ctx); err != nil {
		// Without the lock, or unsure the lost session ended, the
		// connection must not be used: the next try connects afresh.
		conn.Close(context.Background())
		s.conn = nil
		return err
	}
	return nil
}

// settle waits for a lost session to end, then takes the pipeline's lock.
func (s *Sink) settle(ctx context.Context) error {
	if s.lostPID != 0 {
		if err := s.awaitGone(ctx, s.lostPID); err != nil {
			return err
		}
		s.lostPID = 0
	}
	if s.keepsCheckpoint() {
		return s.lockPipeline(ctx)
	}
	return nil
}

// lockPipeline takes a session-level advisory lock on the pipeline's
// checkpoint, so that one session at a time writes it. A tide that was
// killed holds it until its server session ends, which is also when its
// last transaction has surely committed or rolled back: only then may the
// checkpoint be read.
func (s *Sink) lockPipeline(ctx context.Context) error {
	key := "tide checkpoint " + s.sql.checkpoints + " " + s.cfg.Pipeline
	deadline := time.Now().Add(s.cfg.LockTimeout)
	wait := 5 * time.Millisecond
	for {
		var locked bool
		if err := s.conn.QueryRow(ctx, `SELECT pg_try_advisory_lock(hashtext($1))`, key).Scan(&locked); err != nil {
			return fmt.Errorf("postgres sink: lock pipeline %q: %w", s.cfg.Pipeline, err)
		}
		if locked {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("postgres sink: pipeline %q is being written by another session (another tide running it?): its lock was not released in %s", s.cfg.Pipeline, s.cfg.LockTimeout)
		}
		if err := retry.Sleep(ctx, wait); err != nil {
			return err
		}
		wait = min(2*wait, 200*time.Millisecond)
	}
}

// terminateAfter is how long a lost session is given to end by itself
// (finishing what it received, then finding its client gone) before it is
// terminated: a session cut off by a network fault may otherwise wait for
// TCP timeouts.
const terminateAfter = time.Second

// awaitGone waits until the server process pid, a session of ours whose
// connection broke, has exited, terminating it if it lingers.
func (s *Sink) awaitGone(ctx context.Context, pid uint32) error {
	start := time.Now()
	terminated := false
	wait := 2 * time.Millisecond
	for {
		var alive bool
		err := s.conn.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM pg_stat_activity WHERE pid = $1)`, int32(pid)).Scan(&alive)
		if err != nil {
			return fmt.Errorf("postgres sink: wait for lost session %d to end: %w", pid, err)
		}
		if !alive {
			return nil
		}
		if !terminated && time.Since(start) > terminateAfter {
			terminated = true
			if _, err := s.conn.Exec(ctx, `SELECT pg_terminate_backend($1)`, int32(pid)); err != nil {
				s.log.Warn("terminate lost session; waiting for it to end", "pid", pid, "err", err)
			}
		}
		if err := retry.Sleep(ctx, wait); err != nil {
			return err
		}
		wait = min(2*wait, 100*time.Millisecond)
	}
}

// dropConn closes a connection that failed, remembering its server
// process so that the next connect waits for it to end.
func (s *Sink) dropConn() {
	if s.conn == nil {
		return
	}
	if pid := s.conn.PgConn().PID(); pid != 0 {
		s.lostPID = pid
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	_ = s.conn.Close(ctx) // broken already; the error says nothing new
	s.conn = nil
}

// batchError is a failure of PostgreSQL to apply the batch that a retry
// cannot fix: the pipeline fails with it.
type batchError struct {
	what string // the statement, in words
	sql  string
	key  string // the offending document key, or ""
	err  error
}

func (e *batchError) Error() string {
	var b strings.Builder
	b.WriteString("postgres sink: ")
	b.WriteString(e.what)
	if e.key != "" {
		b.WriteString(" (document key ")
		b.WriteString(e.key)
		b.WriteString(")")
	}
	b.WriteString(": ")
	b.WriteString(e.err.Error())
	if e.sql != "" {
		b.WriteString("; statement: ")
		b.WriteString(strings.Join(strings.Fields(e.sql), " "))
	}
	return b.String()
}

func (e *batchError) Unwrap() error { return e.err }

// errUncertain marks a COMMIT whose outcome is unknown: the connection
// broke after it was sent.
var errUncertain = errors.New("connection lost after COMMIT was sent; outcome unknown")

// Commit writes the batch and, when the sink keeps the checkpoint, next,
// in one transaction. Connection errors are retried with backoff; after a
// lost COMMIT, the checkpoint row tells whether the batch committed, and a
// committed batch is never applied twice. A Commit that fails drops the
// batch: the pipeline stops, and the batch is read again after a restart.
func (s *Sink) Commit(ctx context.Context, next cdc.Checkpoint) error {
	if !s.opened {
		return errors.New("postgres sink: Commit before Open")
	}
	var ckpt []byte
	if s.keepsCheckpoint() {
		var err error
		if ckpt, err = sinkcheckpoint.Marshal(next); err != nil {
			s.stage.reset()
			return fmt.Errorf("postgres sink: %w", err)
		}
	} else if s.stage.live == 0 && s.stage.skipped == 0 && len(s.stage.colls) == 0 && len(s.dead.rows) == 0 {
		s.stage.reset() // nothing to write: a batch of markers only
		return nil
	}
	defer s.dead.reset()
	err := s.commit(ctx, ckpt)
	if err != nil {
		s.stage.reset()
		return err
	}
	if ckpt != nil {
		s.ckpts.ledger.Committed(ckpt)
	}
	return nil
}

// commit writes the staged batch, and ckpt if not nil, retrying after
// connection errors.
func (s *Sink) commit(ctx context.Context, ckpt []byte) error {
	var (
		b         = s.backoff()
		uncertain bool
	)
	for {
		err := s.attempt(ctx, ckpt, uncertain)
		if err == nil {
			s.committedTyped()
			if n := s.stage.skipped; n > 0 {
				s.log.Debug("skipped updates without a full document: their documents were deleted before the lookup", "updates", n)
			}
			s.stage.reset()
			b.Succeed()
			return nil
		}
		if errors.Is(err, errUncertain) {
			uncertain = true
		}
		var be *batchError
		if errors.As(err, &be) || ctx.Err() != nil {
			return err
		}
		if b.Attempts() == 0 || b.Attempts()%10 == 0 {
			s.log.Warn("retrying batch", "attempt", b.Attempts()+1, "rows", s.stage.live, "err", err)
		}
		if werr := b.Fail(ctx, err); werr != nil {
			if ctx.Err() != nil {
				return err
			}
			return fmt.Errorf("postgres sink: batch of %d rows not written: %w", s.stage.live, werr)
		}
	}
}

// attempt makes one try at writing the batch. uncertain says that an
// earlier try's COMMIT was lost: with the checkpoint in the sink, the
// checkpoint row decides whether that try committed.
func (s *Sink) attempt(ctx context.Context, ckpt []byte, uncertain bool) error {
	if s.conn == nil {
		if err := s.connect(ctx); err != nil {
			return err
		}
	}
	if uncertain && ckpt != nil {
		var done bool
		if err := s.conn.QueryRow(ctx, s.sql.checkCheckpoint, s.cfg.Pipeline, ckpt).Scan(&done); err != nil {
			return s.failed(fmt.Errorf("read checkpoint to learn whether the lost commit happened: %w", err))
		}
		if done {
			s.log.Info("lost commit had succeeded; not applying the batch again", "rows", s.stage.live)
			return nil
		}
		s.log.Info("lost commit had not succeeded; applying the batch again", "rows", s.stage.live)
	} else if uncertain {
		s.log.Warn("lost commit may have succeeded; applying the batch again (at-least-once without checkpoint: sink)", "rows", s.stage.live)
	}

	if err := s.prepareTables(ctx); err != nil {
		var be *batchError
		if !errors.As(err, &be) {
			err = classify(err, &batchError{what: "prepare tables", err: err})
		}
		return s.failed(err)
	}
	if _, err := s.conn.Exec(ctx, "begin"); err != nil {
		return s.failed(fmt.Errorf("begin: %w", err))
	}
	if err := s.apply(ctx, ckpt); err != nil {
		if errors.Is(err, errUncertain) {
			return s.failed(err)
		}
		if s.conn != nil && !s.conn.IsClosed() {
			rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
			_, _ = s.conn.Exec(rctx, "rollback") // on a broken connection the server rolls back
			cancel()
		}
		var be *batchError
		if errors.As(err, &be) && s.conn != nil && !s.conn.IsClosed() {
			be.key = s.diagnose(ctx, be)
		}
		return s.failed(err)
	}
	return nil
}

// apply writes the batch in the transaction begun: COPY into the staging
// table, then, in one round trip, one statement per kind of operation, the
// checkpoint, and COMMIT. An error from PostgreSQL means nothing after the
// failing statement ran, COMMIT included; a connection lost once the
// statements were sent leaves the outcome unknown (errUncertain).
func (s *Sink) apply(ctx context.Context, ckpt []byte) error {
	st := &s.stage
	counts := st.perTable(len(s.tables))
	if err := s.applyTyped(ctx, counts); err != nil {
		return err
	}
	shared := 0
	for i, c := range counts {
		if !st.typed[i] {
			shared += c.live
		}
	}
	if st.mirror && shared > 0 {
		src := st.source()
		if _, err := s.conn.CopyFrom(ctx, pgx.Identifier{"pg_temp", stageTable}, mirrorStageColumns, src); err != nil {
			if src.err != nil { // a document that is not BSON: no retry changes it
				return &batchError{what: "copy into staging table", err: src.err}
			}
			return classify(err, &batchError{what: "copy into staging table", err: err, key: s.copyErrorKey(err, -1)})
		}
	}
	var stmts []stmt
	for i, c := range counts {
		q := &s.tables[i].sql
		switch {
		case st.mirror && st.typed[i]:
			m := s.tables[i].typed.mergeSQL(s.cfg, q.table)
			if c.upsert > 0 {
				stmts = append(stmts, stmt{"upsert into " + q.table, m.upsert})
			}
			if c.del > 0 {
				stmts = append(stmts, stmt{"delete from " + q.table, m.delete})
			}
		case st.mirror:
			if c.upsert > 0 {
				stmts = append(stmts, stmt{"upsert into " + q.table, q.upsert})
			}
			if c.del > 0 {
				stmts = append(stmts, stmt{"delete from " + q.table, q.delete})
			}
		case c.live > 0 && st.typed[i]:
			// Append, typed: the envelope's columns and the document's.
			id := pgx.Identifier{s.cfg.Schema, s.tables[i].name}
			src := s.typedAppendSource(i)
			if _, err := s.conn.CopyFrom(ctx, id, s.tables[i].typed.appendCopyColumns(), src); err != nil {
				if err := src.Err(); err != nil {
					return &batchError{what: "copy into " + q.table, err: err}
				}
				return classify(err, &batchError{what: "copy into " + q.table, err: err, key: s.copyErrorKey(err, i)})
			}
		case c.live > 0:
			// Append: straight into the table, in event order.
			id := pgx.Identifier{s.cfg.Schema, s.tables[i].name}
			if _, err := s.conn.CopyFrom(ctx, id, appendCopyColumns, st.appendSource(i)); err != nil {
				return classify(err, &batchError{what: "copy into " + q.table, err: err, key: s.copyErrorKey(err, i)})
			}
		}
	}
	b := &pgx.Batch{}
	for _, q := range stmts {
		b.Queue(q.sql)
	}
	var colls []collStmt
	for _, op := range st.colls {
		from := s.tables[op.tbl]
		if from.absent {
			continue // no table, no rows
		}
		if op.rename {
			to := &s.tables[op.to].sql
			move := moveRows(&from.sql, to, op.to)
			if (from.typed != nil) != (s.tables[op.to].typed != nil) {
				return &batchError{what: "move rows of renamed " + from.sql.table + " to " + to.table,
					err: errors.New("one has typed columns and the other the document layout; rows cannot move between them")}
			}
			if from.typed != nil {
				move = moveTyped(from, s.tables[op.to])
			}
			colls = append(colls, collStmt{stmt{"move rows of renamed " + from.sql.table + " to " + to.table, move}, op.ct},
				collStmt{stmt{"clear renamed " + from.sql.table, from.sql.clearRows}, op.ct})
			continue
		}
		colls = append(colls, collStmt{stmt{"drop rows of dropped " + from.sql.table, from.sql.dropRows}, op.ct})
	}
	if st.deltas > 0 {
		// Updates applied from their description go after the rows
		// above, in event order among the drops and renames, in a
		// flight of their own: one that finds no row stops the batch
		// before COMMIT.
		if err := s.applyDeltas(ctx, b, stmts, colls); err != nil {
			return err
		}
		b, stmts, colls = &pgx.Batch{}, stmts[:0], nil
	}
	for _, q := range colls {
		b.Queue(q.sql, q.ct)
		stmts = append(stmts, q.stmt)
	}
	for _, tb := range s.tables {
		if tb.typed != nil && len(tb.typed.records) > 0 {
			b.Queue(s.sql.recordColumns, recordArgs(tb.name, tb.typed.records)...)
			stmts = append(stmts, stmt{"record columns of " + tb.sql.table + " in " + s.sql.columns, s.sql.recordColumns})
		}
	}
	whats, sqls, err := s.queueDeadLetters(ctx, b)
	if err != nil {
		return err
	}
	for i := range whats {
		stmts = append(stmts, stmt{whats[i], sqls[i]})
	}
	if ckpt != nil {
		b.Queue(s.sql.saveCheckpoint, s.cfg.Pipeline, ckpt)
		stmts = append(stmts, stmt{"save checkpoint in " + s.sql.checkpoints, s.sql.saveCheckpoint})
	}
	b.Queue("commit")
	stmts = append(stmts, stmt{"commit", ""})

	br := s.conn.SendBatch(ctx, b)
	for _, q := range stmts {
		tag, err := br.Exec()
		if err == nil && q.sql == "" && tag.String() != "COMMIT" {
			br.Close()
			return fmt.Errorf("commit: PostgreSQL rolled the transaction back (%s)", tag) // retried
		}
		if err != nil {
			br.Close()
			if !isServerError(err) && ctx.Err() == nil {
				return fmt.Errorf("%s: %w: %w", q.what, errUncertain, err)
			}
			return classify(err, &batchError{what: q.what, sql: q.sql, err: err})
		}
	}
	if err := br.Close(); err != nil {
		if !isServerError(err) && ctx.Err() == nil {
			return fmt.Errorf("apply batch: %w: %w", errUncertain, err)
		}
		return classify(err, &batchError{what: "apply batch", err: err})
	}
	return nil
}

// stmt is a statement of a batch, and what it does in words.
type stmt struct{ what, sql string }

// collStmt is a statement of a drop or a rename, which takes its cluster
// time as its argument.
type collStmt struct {
	stmt
	ct int64
}

// applyDeltas sends b, which holds stmts, then the UPDATE of each row
// applied from its update description, with the drops and renames of
// colls among them by cluster time (an update after a rename finds its
// row moved), and checks that each update found its row: one that
// changed nothing, where no later event holds the row, has no row to
// change (a document never copied, or deleted), and fails the batch
// rather than lose its fields.
func (s *Sink) applyDeltas(ctx context.Context, b *pgx.Batch, stmts []stmt, colls []collStmt) error {
	st := &s.stage
	type item struct {
		q stmt
		d *deltaStmt
	}
	var items []item
	queueColls := func(before int64) {
		for len(colls) > 0 && colls[0].ct < before {
			b.Queue(colls[0].sql, colls[0].ct)
			items = append(items, item{q: colls[0].stmt})
			colls = colls[1:]
		}
	}
	for i := range st.rows {
		r := &st.rows[i]
		if r.dead || !r.delta {
			continue
		}
		tb := s.tables[r.tbl]
		d, err := s.deltaSQL(tb, r)
		if err != nil {
			return &batchError{what: "update " + tb.sql.table + " from the update description at position " + r.position, key: s.rowKey(r), err: err}
		}
		queueColls(r.ct)
		b.Queue(d.sql, d.args...)
		items = append(items, item{d: &d})
	}
	queueColls(math.MaxInt64)
	br := s.conn.SendBatch(ctx, b)
	for _, q := range stmts {
		if _, err := br.Exec(); err != nil {
			br.Close()
			return classify(err, &batchError{what: q.what, sql: q.sql, err: err})
		}
	}
	var missing []*deltaStmt
	for _, it := range items {
		tag, err := br.Exec()
		if err != nil {
			br.Close()
			if it.d == nil {
				return classify(err, &batchError{what: it.q.what, sql: it.q.sql, err: err})
			}
			return classify(err, &batchError{what: "update " + s.tables[it.d.row.tbl].sql.table + " from the update description at position " + it.d.row.position,
				sql: it.d.sql, key: s.rowKey(it.d.row), err: err})
		}
		if it.d != nil && tag.RowsAffected() == 0 {
			missing = append(missing, it.d)
		}
	}
	if err := br.Close(); err != nil {
		return classify(err, &batchError{what: "apply updates from their descriptions", err: err})
	}
	for _, d := range missing {
		tb := s.tables[d.row.tbl]
		var later bool
		err := s.conn.QueryRow(ctx, `SELECT coalesce((SELECT _tide_cluster_time > $2 FROM `+tb.sql.table+` WHERE _id = $1), false)`, d.args[0], d.row.ct).Scan(&later)
		if err != nil {
			return classify(err, &batchError{what: "look for the row of an update without its document in " + tb.sql.table, err: err})
		}
		if !later {
			return &batchError{what: "update " + tb.sql.table + " from the update description at position " + d.row.position, key: s.rowKey(d.row),
				err: errNoRow}
		}
	}
	return nil
}

// failed drops the connection if err left it unusable, and returns err.
func (s *Sink) failed(err error) error {
	if s.conn != nil && (s.conn.IsClosed() || !isServerError(err)) {
		s.dropConn()
	} else if s.conn != nil && isTransient(err) {
		s.dropConn() // a server shutting down, or a connection-class error
	}
	return err
}

// classify returns permanent for an error from PostgreSQL that a retry
// cannot fix, and err itself for a connection problem or a transient
// server condition.
func classify(err error, permanent *batchError) error {
	if isServerError(err) && !isTransient(err) {
		return permanent
	}
	return err
}

func isServerError(err error) bool {
	var pe *pgconn.PgError
	return errors.As(err, &pe)
}

// isTransient reports whether a server error is worth retrying:
// connection exceptions, serialization failures and deadlocks,
// shutdowns, and lack of resources.
func isTransient(err error) bool {
	var pe *pgconn.PgError
	if !errors.As(err, &pe) {
		return false
	}
	switch {
	case strings.HasPrefix(pe.Code, "08"), // connection exception
		strings.HasPrefix(pe.Code, "40"),                           // transaction rollback: serialization, deadlock
		strings.HasPrefix(pe.Code, "53"),                           // insufficient resources
		pe.Code == "57P01", pe.Code == "57P02", pe.Code == "57P03": // shutdown, cannot connect now
		return true
	}
	return false
}

var copyLine = regexp.MustCompile(`COPY [^,\n]*, line (\d+)`)

// copyErrorKey names the document key of the row a COPY failed on, from
// the "COPY table, line N" context PostgreSQL reports; tbl is the table
// whose rows the COPY sent, or -1 for the staging table (every table's).
func (s *Sink) copyErrorKey(err error, tbl int) string {
	var pe *pgconn.PgError
	if !errors.As(err, &pe) {
		return ""
	}
	m := copyLine.FindStringSubmatch(pe.Where)
	if m == nil {
		return ""
	}
	n, _ := strconv.Atoi(m[1])
	r, ok := s.stage.nthLive(n, tbl)
	if !ok {
		return ""
	}
	return s.rowKey(r)
}

func (s *Sink) rowKey(r *row) string {
	if r.key != "" {
		return r.key
	}
	return keyText(s.stage.bytes(r.rawKey)) + " at position " + r.position
}

// maxDiagnose bounds how many rows diagnose tries one by one.
const maxDiagnose = 20000

// diagnose finds the document key of the row on which a statement failed
// by applying the staged rows one at a time, each under a savepoint, in a
// transaction that is rolled back. It returns "" if it cannot tell.
func (s *Sink) diagnose(ctx context.Context, be *batchError) string {
	if be.key != "" {
		return be.key
	}
	st := &s.stage
	var one string
	var del bool
	tbl := -1 // the table of the failed statement
	for i, tb := range s.tables {
		switch be.sql {
		case tb.sql.upsert:
			one, tbl = tb.sql.upsertOne, i
		case tb.sql.delete:
			one, del, tbl = tb.sql.deleteOne, true, i
		}
	}
	if one == "" {
		return ""
	}
	dctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	tx, err := s.conn.Begin(dctx)
	if err != nil {
		return ""
	}
	defer tx.Rollback(context.WithoutCancel(dctx))
	if _, err := tx.CopyFrom(dctx, pgx.Identifier{"pg_temp", stageTable}, mirrorStageColumns, st.source()); err != nil {
		return ""
	}
	tried := 0
	for i := range st.rows {
		r := &st.rows[i]
		if r.dead || r.delta || r.tbl != tbl || r.del != del {
			continue
		}
		if tried++; tried > maxDiagnose {
			return ""
		}
		if _, err := tx.Exec(dctx, "SAVEPOINT tide_diagnose"); err != nil {
			return ""
		}
		if _, err := tx.Exec(dctx, one, r.key); err != nil {
			return s.rowKey(r)
		}
		if _, err := tx.Exec(dctx, "RELEASE SAVEPOINT tide_diagnose"); err != nil {
			return ""
		}
	}
	return ""
}
