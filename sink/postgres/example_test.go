package postgres_test

import (
	"context"
	"os"

	"github.com/tide-cdc/tide/encode"
	"github.com/tide-cdc/tide/pipeline"
	"github.com/tide-cdc/tide/sink/postgres"
	"github.com/tide-cdc/tide/source/generate"
)

// A PostgreSQL sink that keeps the pipeline's checkpoint in its own
// transaction is exactly-once: Checkpoints is the one switch, and its
// result is the pipeline's checkpoint store. (It needs a PostgreSQL
// server, so it is compiled but not run; see sink_test.go for runs.)
func Example_exactlyOnce() {
	sink := postgres.New(postgres.Config{
		DSN: os.Getenv("PG_DSN"), Table: "events", Mode: postgres.ModeAppend,
		CreateTable: true, Pipeline: "generate-to-pg",
	})
	store := sink.Checkpoints() // rows and checkpoint commit together
	p := pipeline.New(pipeline.Config{Name: "generate-to-pg", MaxRecords: 20000},
		generate.New(generate.Config{Count: 100000}), encode.Envelope, sink, store)
	if err := p.Run(context.Background()); err != nil {
		panic(err)
	}
}
