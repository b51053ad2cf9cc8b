package status

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/tide-cdc/tide/cdc"
	"github.com/tide-cdc/tide/checkpoint"
	"github.com/tide-cdc/tide/encode"
	"github.com/tide-cdc/tide/pipeline"
	"github.com/tide-cdc/tide/source/generate"
)

type okSink struct{}

func (okSink) Open(context.Context, *cdc.Checkpoint) error  { return nil }
func (okSink) Put(context.Context, []cdc.Record) error      { return nil }
func (okSink) Commit(context.Context, cdc.Checkpoint) error { return nil }
func (okSink) Close() error                                 { return nil }

// everyFifth fails every fifth change.
type everyFifth struct{ n int }

func (e *everyFifth) Apply(ev *cdc.Event) (bool, error) {
	if strings.HasSuffix(string(ev.Pos), "5}") || strings.HasSuffix(string(ev.Pos), "0}") {
		return false, errors.New("poison at " + string(ev.Pos))
	}
	return true, nil
}

func TestAPIStatusCountsSkipped(t *testing.T) {
	srv, stop := serve(t, Config{Addr: "127.0.0.1:0"})
	defer stop()
	tr := NewTracker()
	p := pipeline.New(pipeline.Config{Name: "skipping", Observer: tr, Transform: &everyFifth{}, OnError: pipeline.OnErrorSkip},
		generate.New(generate.Config{Count: 20}), encode.Envelope, okSink{}, &checkpoint.Mem{})
	tr.Attach("skipping", p, nil, nil)
	srv.Add(tr)
	if err := p.Run(t.Context()); err != nil {
		t.Fatal(err)
	}
	base := "http://" + srv.Addr()
	var rep Report
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		rep = getStatus(t, base+"/api/status")
		if len(rep.Pipelines) == 1 && rep.Pipelines[0].Skipped == 4 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("/api/status: %+v", rep)
		}
	}
	if got := rep.Pipelines[0]; got.DeadLetters != 0 || got.EventsOut != 16 || got.DeadLetterError != `transform: poison at {"seq":20}` {
		t.Fatalf("status %+v", got)
	}
}
