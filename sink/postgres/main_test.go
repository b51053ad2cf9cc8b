package postgres_test

import (
	"context"
	"encoding/json"
	"log/slog"
	"os"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"go.mongodb.org/mongo-driver/v2/bson"
	"go.uber.org/goleak"

	"github.com/tide-cdc/tide/cdc"
	"github.com/tide-cdc/tide/encode"
	"github.com/tide-cdc/tide/internal/testenv"
	"github.com/tide-cdc/tide/sink/postgres"
)

func TestMain(m *testing.M) {
	if os.Getenv(crashChildEnv) != "" {
		os.Exit(crashChild())
	}
	code := m.Run()
	testenv.StopPostgres()
	testenv.RemoveTideBinary()
	if code == 0 {
		if err := goleak.Find(); err != nil {
			os.Stderr.WriteString("goleak: " + err.Error() + "\n")
			code = 1
		}
	}
	os.Exit(code)
}

func testLogger(t testing.TB) *slog.Logger {
	return slog.New(slog.NewTextHandler(t.Output(), &slog.HandlerOptions{Level: slog.LevelWarn}))
}

// connect opens a connection for the test's own queries.
func connect(t testing.TB, dsn string) *pgx.Conn {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	c, err := pgx.Connect(ctx, dsn)
	if err != nil {
		t.Fatalf("connect to test database: %v", err)
	}
	t.Cleanup(func() { c.Close(context.Background()) })
	return c
}

func queryInt(t testing.TB, c *pgx.Conn, sql string, args ...any) int64 {
	t.Helper()
	var n int64
	if err := c.QueryRow(t.Context(), sql, args...).Scan(&n); err != nil {
		t.Fatalf("%s: %v", sql, err)
	}
	return n
}

// checkpointSeq returns the generator seq in the pipeline's checkpoint
// row, or 0 if there is none.
func checkpointSeq(t testing.TB, c *pgx.Conn, pipeline string) int64 {
	t.Helper()
	var raw []byte
	err := c.QueryRow(t.Context(), `SELECT checkpoint FROM public.tide_checkpoints WHERE pipeline = $1`, pipeline).Scan(&raw)
	if err == pgx.ErrNoRows {
		return 0
	}
	if err != nil {
		t.Fatalf("read checkpoint row: %v", err)
	}
	var cp struct {
		Source struct {
			Seq int64 `json:"seq"`
		} `json:"source"`
	}
	if err := json.Unmarshal(raw, &cp); err != nil {
		t.Fatalf("checkpoint row %s: %v", raw, err)
	}
	return cp.Source.Seq
}

// event builds a MongoDB-shaped record; doc may be nil (a delete).
func event(t testing.TB, op cdc.Op, id any, doc bson.D, ts, inc uint32, pos string) cdc.Record {
	t.Helper()
	key, err := bson.Marshal(bson.D{{Key: "_id", Value: id}})
	if err != nil {
		t.Fatal(err)
	}
	ev := cdc.Event{
		Pos: cdc.Position(pos), Op: op, Namespace: "db.orders",
		ClusterTime: cdc.Timestamp{T: ts, I: inc}, DocumentKey: key,
	}
	if doc != nil {
		full, err := bson.Marshal(append(bson.D{{Key: "_id", Value: id}}, doc...))
		if err != nil {
			t.Fatal(err)
		}
		ev.FullDocument = full
	}
	data, err := encode.Envelope(nil, &ev)
	if err != nil {
		t.Fatal(err)
	}
	return cdc.Record{Event: ev, Data: data}
}

// writeBatch runs one batch through s as the pipeline does: Put, unless
// there are no records, then Commit.
func writeBatch(t testing.TB, s *postgres.Sink, next cdc.Checkpoint, recs ...cdc.Record) error {
	t.Helper()
	ctx := t.Context()
	if len(recs) > 0 {
		if err := s.Put(ctx, recs); err != nil {
			return err
		}
	}
	return s.Commit(ctx, next)
}

func openSink(t testing.TB, cfg postgres.Config) *postgres.Sink {
	t.Helper()
	return openSinkWith(t, postgres.New, cfg)
}

// openKeepingSink opens a sink that keeps the checkpoint.
func openKeepingSink(t testing.TB, cfg postgres.Config) *postgres.Sink {
	t.Helper()
	return openSinkWith(t, func(cfg postgres.Config) *postgres.Sink {
		s := postgres.New(cfg)
		s.Checkpoints()
		return s
	}, cfg)
}

func openSinkWith(t testing.TB, newSink func(postgres.Config) *postgres.Sink, cfg postgres.Config) *postgres.Sink {
	t.Helper()
	if cfg.Logger == nil {
		cfg.Logger = testLogger(t)
	}
	s := newSink(cfg)
	if err := s.Open(t.Context(), nil); err != nil {
		t.Fatalf("open sink: %v", err)
	}
	t.Cleanup(func() {
		if err := s.Close(); err != nil {
			t.Errorf("close sink: %v", err)
		}
	})
	return s
}
