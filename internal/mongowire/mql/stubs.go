package mql

import (
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/tide-cdc/tide/internal/mongowire/mongoerr"
)

func notImplemented(what string) error {
	return mongoerr.New(mongoerr.InternalError, "mql: %s not implemented", what)
}

// Update is a compiled update.
type Update struct{}

// ApplyOptions tune Update.Apply.
type ApplyOptions struct {
	Upsert          bool
	PositionalIndex int
	Now             time.Time
}

// CompileUpdate compiles an update.
func CompileUpdate(update bson.RawValue, arrayFilters []bson.Raw) (*Update, error) {
	return nil, notImplemented("update")
}

// IsReplacement reports whether u replaces the document.
func (u *Update) IsReplacement() bool { return false }

// Apply applies u to doc.
func (u *Update) Apply(doc bson.Raw, opts ApplyOptions) (bson.Raw, error) {
	return nil, notImplemented("update")
}

// Projection is a compiled projection.
type Projection struct{}

// CompileProjection compiles a projection.
func CompileProjection(p bson.Raw) (*Projection, error) { return &Projection{}, nil }

// Apply projects doc.
func (p *Projection) Apply(doc bson.Raw, positional int) (bson.Raw, error) { return doc, nil }

// Sort is a compiled sort specification.
type Sort struct{}

// CompileSort compiles a sort specification.
func CompileSort(s bson.Raw) (*Sort, error) { return &Sort{}, nil }

// Compare orders a and b by the sort.
func (s *Sort) Compare(a, b bson.Raw) int { return 0 }

// Env gives a pipeline access to the other collections of its database.
type Env interface {
	Collection(name string) ([]bson.Raw, error)
}

// Pipeline is a compiled aggregation pipeline.
type Pipeline struct{}

// CompilePipeline compiles an aggregation pipeline.
func CompilePipeline(stages []bson.Raw) (*Pipeline, error) { return nil, notImplemented("pipeline") }

// Run runs the pipeline over input.
func (p *Pipeline) Run(env Env, input []bson.Raw) ([]bson.Raw, error) {
	return nil, notImplemented("pipeline")
}

// Validate checks a document to be stored.
func Validate(doc bson.Raw, maxDepth int) error { return nil }
