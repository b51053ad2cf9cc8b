package tide

import (
	"context"
	"errors"
	"fmt"
	"log/slog"

	"github.com/tide-cdc/tide/cdc"
	"github.com/tide-cdc/tide/deadletter"
	"github.com/tide-cdc/tide/pipeline"
	"github.com/tide-cdc/tide/transform"
)

// transforms compiles the file's transforms and Options.Transforms into
// one chain; nil when there are none.
func (s *Spec) transforms() (*transform.Chain, error) {
	if len(s.cfg.Transforms) == 0 && len(s.opts.Transforms) == 0 {
		return nil, nil
	}
	if len(s.opts.Transforms) == 0 {
		return s.cfg.Chain, nil // compiled by Parse
	}
	steps := append(s.cfg.Steps(), s.opts.Transforms...)
	chain, err := transform.Compile(steps, transform.Options{MaskKey: []byte(s.cfg.MaskKey)})
	if err != nil {
		return nil, fmt.Errorf("transforms: %w", err)
	}
	return chain, nil
}

// deadLetters opens the dead-letter store of on_error: dead_letter, for a
// sink that does not keep dead letters in its own transaction; it is
// closed with the pipeline.
func (s *Spec) deadLetters(ctx context.Context, sink cdc.Sink, env *Env) (cdc.DeadLetterStore, error) {
	if s.OnError != "dead_letter" {
		return nil, nil
	}
	dl := s.cfg.DeadLetter
	if _, ok := sink.(cdc.DeadLetterSink); ok {
		if dl.Set() {
			return nil, fmt.Errorf("dead_letter: sink.%s keeps dead letters in its own transaction (exactly once); remove dead_letter", s.Sink.Key)
		}
		return nil, nil
	}
	switch {
	case dl.File != nil:
		f, err := deadletter.OpenFile(dl.File.Path, s.Name)
		if err != nil {
			return nil, err
		}
		env.OnClose(f.Close)
		return f, nil
	case dl.NATS != nil:
		n, err := deadletter.OpenNATS(s.deadLetterNATS(env))
		if err != nil {
			return nil, err
		}
		env.OnClose(n.Close)
		return n, nil
	}
	return nil, fmt.Errorf("on_error: dead_letter: sink.%s keeps no dead letters itself: set dead_letter: {file: {path: ...}} or {nats: {servers: [...], subject: ...}}", s.Sink.Key)
}

func (s *Spec) deadLetterNATS(env *Env) deadletter.NATSConfig {
	n := s.cfg.DeadLetter.NATS
	c := deadletter.NATSConfig{Pipeline: s.Name, Servers: n.Servers, Subject: n.Subject, Auth: n.Auth, TLS: n.TLS}
	if env != nil {
		c.Logger = env.Logger
	}
	return c
}

// DeadLetters returns the letters in the pipeline's dead-letter store
// (dead_letter: file or nats, or the sink's own table where its Config
// can read it: the PostgreSQL sink's tide_dead_letters), oldest first.
func (s *Spec) DeadLetters(ctx context.Context) ([]deadletter.Letter, error) {
	dl := s.cfg.DeadLetter
	switch {
	case dl.File != nil:
		return deadletter.ReadFile(dl.File.Path)
	case dl.NATS != nil:
		return deadletter.ReadNATS(ctx, s.deadLetterNATS(nil))
	}
	if _, ok := s.Sink.Config.(DeadLetterReader); ok {
		// A copy: preparing it (uri: embedded starts the server) must
		// not change the Spec's.
		cfg := cloneConfig(s.Sink.Config)
		env := &Env{Pipeline: s.Name, DataDir: s.DataDir, Logger: slog.New(slog.DiscardHandler)}
		defer env.close()
		if c := lookup(registry.sinks, s.Sink.Key); c.prepare != nil {
			if err := c.prepare(ctx, cfg, env); err != nil {
				return nil, s.secrets.Error(err)
			}
		}
		ds, err := cfg.(DeadLetterReader).ReadDeadLetters(ctx, s.Name)
		if err != nil {
			return nil, s.secrets.Error(err)
		}
		out := make([]deadletter.Letter, 0, len(ds))
		for _, d := range ds {
			l, err := deadletter.New(s.Name, d)
			if err != nil {
				return nil, err
			}
			out = append(out, l)
		}
		return out, nil
	}
	return nil, fmt.Errorf("the pipeline file sets no dead_letter store (file or nats) to read, and sink.%s cannot list its own", s.Sink.Key)
}

// A DeadLetterReader is a sink's Config that reads the dead letters its
// sink keeps (the PostgreSQL sink's tide_dead_letters), for `tide
// dead-letters`.
type DeadLetterReader interface {
	ReadDeadLetters(ctx context.Context, pipeline string) ([]cdc.DeadLetter, error)
}

// BuildReplay builds a pipeline that sends letters (from DeadLetters)
// through the pipeline's transforms, encoding and sink again, after a
// fix: in one batch, with on_error: fail, and with the checkpoint left
// where it was. The pipeline must have a checkpoint, and must not be
// running: the data directory's lock is taken as Build takes it.
func (s *Spec) BuildReplay(ctx context.Context, letters []deadletter.Letter) (*Pipeline, error) {
	if len(letters) == 0 {
		return nil, errors.New("no dead letters to replay")
	}
	return s.build(ctx, "", letters)
}

// replaySource hands out the changes of dead letters, each at its own
// position, then a marker at the restored checkpoint's position, so that
// the batch's checkpoint is the one there was.
type replaySource struct {
	events   []cdc.Event
	restored *cdc.Checkpoint
	done     bool
	ready    chan struct{}
}

func newReplaySource(letters []deadletter.Letter) (*replaySource, error) {
	r := &replaySource{ready: make(chan struct{})}
	close(r.ready)
	for i := range letters {
		ev, err := letters[i].Event()
		if err != nil {
			return nil, err
		}
		r.events = append(r.events, ev)
	}
	return r, nil
}

func (r *replaySource) Open(_ context.Context, restored *cdc.Checkpoint) error {
	if restored == nil || restored.Source == nil {
		return errors.New("replay: the pipeline has no checkpoint yet; a replay leaves the checkpoint where it is, so run the pipeline first")
	}
	r.restored = restored
	r.events = append(r.events, cdc.Event{Pos: restored.Source, Op: cdc.OpMarker})
	return nil
}

func (r *replaySource) Poll(_ context.Context, buf []cdc.Event, max int) ([]cdc.Event, error) {
	n := min(max, len(r.events))
	buf = append(buf, r.events[:n]...)
	r.events = r.events[n:]
	if len(r.events) == 0 {
		return buf, cdc.ErrEnd
	}
	return buf, nil
}

func (r *replaySource) Ready() <-chan struct{} { return r.ready }

// Identity is the restored checkpoint's, which the saved one keeps.
func (r *replaySource) Identity() map[string]string {
	if r.restored == nil {
		return nil
	}
	return r.restored.Meta
}

func (r *replaySource) Close() error { return nil }

// replayTransform runs chain on the replayed changes, but for those a
// sink refused: they were transformed already.
func replayTransform(chain *transform.Chain, letters []deadletter.Letter) pipeline.Transformer {
	done := map[string]bool{}
	for _, l := range letters {
		if l.Stage == "sink" {
			done[string(l.Position)] = true
		}
	}
	return transformerFunc(func(ev *cdc.Event) (bool, error) {
		if done[string(ev.Pos)] {
			return true, nil
		}
		return chain.Apply(ev)
	})
}

type transformerFunc func(ev *cdc.Event) (bool, error)

func (f transformerFunc) Apply(ev *cdc.Event) (bool, error) { return f(ev) }
