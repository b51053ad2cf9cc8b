package cdc_test

import (
	"context"
	"errors"
	"fmt"
	"strconv"

	"github.com/tide-cdc/tide/cdc"
)

// lines is the smallest Source: a fixed list of payloads, each position
// its index; a restored position resumes after it.
type lines struct {
	payloads []string
	next     int
	ready    chan struct{}
}

func (l *lines) Open(_ context.Context, restored *cdc.Checkpoint) error {
	l.ready = make(chan struct{})
	close(l.ready)
	if restored != nil && restored.Source != nil {
		n, err := strconv.Atoi(string(restored.Source))
		if err != nil || n < 0 || n >= len(l.payloads) {
			return fmt.Errorf("lines: cannot seek to position %q", restored.Source) // never a silent restart
		}
		l.next = n + 1
	}
	return nil
}

func (l *lines) Poll(_ context.Context, buf []cdc.Event, max int) ([]cdc.Event, error) {
	for ; max > 0 && l.next < len(l.payloads); max-- {
		buf = append(buf, cdc.Event{
			Pos: cdc.Position(strconv.Itoa(l.next)), Op: cdc.OpInsert, Namespace: "example",
			Payload: []byte(l.payloads[l.next]), PayloadFormat: cdc.PayloadString,
		})
		l.next++
	}
	if l.next == len(l.payloads) {
		return buf, cdc.ErrEnd
	}
	return buf, nil
}

func (l *lines) Ready() <-chan struct{} { return l.ready }
func (l *lines) Close() error           { return nil }

// A Source hands out events in order with their positions, and resumes
// after a restored one.
func ExampleSource() {
	var src cdc.Source = &lines{payloads: []string{"a", "b", "c"}}
	restored := &cdc.Checkpoint{Source: cdc.Position("0")} // "a" was committed
	if err := src.Open(context.Background(), restored); err != nil {
		panic(err)
	}
	defer src.Close()
	evs, err := src.Poll(context.Background(), nil, 10)
	fmt.Println(len(evs), string(evs[0].Payload), string(evs[1].Payload), errors.Is(err, cdc.ErrEnd))
	// Output: 2 b c true
}
