package mql

import (
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/tide-cdc/tide/mongowire/internal/mongoerr"
)

// Env gives a pipeline the documents of the other collections of its
// database (for $lookup). A missing collection is empty, not an error.
type Env interface {
	Collection(name string) ([]bson.Raw, error)
}

// Pipeline is a compiled aggregation pipeline. It is safe for concurrent
// use.
type Pipeline struct {
	stages []stage
}

// stage is one compiled pipeline stage.
type stage interface {
	run(c *runCtx, in []bson.Raw) ([]bson.Raw, error)
}

type runCtx struct {
	env Env
	now time.Time
}

func (c *runCtx) eval(e *Expr, doc bson.Raw) (bson.RawValue, error) {
	return e.evalIn(&evalCtx{root: doc, current: doc, now: c.now})
}

// CompilePipeline compiles an aggregation pipeline. Stages and
// expressions this package does not implement are refused with an error
// naming them: 40324 "Unrecognized pipeline stage name: '$foo'", 168
// "Unrecognized expression '$foo'".
func CompilePipeline(stages []bson.Raw) (*Pipeline, error) {
	return compilePipeline(stages, false)
}

// compilePipeline compiles stages; inUpdate allows only the stages of an
// update pipeline.
func compilePipeline(stages []bson.Raw, inUpdate bool) (*Pipeline, error) {
	p := &Pipeline{}
	for _, s := range stages {
		if err := s.Validate(); err != nil {
			return nil, mongoerr.New(mongoerr.InvalidBSON, "invalid pipeline stage: %v", err)
		}
		it := iterDoc(s)
		k, v, ok := it.next()
		if _, _, more := it.next(); !ok || more {
			return nil, mongoerr.New(40323, "A pipeline stage specification object must contain exactly one field.")
		}
		name := string(k)
		op, ok := lookupOperator(pipelineStages, name)
		switch {
		case !ok:
			return nil, mongoerr.New(mongoerr.Location40324, "Unrecognized pipeline stage name: '%s'", name)
		case op.compile == nil:
			return nil, mongoerr.New(mongoerr.CommandNotSupported, "%s is not supported by this server", name)
		case inUpdate && !op.update:
			return nil, mongoerr.New(mongoerr.InvalidOptions, "%s is not allowed to be used within an update", name)
		}
		st, err := op.compile(name, v)
		if err != nil {
			return nil, err
		}
		p.stages = append(p.stages, st)
	}
	return p, nil
}

// Run runs the pipeline over input and returns the output documents.
// env may be nil when the pipeline has no $lookup.
func (p *Pipeline) Run(env Env, input []bson.Raw) ([]bson.Raw, error) {
	return p.run(env, input, time.Now())
}

func (p *Pipeline) run(env Env, input []bson.Raw, now time.Time) ([]bson.Raw, error) {
	c := &runCtx{env: env, now: now}
	docs := input
	for _, s := range p.stages {
		var err error
		docs, err = s.run(c, docs)
		if err != nil {
			return nil, err
		}
	}
	return docs, nil
}

// $addFields / $set
