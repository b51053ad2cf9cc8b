package generate_test

import (
	"context"
	"errors"
	"fmt"

	"github.com/tide-cdc/tide/cdc"
	"github.com/tide-cdc/tide/source/generate"
)

// The generate source makes synthetic inserts into gen.events; with a
// count it ends with cdc.ErrEnd, and a restored position resumes after it.
func Example() {
	src := generate.New(generate.Config{Count: 3})
	if err := src.Open(context.Background(), nil); err != nil {
		panic(err)
	}
	defer src.Close()
	var evs []cdc.Event
	for {
		var err error
		evs, err = src.Poll(context.Background(), evs, 10)
		if errors.Is(err, cdc.ErrEnd) {
			break
		}
		if err != nil {
			panic(err)
		}
	}
	for _, ev := range evs {
		fmt.Println(ev.Op, ev.Namespace, string(ev.Pos))
	}
	// Output:
	// insert gen.events {"seq":1}
	// insert gen.events {"seq":2}
	// insert gen.events {"seq":3}
}
