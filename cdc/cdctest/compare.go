package cdctest

import (
	"bytes"
	"fmt"
	"strings"
)

// Compare returns nil if got holds exactly the records of want, in the
// same order, and otherwise an error that says which records were lost,
// which were duplicated, which came out of order, and which are not
// records of want at all (changed after Put, or never put).
func Compare(got, want [][]byte) error {
	if equal(got, want) {
		return nil
	}
	wantCount := map[string]int{}
	for _, w := range want {
		wantCount[string(w)]++
	}
	gotCount := map[string]int{}
	for _, g := range got {
		gotCount[string(g)]++
	}
	var problems []string
	for _, w := range want {
		if gotCount[string(w)] == 0 {
			problems = append(problems, fmt.Sprintf("record %s lost", short(w)))
		}
	}
	seen := map[string]bool{}
	for _, g := range got {
		k := string(g)
		n, ok := wantCount[k]
		switch {
		case !ok && !seen[k]:
			problems = append(problems, fmt.Sprintf("unexpected record %s (changed after Put, or never put)", short(g)))
		case ok && gotCount[k] > n && !seen[k]:
			problems = append(problems, fmt.Sprintf("record %s duplicated (%d times)", short(g), gotCount[k]))
		}
		seen[k] = true
	}
	if len(problems) == 0 {
		problems = append(problems, "records out of order")
	}
	if len(problems) > maxProblems {
		problems = append(problems[:maxProblems], fmt.Sprintf("and %d more", len(problems)-maxProblems))
	}
	return fmt.Errorf("%s; got %d records, want %d", strings.Join(problems, "; "), len(got), len(want))
}

func equal(a, b [][]byte) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if !bytes.Equal(a[i], b[i]) {
			return false
		}
	}
	return true
}

// maxProblems bounds the problems Compare lists.
const maxProblems = 5

// short quotes b, cut to a readable length.
func short(b []byte) string {
	const max = 40
	if len(b) > max {
		return fmt.Sprintf("%q…", b[:max])
	}
	return fmt.Sprintf("%q", b)
}
