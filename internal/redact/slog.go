package redact

import (
	"context"
	"fmt"
	"log/slog"
)

// Handler wraps h so that every record's message and attributes (in
// groups too, and those added by WithAttrs) are redacted by set before h
// sees them. Errors, Stringers and other values are rendered to text
// first when their text holds a secret. A nil set hides what String
// hides.
func Handler(h slog.Handler, set *Set) slog.Handler {
	if rh, ok := h.(*handler); ok && rh.set == set {
		return h
	}
	return &handler{next: h, set: set}
}

// Logger returns log with its handler wrapped by Handler.
func Logger(log *slog.Logger, set *Set) *slog.Logger {
	return slog.New(Handler(log.Handler(), set))
}

type handler struct {
	next slog.Handler
	set  *Set
}

func (h *handler) Enabled(ctx context.Context, l slog.Level) bool { return h.next.Enabled(ctx, l) }

func (h *handler) Handle(ctx context.Context, r slog.Record) error {
	out := slog.NewRecord(r.Time, r.Level, h.set.String(r.Message), r.PC)
	r.Attrs(func(a slog.Attr) bool {
		out.AddAttrs(h.attr(a))
		return true
	})
	return h.next.Handle(ctx, out)
}

func (h *handler) WithAttrs(as []slog.Attr) slog.Handler {
	red := make([]slog.Attr, len(as))
	for i, a := range as {
		red[i] = h.attr(a)
	}
	return &handler{next: h.next.WithAttrs(red), set: h.set}
}

func (h *handler) WithGroup(name string) slog.Handler {
	return &handler{next: h.next.WithGroup(name), set: h.set}
}

// attr returns a with its value redacted.
func (h *handler) attr(a slog.Attr) slog.Attr {
	v := a.Value.Resolve()
	switch v.Kind() {
	case slog.KindString:
		return slog.String(a.Key, h.set.String(v.String()))
	case slog.KindGroup:
		g := v.Group()
		red := make([]any, len(g))
		for i, x := range g {
			red[i] = h.attr(x)
		}
		return slog.Group(a.Key, red...)
	case slog.KindAny:
		text := fmt.Sprint(v.Any()) // an error's Error, a Stringer's String; fmt recovers their panics
		if red := h.set.String(text); red != text {
			return slog.String(a.Key, red)
		}
	}
	return slog.Attr{Key: a.Key, Value: v}
}
