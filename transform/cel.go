package transform

import (
	"errors"
	"fmt"
	"math"
	"strings"
	"sync"
	"time"

	"github.com/google/cel-go/cel"
	"github.com/google/cel-go/checker"
	"github.com/google/cel-go/common/types"
	"github.com/google/cel-go/common/types/ref"
	"github.com/google/cel-go/ext"
	"github.com/google/cel-go/interpreter"
	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/tide-cdc/tide/cdc"
)

// DefaultCostLimit bounds the cost of one evaluation of an expression,
// in CEL's cost units (about one per operation): an expression that may
// never finish under it is refused when it is compiled, and one that
// exceeds it on a change fails on that change.
const DefaultCostLimit = 100_000

// The variables of an expression. Their types are dyn where a change may
// give null (a delete has no doc), so that a comparison with null checks.
var variables = []cel.EnvOption{
	cel.Variable("op", cel.StringType),
	cel.Variable("ns", cel.MapType(cel.StringType, cel.StringType)),
	cel.Variable("key", cel.DynType),
	cel.Variable("doc", cel.DynType),
	cel.Variable("before", cel.DynType),
	cel.Variable("update", cel.DynType),
	cel.Variable("cluster_time", cel.TimestampType),
	cel.Variable("wall_time", cel.DynType),
	cel.Variable("subject", cel.StringType),
	cel.Variable("headers", cel.MapType(cel.StringType, cel.ListType(cel.StringType))),
	cel.Variable("payload", cel.DynType),
}

// cel-go v0.31 keeps a few runtime errors as shared values (no such
// overload, timestamp overflow), and its interpreter writes the node id
// of the expression that met one into that value the first time, from
// whichever encode worker gets there first: a data race. Labelling them
// once here, before any expression runs, leaves the interpreter only
// reading them. (The id is only used to place the error in the
// expression; the message names the transform and key all the same.)
func init() {
	types.LabelErrNode(-1, types.NoSuchOverloadErr())
	types.LabelErrNode(-1, types.Int(math.MaxInt64).ConvertToType(types.TimestampType))
}

// environment is the CEL environment every expression is checked in:
// the standard library and the string extensions, all deterministic.
// CEL has no clock; now() is an undeclared function, refused at compile.
var environment = sync.OnceValues(func() (*cel.Env, error) {
	opts := append([]cel.EnvOption{ext.Strings(), ext.Encoders(), ext.Math()}, variables...)
	return cel.NewEnv(opts...)
})

// expr is a compiled expression.
type expr struct {
	text string
	prg  cel.Program
}

// ExprError is an expression that does not compile: Line and Column (from
// 1) are inside the expression's text.
type ExprError struct {
	Line, Column int
	Msg          string
}

func (e *ExprError) Error() string {
	return fmt.Sprintf("line %d, column %d of the expression: %s", e.Line, e.Column, e.Msg)
}

// compileExpr parses and type-checks text; want, if not dyn, is the type
// its result must have.
func compileExpr(text string, want *cel.Type, costLimit uint64) (*expr, error) {
	env, err := environment()
	if err != nil {
		return nil, err
	}
	if strings.TrimSpace(text) == "" {
		return nil, errors.New("empty expression")
	}
	ast, iss := env.Compile(text)
	if iss.Err() != nil {
		e := iss.Errors()[0]
		msg := strings.TrimSuffix(e.Message, " (in container '')")
		if strings.Contains(msg, "undeclared reference to 'now'") {
			msg += " (a transform is deterministic, so that a replay writes the same bytes: there is no clock; use cluster_time or wall_time)"
		}
		return nil, &ExprError{Line: e.Location.Line(), Column: e.Location.Column() + 1, Msg: msg}
	}
	if out := ast.OutputType(); want != nil && !out.IsExactType(cel.DynType) && !out.IsAssignableType(want) {
		return nil, &ExprError{Line: 1, Column: 1, Msg: fmt.Sprintf("the expression gives %s; want %s", out, want)}
	}
	est, err := env.EstimateCost(ast, sizes{})
	if err != nil {
		return nil, fmt.Errorf("estimate cost: %w", err)
	}
	if est.Min > costLimit {
		return nil, &ExprError{Line: 1, Column: 1, Msg: fmt.Sprintf("the expression costs at least %d, over the limit of %d", est.Min, costLimit)}
	}
	opts := []cel.ProgramOption{cel.EvalOptions(cel.OptOptimize)}
	if est.Max > costLimit {
		// Its cost depends on the change (a comprehension over a list of
		// the document): tracked as it runs, and stopped at the limit.
		// One whose most expensive run is under the limit runs without
		// the tracking, which costs a third of a simple expression's time.
		opts = append(opts, cel.CostLimit(costLimit))
	}
	prg, err := env.Program(ast, opts...)
	if err != nil {
		return nil, err
	}
	return &expr{text: text, prg: prg}, nil
}

// sizes has no size estimates of its own: CEL's defaults apply.
type sizes struct{}

func (sizes) EstimateSize(checker.AstNode) *checker.SizeEstimate { return nil }
func (sizes) EstimateCallCost(string, string, *checker.AstNode, []checker.AstNode) *checker.CallEstimate {
	return nil
}

// eval evaluates e on ev.
func (e *expr) eval(ev *cdc.Event) (ref.Val, error) {
	out, _, err := e.prg.Eval(&activation{ev: ev})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// activation resolves the variables of one change, each when it is first
// read.
type activation struct {
	ev *cdc.Event
}

var _ interpreter.Activation = (*activation)(nil)

func (a *activation) Parent() interpreter.Activation { return nil }

func (a *activation) ResolveName(name string) (any, bool) {
	ev := a.ev
	switch name {
	case "op":
		return types.String(ev.Op), true
	case "ns":
		db, coll, ok := strings.Cut(ev.Namespace, ".")
		if !ok && ev.PayloadFormat != cdc.PayloadNone {
			db, coll = "", ev.Namespace
		}
		return types.NewStringStringMap(types.DefaultTypeAdapter, map[string]string{"db": db, "coll": coll}), true
	case "key":
		return docOrNull(ev.DocumentKey), true
	case "doc":
		return docOrNull(ev.FullDocument), true
	case "before":
		return docOrNull(ev.PreImage), true
	case "update":
		return docOrNull(ev.UpdateDesc), true
	case "cluster_time":
		return types.Timestamp{Time: time.Unix(int64(ev.ClusterTime.T), 0).UTC()}, true
	case "wall_time":
		if ev.WallTimeMS == 0 {
			return types.NullValue, true
		}
		return types.Timestamp{Time: time.UnixMilli(ev.WallTimeMS).UTC()}, true
	case "subject":
		if ev.PayloadFormat == cdc.PayloadNone {
			return types.String(""), true
		}
		return types.String(ev.Namespace), true
	case "headers":
		h := map[string][]string{}
		for k, v := range ev.Headers {
			h[k] = v
		}
		return types.NewDynamicMap(types.DefaultTypeAdapter, h), true
	case "payload":
		return payloadValue(ev), true
	}
	return nil, false
}

func docOrNull(doc []byte) ref.Val {
	if doc == nil {
		return types.NullValue
	}
	return docVal(doc)
}

// payloadValue is a message's payload: parsed JSON as BSON would be
// (integers are ints), the text of a string payload, the bytes of a
// binary one.
func payloadValue(ev *cdc.Event) ref.Val {
	switch ev.PayloadFormat {
	case cdc.PayloadJSON:
		if ev.FullDocument != nil { // parsed already (jsonDoc)
			return docVal(ev.FullDocument)
		}
		v, err := parseJSON(ev.Payload)
		if err != nil {
			return types.NewErr("payload: %v", err)
		}
		return celValue(v)
	case cdc.PayloadString:
		return types.String(ev.Payload)
	case cdc.PayloadBase64:
		return types.Bytes(ev.Payload)
	}
	return types.NullValue
}

// parseJSON reads a JSON value into BSON: integers become int32 or
// int64, other numbers doubles.
func parseJSON(text []byte) (bson.RawValue, error) {
	var doc bson.Raw
	wrapped := make([]byte, 0, len(text)+8)
	wrapped = append(wrapped, `{"v":`...)
	wrapped = append(wrapped, text...)
	wrapped = append(wrapped, '}')
	if err := bson.UnmarshalExtJSON(wrapped, false, &doc); err != nil {
		return bson.RawValue{}, fmt.Errorf("not JSON: %w", err)
	}
	return doc.Lookup("v"), nil
}
