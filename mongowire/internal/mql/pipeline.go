package mql

import (
	"errors"
	"os"
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
	names  []string   // the stages' names, for errors
	builds bool       // some stage makes new documents (not only selects or orders)
	coll   *Collation // its expressions and group keys compare under it (nil: binary)
}

// A stage is one compiled pipeline stage, in one of three shapes:
//
//   - a streamStage turns each input document into zero or more output
//     documents on its own ($match, $project, $unwind, $lookup, ...);
//   - a procStage keeps state across the documents of one run ($limit,
//     $count, $sort and $group, which spill to disk);
//   - a blockingStage needs its whole input at once ($bucket,
//     $setWindowFields, $facet, ...): the run buffers it, within the
//     per-stage memory limit.
//
// A run passes documents down the stages one at a time, so that only
// what blocking stages hold stays in memory.
type stage any

type streamStage interface {
	each(c *runCtx, d bson.Raw, emit func(bson.Raw) error) error
}

type procStage interface {
	newProc(c *runCtx, at stageAt, next proc) proc
}

// stageAt is where a stage runs in its pipeline.
type stageAt struct {
	name  string // "$group"
	built bool   // an earlier stage builds documents: the input is the pipeline's own
	count int    // how many documents the stage will get, if known; else 0

	// replay, when only $match stages come before, passes the stage again
	// the documents it has got so far, from the pipeline's input: a
	// stage that must spill what it has folded need not keep them.
	replay func(emit func(bson.Raw) error) error
}

type blockingStage interface {
	run(c *runCtx, in []bson.Raw) ([]bson.Raw, error)
}

// proc is a stage of a running pipeline. push gives it one document;
// end says its input is over, and it then passes on what it holds and
// ends the next proc. push returns errEnough when the proc wants no more
// input ($limit reached): the caller stops pushing and calls end.
type proc interface {
	push(d bson.Raw) error
	end() error
}

var errEnough = errors.New("mql: enough input")

// feed pushes docs into p until p has enough, then ends it.
func feed(p proc, docs []bson.Raw) error {
	for _, d := range docs {
		if err := p.push(d); err == errEnough {
			break
		} else if err != nil {
			return err
		}
	}
	return p.end()
}

type runCtx struct {
	coll    *Collation // nil: binary
	env     Env
	now     time.Time
	lim     *Limits
	mem     *memory
	cleanup []func() // spill files to remove when the run ends
}

func newRunCtx(env Env, now time.Time, lim Limits) *runCtx {
	return &runCtx{env: env, now: now, lim: &lim, mem: &memory{budget: lim.Budget}}
}

// close releases what the run holds: its share of the budget, its spill
// files.
func (c *runCtx) close() {
	c.mem.shrink(c.mem.held)
	for _, f := range c.cleanup {
		f()
	}
	c.cleanup = nil
}

func (c *runCtx) tempDir() string {
	if c.lim.TempDir != "" {
		return c.lim.TempDir
	}
	return os.TempDir()
}

func (c *runCtx) eval(e *Expr, doc bson.Raw) (bson.RawValue, error) {
	return e.evalIn(&evalCtx{root: doc, current: doc, now: c.now, coll: c.coll})
}

// CompilePipeline compiles an aggregation pipeline. Stages and
// expressions this package does not implement are refused with an error
// naming them: 40324 "Unrecognized pipeline stage name: '$foo'", 168
// "Unrecognized expression '$foo'".
func CompilePipeline(stages []bson.Raw) (*Pipeline, error) {
	return compilePipeline(stages, false)
}

// selecting are the stages whose output documents are input documents.
var selecting = map[string]bool{"$match": true, "$sort": true, "$limit": true, "$skip": true, "$sample": true}

// oneToOne are the stages that output one document per input document.
var oneToOne = map[string]bool{
	"$addFields": true, "$graphLookup": true, "$lookup": true, "$project": true, "$replaceRoot": true,
	"$replaceWith": true, "$set": true, "$setWindowFields": true, "$sort": true, "$unset": true,
}

// countAfter returns how many documents stage i of p gets from n input
// documents, when the stages before it tell (0 when they do not).
func (p *Pipeline) countAfter(i, n int) int {
	for _, name := range p.names[:i] {
		if !oneToOne[name] {
			return 0
		}
	}
	return n
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
		if l, ok := st.(limitStage); ok && len(p.stages) > 0 {
			if s, ok := p.stages[len(p.stages)-1].(sortStage); ok && (s.limit == 0 || int64(l) < s.limit) {
				s.limit = int64(l)
				p.stages[len(p.stages)-1] = s
			}
		}
		p.stages = append(p.stages, st)
		p.names = append(p.names, name)
		p.builds = p.builds || !selecting[name]
	}
	return p, nil
}

// Run runs the pipeline over input and returns the output documents,
// with mongod's default limits and no server budget. env may be nil when
// the pipeline has no $lookup.
func (p *Pipeline) Run(env Env, input []bson.Raw) ([]bson.Raw, error) {
	return p.RunLimited(env, input, Limits{})
}

// RunLimited is Run within lim: a blocking stage past lim.StageBytes
// spills to disk or fails with 292, a $lookup gathering more than
// lim.LookupBytes for one document fails with 4568, and what the run
// holds (buffered documents, $lookup matches, the documents of the
// result it builds) is reserved from lim.Budget until it returns.
func (p *Pipeline) RunLimited(env Env, input []bson.Raw, lim Limits) ([]bson.Raw, error) {
	c := newRunCtx(env, time.Now(), lim)
	c.coll = p.coll
	defer c.close()
	return p.collect(c, input)
}

// run runs an update pipeline over one document, with the default limits.
func (p *Pipeline) run(env Env, input []bson.Raw, now time.Time) ([]bson.Raw, error) {
	c := newRunCtx(env, now, Limits{})
	defer c.close()
	return p.collect(c, input)
}

// collect runs the pipeline within c and returns its output; the output
// documents the pipeline built are reserved from the budget.
func (p *Pipeline) collect(c *runCtx, input []bson.Raw) ([]bson.Raw, error) {
	cp := &collectProc{c: c, charge: p.builds, hint: p.countAfter(len(p.stages), len(input))}
	if err := p.streamTo(c, input, cp); err != nil {
		return nil, err
	}
	return cp.out, nil
}

// collectProc gathers a pipeline's output.
type collectProc struct {
	c      *runCtx
	charge bool // reserve the documents from the budget: the pipeline built them
	hint   int  // how many documents to expect, if known
	out    []bson.Raw
}

func (p *collectProc) push(d bson.Raw) error {
	if p.charge {
		if err := p.c.mem.grow(int64(len(d)) + docOverhead); err != nil {
			return err
		}
	}
	if p.out == nil {
		p.out = make([]bson.Raw, 0, p.hint)
	}
	p.out = append(p.out, d)
	return nil
}

func (p *collectProc) end() error { return nil }

// take makes docs the output, if nothing came before them: a last
// blocking stage hands over its result instead of pushing it.
func (p *collectProc) take(docs []bson.Raw) (bool, error) {
	if p.out != nil {
		return false, nil
	}
	if p.charge {
		var n int64
		for _, d := range docs {
			n += int64(len(d)) + docOverhead
		}
		if err := p.c.mem.grow(n); err != nil {
			return false, err
		}
	}
	p.out = docs
	return true, nil
}

// stream runs the pipeline within c, passing each output document to out.
func (p *Pipeline) stream(c *runCtx, input []bson.Raw, out func(bson.Raw) error) error {
	return p.streamTo(c, input, funcProc(out))
}

// streamTo runs the pipeline within c into the proc next.
func (p *Pipeline) streamTo(c *runCtx, input []bson.Raw, next proc) error {
	pos := 0 // the input document being fed
	for i := len(p.stages) - 1; i >= 0; i-- {
		at := stageAt{name: p.names[i], count: p.countAfter(i, len(input))}
		for _, n := range p.names[:i] {
			at.built = at.built || !selecting[n]
		}
		if matches, ok := p.matchesBefore(i); ok {
			at.replay = func(emit func(bson.Raw) error) error {
				for _, d := range input[:pos+1] {
					if matchAll(matches, d) {
						if err := emit(d); err != nil {
							return err
						}
					}
				}
				return nil
			}
		}
		next = newProc(c, at, p.stages[i], next)
	}
	for ; pos < len(input); pos++ {
		if err := next.push(input[pos]); err == errEnough {
			break
		} else if err != nil {
			return err
		}
	}
	return next.end()
}

// matchesBefore returns the stages before stage i if all are $match.
func (p *Pipeline) matchesBefore(i int) ([]matchStage, bool) {
	ms := make([]matchStage, 0, i)
	for _, st := range p.stages[:i] {
		m, ok := st.(matchStage)
		if !ok {
			return nil, false
		}
		ms = append(ms, m)
	}
	return ms, true
}

func matchAll(ms []matchStage, d bson.Raw) bool {
	for _, m := range ms {
		if !m.f.Match(d) {
			return false
		}
	}
	return true
}

func newProc(c *runCtx, at stageAt, st stage, next proc) proc {
	switch st := st.(type) {
	case procStage:
		return st.newProc(c, at, next)
	case streamStage:
		return &streamProc{c: c, st: st, next: next}
	case blockingStage:
		return &bufferProc{c: c, name: at.name, st: st, next: next, buf: make([]bson.Raw, 0, at.count)}
	}
	panic("mql: stage of unknown shape")
}

// funcProc is the end of a pipeline: it hands documents to a function.
type funcProc func(bson.Raw) error

func (f funcProc) push(d bson.Raw) error { return f(d) }
func (f funcProc) end() error            { return nil }

type streamProc struct {
	c    *runCtx
	st   streamStage
	next proc
}

func (p *streamProc) push(d bson.Raw) error { return p.st.each(p.c, d, p.next.push) }
func (p *streamProc) end() error            { return p.next.end() }

// bufferProc gathers the input of a blocking stage, within the stage
// memory limit, and runs the stage when the input ends.
type bufferProc struct {
	c     *runCtx
	name  string
	st    blockingStage
	next  proc
	buf   []bson.Raw
	bytes int64
}

func (p *bufferProc) push(d bson.Raw) error {
	n := int64(len(d)) + docOverhead
	if p.bytes+n > p.c.lim.stageBytes() {
		return errStageMemory(p.name, p.c.lim.stageBytes(), p.c.lim.NoDiskUse)
	}
	if err := p.c.mem.grow(n); err != nil {
		return err
	}
	p.bytes += n
	p.buf = append(p.buf, d)
	return nil
}

func (p *bufferProc) end() error {
	out, err := p.st.run(p.c, p.buf)
	if err != nil {
		return err
	}
	p.buf = nil
	if cp, ok := p.next.(*collectProc); ok {
		if took, err := cp.take(out); took || err != nil {
			p.c.mem.shrink(p.bytes)
			p.bytes = 0
			return err
		}
	}
	err = feed(p.next, out)
	p.c.mem.shrink(p.bytes)
	p.bytes = 0
	return err
}
