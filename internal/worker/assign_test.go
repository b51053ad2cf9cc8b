package worker

import (
	"fmt"
	"maps"
	"testing"
)

func TestAssignBalancedAndDeterministic(t *testing.T) {
	var ps []string
	for i := range 10 {
		ps = append(ps, fmt.Sprintf("p%d", i))
	}
	a := Assign(ps, []string{"w1", "w2", "w3"})
	b := Assign([]string{"p9", "p8", "p7", "p6", "p5", "p4", "p3", "p2", "p1", "p0"}, []string{"w3", "w1", "w2"})
	if !maps.Equal(a, b) {
		t.Fatalf("the order of the inputs changed the assignment:\n%v\n%v", a, b)
	}
	load := map[string]int{}
	for _, w := range a {
		load[w]++
	}
	for w, n := range load {
		if n < 3 || n > 4 {
			t.Errorf("worker %s got %d of 10 pipelines over 3 workers, want 3 or 4: %v", w, n, a)
		}
	}
	if len(a) != 10 {
		t.Fatalf("assigned %d of 10 pipelines", len(a))
	}
	// A fourth worker joins: it takes some, and every other pipeline stays.
	c := Assign(ps, []string{"w1", "w2", "w3", "w4"})
	moved := 0
	for p, w := range c {
		if w != a[p] {
			moved++
			if w != "w4" {
				t.Errorf("%s moved from %s to %s, not to the new worker", p, a[p], w)
			}
		}
	}
	if moved < 2 || moved > 3 {
		t.Errorf("%d pipelines moved to the new worker, want 2 or 3", moved)
	}
	if got := Assign(ps, nil); len(got) != 0 {
		t.Errorf("no workers: got %v", got)
	}
}
