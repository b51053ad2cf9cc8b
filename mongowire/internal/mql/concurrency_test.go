package mql

import (
	"fmt"
	"sync"
	"testing"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// Compiled values are shared by concurrent requests; run with -race.
func TestCompiledValuesAreSafeForConcurrentUse(t *testing.T) {
	t.Parallel()
	f, err := CompileFilter(doc(t, `{"a": {"$gt": 1}, "s": {"$regex": "^x"}, "$expr": {"$lt": ["$a", 100]}}`))
	if err != nil {
		t.Fatal(err)
	}
	u, err := CompileUpdate(val(t, `{"$inc": {"a": 1}, "$push": {"l": {"$each": [1], "$sort": -1}}}`), nil)
	if err != nil {
		t.Fatal(err)
	}
	p, err := CompilePipeline(stages(t, `[{"$match": {"a": {"$gte": 0}}}, {"$group": {"_id": "$s", "n": {"$sum": "$a"}}}, {"$sort": {"n": -1}}]`))
	if err != nil {
		t.Fatal(err)
	}
	in := docs(t, `{"a": 2, "s": "xy", "l": []}`, `{"a": 5, "s": "xz", "l": [3]}`, `{"a": 0, "s": "q"}`)
	var wg sync.WaitGroup
	errs := make(chan error, 8)
	for range 8 {
		wg.Go(func() {
			for range 200 {
				for _, d := range in {
					f.Match(d)
					if _, err := u.Apply(d, ApplyOptions{PositionalIndex: -1}); err != nil {
						errs <- err
						return
					}
				}
				out, err := p.Run(nil, in)
				if err != nil {
					errs <- err
					return
				}
				if len(out) != 3 {
					errs <- fmt.Errorf("got %d groups, want 3", len(out))
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
}
