package deadletter_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/tide-cdc/tide/cdc"
	"github.com/tide-cdc/tide/deadletter"
)

// A change set aside twice (its batch read again after a crash) is kept
// once, and reads back as the change the source handed out.
func ExampleOpenFile() {
	dir, err := os.MkdirTemp("", "letters")
	if err != nil {
		panic(err)
	}
	defer os.RemoveAll(dir)
	path := filepath.Join(dir, "dead-letters.jsonl")

	letter := cdc.DeadLetter{
		Event: cdc.Event{Pos: cdc.Position(`{"stream_seq":7}`), Op: cdc.OpInsert, Namespace: "orders.eu",
			Payload: []byte("not json"), PayloadFormat: cdc.PayloadString},
		Stage: "decode", Err: "invalid character 'o' in literal null", Time: time.Unix(1733300000, 0),
	}
	f, err := deadletter.OpenFile(path, "orders")
	if err != nil {
		panic(err)
	}
	for range 2 {
		if err := f.Write(context.Background(), []cdc.DeadLetter{letter}); err != nil {
			panic(err)
		}
	}
	f.Close()

	letters, err := deadletter.ReadFile(path)
	if err != nil {
		panic(err)
	}
	ev, err := letters[0].Event()
	if err != nil {
		panic(err)
	}
	fmt.Println(len(letters), letters[0].Stage, ev.Namespace, string(ev.Pos), string(ev.Payload))
	// Output: 1 decode orders.eu {"stream_seq":7} not json
}
