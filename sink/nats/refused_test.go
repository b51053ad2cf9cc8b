package nats_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/tide-cdc/tide/cdc"
	"github.com/tide-cdc/tide/checkpoint"
	"github.com/tide-cdc/tide/internal/testenv"
	"github.com/tide-cdc/tide/pipeline"
	natssink "github.com/tide-cdc/tide/sink/nats"
)

// bigSource hands out count inserts; those whose seq is a multiple of
// 25 have a payload over the server's max_payload.
type bigSource struct {
	count, next int
	ready       chan struct{}
}

func (s *bigSource) Open(context.Context, *cdc.Checkpoint) error {
	s.ready = make(chan struct{})
	close(s.ready)
	return nil
}

func (s *bigSource) Poll(_ context.Context, buf []cdc.Event, max int) ([]cdc.Event, error) {
	for ; s.next < s.count && max > 0; max-- {
		s.next++
		size := 16
		if s.next%25 == 0 {
			size = 4096
		}
		buf = append(buf, cdc.Event{Pos: cdc.Position(fmt.Sprintf(`{"seq":%d}`, s.next)), Op: cdc.OpInsert, Namespace: "shop.orders",
			PayloadFormat: cdc.PayloadString, Payload: []byte(strings.Repeat("x", size))})
	}
	if s.next == s.count {
		return buf, cdc.ErrEnd
	}
	return buf, nil
}

func (s *bigSource) Ready() <-chan struct{} { return s.ready }
func (s *bigSource) Close() error           { return nil }

type letterStore struct {
	mu      sync.Mutex
	letters []cdc.DeadLetter
}

func (l *letterStore) Write(_ context.Context, ls []cdc.DeadLetter) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.letters = append(l.letters, ls...)
	return nil
}
func (l *letterStore) Close() error { return nil }

// TestMaxPayloadSetAside: a record over the server's max_payload is
// refused; with on_error dead_letter it is set aside, and every other
// record is in the stream once, in order; with fail, the pipeline stops.
func TestMaxPayloadSetAside(t *testing.T) {
	srv := testenv.NATSWithOptions(t, &server.Options{MaxPayload: 2048})
	for _, onError := range []pipeline.OnError{pipeline.OnErrorDeadLetter, pipeline.OnErrorFail} {
		t.Run(onError.String(), func(t *testing.T) {
			stream := "BIG_" + strings.ToUpper(onError.String())
			sink := natssink.New(natssink.Config{
				Pipeline: "big", Servers: []string{srv.ClientURL()}, Subject: strings.ToLower(stream) + ".{db}.{coll}",
				Stream: stream, CreateStream: &natssink.StreamSpec{Subjects: []string{strings.ToLower(stream) + ".>"}},
			})
			letters := &letterStore{}
			p := pipeline.New(pipeline.Config{Name: "big", MaxRecords: 40, OnError: onError, DeadLetters: letters},
				&bigSource{count: 100}, func(dst []byte, ev *cdc.Event) ([]byte, error) { return append(dst, ev.Payload...), nil }, sink, &checkpoint.Mem{})
			ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
			defer cancel()
			err := p.Run(ctx)
			if onError == pipeline.OnErrorFail {
				if !errors.Is(err, cdc.ErrRefused) || !errors.Is(err, nats.ErrMaxPayload) {
					t.Fatalf("Run = %v, want the refusal", err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if len(letters.letters) != 4 || string(letters.letters[0].Event.Pos) != `{"seq":25}` || letters.letters[0].Stage != "sink" {
				t.Fatalf("letters = %+v", letters.letters)
			}
			nc, err := nats.Connect(srv.ClientURL())
			if err != nil {
				t.Fatal(err)
			}
			defer nc.Close()
			js, _ := jetstream.New(nc)
			st, err := js.Stream(ctx, stream)
			if err != nil {
				t.Fatal(err)
			}
			info, err := st.Info(ctx)
			if err != nil {
				t.Fatal(err)
			}
			if info.State.Msgs != 96 {
				t.Fatalf("stream holds %d messages, want 96 (each once)", info.State.Msgs)
			}
		})
	}
}
