package mql

import (
	"math/rand/v2"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/tide-cdc/tide/mongowire/internal/mongoerr"
)

// Stages that select or order documents: $match, $sort, $limit, $skip,
// $sample.

// compileMatchStage compiles $match.
func compileMatchStage(name string, v bson.RawValue) (stage, error) {
	if v.Type != bson.TypeEmbeddedDocument {
		return nil, mongoerr.New(15959, "the match filter must be an expression in an object")
	}
	f, err := CompileFilter(v.Value)
	if err != nil {
		return nil, err
	}
	return matchStage{f}, nil
}

type matchStage struct{ f *Filter }

func (s matchStage) each(_ *runCtx, d bson.Raw, emit func(bson.Raw) error) error {
	if s.f.Match(d) {
		return emit(d)
	}
	return nil
}

// compileSortStage compiles $sort.
func compileSortStage(name string, v bson.RawValue) (stage, error) {
	if v.Type != bson.TypeEmbeddedDocument {
		return nil, mongoerr.New(15973, "the $sort key specification must be an object")
	}
	if arrayLen(v.Value) == 0 {
		return nil, mongoerr.New(15976, "$sort stage must have at least one sort key")
	}
	s, err := CompileSort(v.Value)
	if err != nil {
		return nil, err
	}
	return sortStage{s: s}, nil
}

// sortStage is $sort; limit > 0 when a $limit follows it, so that it
// keeps only the first limit documents (mongod's top-k sort).
type sortStage struct {
	s     *Sort
	limit int64
}

func (s sortStage) newProc(c *runCtx, at stageAt, next proc) proc {
	p := newSortProc(c, at.name, s, next)
	if n := at.count; n > 0 {
		if s.limit > 0 {
			n = int(min(int64(n), 2*s.limit+64))
		}
		p.buf.docs = make([]bson.Raw, 0, n)
	}
	return p
}

// compileLimitStage compiles $limit.
func compileLimitStage(name string, v bson.RawValue) (stage, error) {
	n, ok := integral(v)
	if !ok {
		return nil, mongoerr.New(15957, "the limit must be specified as a number")
	}
	if n <= 0 {
		return nil, mongoerr.New(15958, "the limit must be positive")
	}
	return limitStage(n), nil
}

type limitStage int64

func (s limitStage) newProc(_ *runCtx, _ stageAt, next proc) proc {
	return &limitProc{left: int64(s), next: next}
}

type limitProc struct {
	left int64
	next proc
}

func (p *limitProc) push(d bson.Raw) error {
	if p.left <= 0 {
		return errEnough
	}
	p.left--
	if err := p.next.push(d); err != nil {
		return err
	}
	if p.left == 0 {
		return errEnough
	}
	return nil
}

func (p *limitProc) end() error { return p.next.end() }

// compileSkipStage compiles $skip.
func compileSkipStage(name string, v bson.RawValue) (stage, error) {
	n, ok := integral(v)
	if !ok {
		return nil, mongoerr.New(15972, "Argument to $skip must be a number")
	}
	if n < 0 {
		return nil, mongoerr.New(15956, "Argument to $skip cannot be negative")
	}
	return skipStage(n), nil
}

type skipStage int64

func (s skipStage) newProc(_ *runCtx, _ stageAt, next proc) proc {
	return &skipProc{left: int64(s), next: next}
}

type skipProc struct {
	left int64
	next proc
}

func (p *skipProc) push(d bson.Raw) error {
	if p.left > 0 {
		p.left--
		return nil
	}
	return p.next.push(d)
}

func (p *skipProc) end() error { return p.next.end() }

// sampleStage returns up to size documents of its input chosen at
// random, in random order.
type sampleStage int64

func compileSample(v bson.RawValue) (stage, error) {
	if v.Type != bson.TypeEmbeddedDocument {
		return nil, mongoerr.New(28745, "the $sample stage specification must be an object")
	}
	size, hasSize := int64(0), false
	it := iterDoc(v.Value)
	for {
		k, arg, ok := it.next()
		if !ok {
			break
		}
		if string(k) != "size" {
			return nil, mongoerr.New(28748, "unrecognized option to $sample: %s", k)
		}
		if !isNumeric(arg.Type) {
			return nil, mongoerr.New(28746, "size argument to $sample must be a number")
		}
		n, _ := coerceInt64(arg)
		if n < 0 || asFloat(arg) < 0 {
			return nil, mongoerr.New(28747, "size argument to $sample must not be negative")
		}
		size, hasSize = n, true
	}
	if !hasSize {
		return nil, mongoerr.New(28749, "$sample stage must specify a size")
	}
	return sampleStage(size), nil
}

func (s sampleStage) run(_ *runCtx, in []bson.Raw) ([]bson.Raw, error) {
	out := append([]bson.Raw(nil), in...)
	k := min(int64(len(out)), int64(s))
	// A partial Fisher-Yates shuffle: the first k places get a uniform
	// random choice without replacement.
	for i := range k {
		j := i + rand.Int64N(int64(len(out))-i)
		out[i], out[j] = out[j], out[i]
	}
	return out[:k], nil
}
