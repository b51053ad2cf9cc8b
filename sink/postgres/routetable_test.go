package postgres_test

import (
	"strconv"
	"strings"
	"testing"

	"github.com/tide-cdc/tide/cdc"
	"github.com/tide-cdc/tide/encode"
	"github.com/tide-cdc/tide/internal/testenv"
	"github.com/tide-cdc/tide/pipeline"
	"github.com/tide-cdc/tide/sink/postgres"
	"github.com/tide-cdc/tide/source/generate"
)

// parity routes each change by its seq's parity.
type parity struct{}

func (parity) Apply(ev *cdc.Event) (bool, error) {
	seq, _ := strconv.Atoi(strings.TrimSuffix(strings.TrimPrefix(string(ev.Pos), `{"seq":`), "}"))
	ev.Route = []string{"even", "odd"}[seq%2]
	return true, nil
}

func TestRouteTable(t *testing.T) {
	dsn := testenv.Postgres(t)
	c := connect(t, dsn)
	sink := postgres.New(postgres.Config{DSN: dsn, Table: "routed_{route}", CreateTable: true, Pipeline: "routed", Logger: testLogger(t)})
	p := pipeline.New(pipeline.Config{Name: "routed", Transform: parity{}}, generate.New(generate.Config{Count: 31, PayloadBytes: 1}), encode.Envelope, sink, sink.Checkpoints())
	if err := p.Run(t.Context()); err != nil {
		t.Fatal(err)
	}
	if n := queryInt(t, c, `SELECT count(*) FROM routed_even`); n != 15 {
		t.Fatalf("routed_even holds %d rows, want 15", n)
	}
	if n := queryInt(t, c, `SELECT count(*) FROM routed_odd`); n != 16 {
		t.Fatalf("routed_odd holds %d rows, want 16", n)
	}

	// Without a route transform, {route} cannot be filled.
	sink = postgres.New(postgres.Config{DSN: dsn, Table: "unrouted_{route}", CreateTable: true, Pipeline: "unrouted", Logger: testLogger(t)})
	p = pipeline.New(pipeline.Config{Name: "unrouted"}, generate.New(generate.Config{Count: 3, PayloadBytes: 1}), encode.Envelope, sink, sink.Checkpoints())
	if err := p.Run(t.Context()); err == nil || !strings.Contains(err.Error(), "no route to fill {route}") {
		t.Fatalf("Run without a route = %v", err)
	}
}
