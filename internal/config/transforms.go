package config

import (
	"errors"
	"fmt"
	"path/filepath"
	"strings"

	"go.yaml.in/yaml/v3"

	"github.com/tide-cdc/tide/internal/natsconn"
	"github.com/tide-cdc/tide/transform"
)

// Transform is one entry of transforms: exactly one key is set.
type Transform struct {
	Filter       *Filter   `yaml:"filter"`
	DropFields   []string  `yaml:"drop_fields"`
	KeepFields   []string  `yaml:"keep_fields"`
	RenameFields FieldList `yaml:"rename_fields"`
	MaskFields   FieldList `yaml:"mask_fields"`
	Set          FieldList `yaml:"set"`
	Route        Expr      `yaml:"route"`
}

// Filter is the filter transform.
type Filter struct {
	Ops        []string `yaml:"ops"`
	Namespaces []string `yaml:"namespaces"`
	Where      Expr     `yaml:"where"`
}

// Expr is a CEL expression, with where it was written, so that an error
// inside it names the file's line.
type Expr struct {
	Text string
	pos  exprPos
}

// exprPos is where an expression's text begins in the file.
type exprPos struct {
	line  int  // the line of the value
	block bool // a | or > block: the text begins on the next line
}

func posOf(n *yaml.Node) exprPos {
	return exprPos{line: n.Line, block: n.Style&(yaml.LiteralStyle|yaml.FoldedStyle) != 0}
}

// fileLine is the file's line of line l (from 1) of the expression.
func (p exprPos) fileLine(l int) int {
	if p.block {
		return p.line + l
	}
	return p.line + l - 1
}

func (e *Expr) UnmarshalYAML(n *yaml.Node) error {
	if n.Kind != yaml.ScalarNode {
		return fmt.Errorf("expected an expression, a string, got %s", kindName(n))
	}
	e.Text, e.pos = n.Value, posOf(n)
	return nil
}

// FieldList is a mapping of field paths to settings that keeps the
// order it was written in: set's expressions run in that order.
type FieldList []FieldEntry

// FieldEntry is one field of a FieldList.
type FieldEntry struct {
	Path, Value string
	pos         exprPos
}

func (l *FieldList) UnmarshalYAML(n *yaml.Node) error {
	if n.Kind != yaml.MappingNode {
		return fmt.Errorf("expected a mapping of fields, got %s", kindName(n))
	}
	seen := map[string]bool{}
	list := FieldList{}
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, v := n.Content[i], n.Content[i+1]
		if v.Kind != yaml.ScalarNode {
			return fmt.Errorf("%s: expected a string, got %s", k.Value, kindName(v))
		}
		if seen[k.Value] {
			return fmt.Errorf("%s: duplicate key", k.Value)
		}
		seen[k.Value] = true
		list = append(list, FieldEntry{Path: k.Value, Value: v.Value, pos: posOf(v)})
	}
	*l = list
	return nil
}

// DeadLetter is where dead letters go when the sink does not keep them
// in its own transaction: exactly one key is set.
type DeadLetter struct {
	File *DeadLetterFile `yaml:"file"`
	NATS *DeadLetterNATS `yaml:"nats"`
}

// DeadLetterFile keeps dead letters in a JSON-lines file.
type DeadLetterFile struct {
	Path string `yaml:"path"` // required
}

// DeadLetterNATS publishes dead letters to a JetStream subject.
type DeadLetterNATS struct {
	Servers []string      `yaml:"servers" secret:"uri"` // required
	Subject string        `yaml:"subject"`              // required; a stream must capture it
	Auth    natsconn.Auth `yaml:"auth"`
	TLS     natsconn.TLS  `yaml:"tls"`
}

// Set reports whether a dead-letter destination is configured.
func (d DeadLetter) Set() bool { return d.File != nil || d.NATS != nil }

// Steps returns the transforms as package transform takes them.
func (p *Pipeline) Steps() []transform.Step {
	steps := make([]transform.Step, len(p.Transforms))
	for i, t := range p.Transforms {
		s := &steps[i]
		if t.Filter != nil {
			s.Filter = &transform.Filter{Ops: t.Filter.Ops, Namespaces: t.Filter.Namespaces, Where: t.Filter.Where.Text}
		}
		s.DropFields, s.KeepFields, s.Route = t.DropFields, t.KeepFields, t.Route.Text
		s.RenameFields, s.MaskFields, s.Set = t.RenameFields.fields(), t.MaskFields.fields(), t.Set.fields()
	}
	return steps
}

func (l FieldList) fields() []transform.Field {
	if l == nil {
		return nil
	}
	out := make([]transform.Field, len(l))
	for i, e := range l {
		out[i] = transform.Field{Path: e.Path, Value: e.Value}
	}
	return out
}

// exprAt returns where the expression at path (transforms[i].filter.where,
// transforms[i].set.FIELD, transforms[i].route) begins.
func (p *Pipeline) exprAt(path string) (exprPos, bool) {
	var i int
	var rest string
	if _, err := fmt.Sscanf(path, "transforms[%d].", &i); err != nil || i < 0 || i >= len(p.Transforms) {
		return exprPos{}, false
	}
	_, rest, _ = strings.Cut(path, "].")
	t := p.Transforms[i]
	switch {
	case rest == "filter.where" && t.Filter != nil:
		return t.Filter.Where.pos, true
	case rest == "route":
		return t.Route.pos, true
	case strings.HasPrefix(rest, "set."):
		for _, e := range t.Set {
			if e.Path == rest[len("set."):] {
				return e.pos, true
			}
		}
	}
	return exprPos{}, false
}

// transformErrors compiles the transforms, keeps the chain, and returns
// their problems: an expression's names the file's line of the error in
// it and its column.
func (p *Pipeline) transformErrors() []error {
	var errs []error
	if _, err := ParseOnError(p.OnError); err != nil {
		errs = append(errs, fmt.Errorf("on_error: %v", err))
	}
	switch {
	case p.DeadLetter.File != nil && p.DeadLetter.NATS != nil:
		errs = append(errs, errors.New("dead_letter: file and nats are set; set one"))
	case p.DeadLetter.File != nil && strings.TrimSpace(p.DeadLetter.File.Path) == "":
		errs = append(errs, errors.New("dead_letter.file.path: required"))
	case p.DeadLetter.File != nil && filepath.Clean(p.DeadLetter.File.Path) == ".":
		errs = append(errs, errors.New("dead_letter.file.path: names a directory, not a file"))
	case p.DeadLetter.NATS != nil:
		n := p.DeadLetter.NATS
		if len(n.Servers) == 0 {
			errs = append(errs, errors.New("dead_letter.nats.servers: required"))
		} else if err := natsconn.Validate(n.Servers, n.Auth, n.TLS); err != nil {
			errs = append(errs, prefixed("dead_letter.nats", err)...)
		}
		if n.Subject == "" {
			errs = append(errs, errors.New("dead_letter.nats.subject: required"))
		} else if !natsconn.ValidSubject(n.Subject) || strings.ContainsAny(n.Subject, "*>") {
			errs = append(errs, fmt.Errorf("dead_letter.nats.subject: %q is not a subject to publish to", n.Subject))
		}
	}
	keeper, keeps := p.Sink.Config.(deadLetterKeeper)
	switch {
	case p.OnError != "dead_letter" || p.Sink.Key == "":
	case keeps && p.DeadLetter.Set():
		errs = append(errs, fmt.Errorf("dead_letter: sink.%s keeps dead letters in its own transaction (exactly once); remove dead_letter", p.Sink.Key))
	case keeps:
		keeper.KeepDeadLetters()
	case !p.DeadLetter.Set():
		errs = append(errs, fmt.Errorf("on_error: dead_letter: sink.%s keeps no dead letters itself: set dead_letter: {file: {path: ...}} or {nats: {servers: [...], subject: ...}}", p.Sink.Key))
	}
	// A source's decode errors follow on_error, unless its own key says
	// otherwise.
	if d, ok := p.Source.Config.(decodeErrorsToPipeline); ok && p.OnError != "" {
		if _, own := p.lines["source."+p.Source.Key+".on_decode_error"]; !own {
			d.DecodeErrorsToPipeline()
		}
	}
	if p.OnError != "dead_letter" && p.DeadLetter.Set() {
		errs = append(errs, fmt.Errorf("dead_letter: set, but on_error is %q: set on_error: dead_letter, or remove dead_letter", p.OnErrorOrDefault()))
	}
	if len(p.Transforms) == 0 {
		p.Chain = nil
		return errs
	}
	chain, err := transform.Compile(p.Steps(), transform.Options{MaskKey: []byte(p.MaskKey)})
	if err == nil {
		p.Chain = chain
		return errs
	}
	for _, e := range unjoin(err) {
		var te *transform.Error
		var ee *transform.ExprError
		if !errors.As(e, &te) {
			errs = append(errs, e)
			continue
		}
		if te.Err.Error() == "hash needs mask_key" && strings.TrimSpace(p.MaskKey) == "" {
			errs = append(errs, fmt.Errorf("%s: hash needs mask_key, the key of its HMAC: set mask_key (from the environment: mask_key: ${TIDE_MASK_KEY})", te.Path))
			continue
		}
		if errors.As(te.Err, &ee) {
			if pos, ok := p.exprAt(te.Path); ok && p.lines != nil {
				// Named at the file's line of the error, inside the
				// expression, and its column there.
				errs = append(errs, &exprLineError{pos.fileLine(ee.Line), fmt.Errorf("%s: column %d: %s", te.Path, ee.Column, ee.Msg)})
				continue
			}
		}
		errs = append(errs, te)
	}
	return errs
}

// OnErrorOrDefault is on_error, or fail where the file sets none.
func (p *Pipeline) OnErrorOrDefault() string {
	if p.OnError == "" {
		return "fail"
	}
	return p.OnError
}

// ParseOnError checks on_error's value.
func ParseOnError(s string) (string, error) {
	switch s {
	case "", "fail", "skip", "dead_letter":
		return s, nil
	}
	return "", fmt.Errorf("%q is not one of fail, skip, dead_letter", s)
}

// exprLineError is an error inside an expression, with the file's line
// of the error rather than of the expression's key.
type exprLineError struct {
	line int
	err  error
}

func (e *exprLineError) Error() string { return e.err.Error() }
func (e *exprLineError) Unwrap() error { return e.err }

// deadLetterKeeper is a sink Config whose sink keeps dead letters in its
// own transaction (a cdc.DeadLetterSink): on_error: dead_letter needs no
// dead_letter store with it, and switches it on with KeepDeadLetters
// (the MongoDB sink's refused documents go there too).
type deadLetterKeeper interface{ KeepDeadLetters() }

// decodeErrorsToPipeline is a source Config whose decode errors can be
// handed to the pipeline's on_error.
type decodeErrorsToPipeline interface{ DecodeErrorsToPipeline() }
