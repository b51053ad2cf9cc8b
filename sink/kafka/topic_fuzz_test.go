package kafka

import (
	"testing"

	"github.com/tide-cdc/tide/cdc"
)

// FuzzTopic: a template Validate accepts renders, for any namespace and
// op, a legal topic name; a template it refuses is refused with an error,
// never a panic.
func FuzzTopic(f *testing.F) {
	for _, seed := range [][2]string{
		{DefaultTopic, "inventory.customers"},
		{"cdc-{namespace}-{op}", "orders.eu.paris"},
		{"x.{db}", "my db.coll$x"},
		{"{coll}", ""},
		{"a.{unknown}", "a.b"},
		{"{", "a"},
	} {
		f.Add(seed[0], seed[1], "insert")
	}
	f.Fuzz(func(t *testing.T, tmpl, ns, op string) {
		parts, err := parseTopic(tmpl)
		if err != nil || len(parts) == 0 {
			return
		}
		s := &Sink{cfg: Config{Pipeline: "p"}, topic: parts, rendered: map[string]string{}}
		got := s.render(&cdc.Record{Event: cdc.Event{Namespace: ns, Op: cdc.Op(op)}})
		if !legalTopic.MatchString(got) || got == "." || got == ".." {
			t.Fatalf("template %q, namespace %q, op %q: topic %q is not a legal topic name", tmpl, ns, op, got)
		}
	})
}
