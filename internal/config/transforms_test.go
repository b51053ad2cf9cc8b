package config

import (
	"strings"
	"testing"

	"github.com/tide-cdc/tide/cdc"
)

const transformsHead = `name: p
source: {gen: {}}
sink: {out: {path: x}}
`

func TestTransformsParse(t *testing.T) {
	text := transformsHead + `transforms:
  - filter: {ops: [insert, update], namespaces: ["shop.*"], where: 'doc.status != "draft"'}
  - drop_fields: [password, "profile.ssn"]
  - keep_fields: [_id, status, total, region, email, card, customer_id]
  - rename_fields: {cust_id: customer_id}
  - mask_fields: {email: hash, card: last4}
  - set: {region: 'doc.country in ["DE", "FR"] ? "eu" : "other"', total: 'doc.qty * 2'}
  - route: '"orders_" + doc.region'
mask_key: ${KEY}
on_error: dead_letter
dead_letter: {file: {path: dead.jsonl}}
`
	p, err := Parse([]byte(text), env(map[string]string{"KEY": "s3cret"}), testConnectors)
	if err != nil {
		t.Fatal(err)
	}
	if p.Chain == nil || p.Chain.Len() != 7 {
		t.Fatalf("chain = %v", p.Chain)
	}
	if got := p.Transforms[5].Set; len(got) != 2 || got[0].Path != "region" || got[1].Path != "total" {
		t.Fatalf("set = %+v, want its fields in the file's order", got)
	}
	if p.DeadLetter.File == nil || p.DeadLetter.File.Path != "dead.jsonl" || p.OnError != "dead_letter" {
		t.Fatalf("dead letter %+v on_error %q", p.DeadLetter, p.OnError)
	}
	found := false
	for _, s := range p.Secrets() {
		found = found || s == "s3cret"
	}
	if !found {
		t.Errorf("mask_key is not a secret: %q", p.Secrets())
	}
	ev := cdc.Event{Op: cdc.OpDelete, Namespace: "shop.orders"}
	if keep, err := p.Chain.Apply(&ev); keep || err != nil {
		t.Fatalf("a delete passed the ops filter: %v %v", keep, err)
	}
}

func TestTransformsErrors(t *testing.T) {
	tests := []struct{ name, text, want string }{
		{"unknown variable at its column", "transforms:\n  - filter: {where: 'doc.a == 1 && nope'}\n",
			"line 5: transforms[0].filter.where: column 15: undeclared reference to 'nope'"},
		{"a block expression names the line inside it", "transforms:\n  - set:\n      x: |\n        doc.a +\n          frob(1)\n",
			"line 8: transforms[0].set.x: column 7: undeclared reference to 'frob'"},
		{"now is refused", "transforms:\n  - route: 'string(now())'\n", "line 5: transforms[0].route: column 11: undeclared reference to 'now'"},
		{"cost", "transforms:\n  - filter:\n      where: '[1,2,3,4,5,6,7,8,9,10].map(a, [1,2,3,4,5,6,7,8,9,10].map(b, [1,2,3,4,5,6,7,8,9,10].map(c, [1,2,3,4,5,6,7,8,9,10].map(d, [1,2,3,4,5,6,7,8,9,10].map(e, a+b+c+d+e))))).size() > 0'\n",
			"line 6: transforms[0].filter.where: column 1: the expression costs at least"},
		{"two kinds", "transforms:\n  - {drop_fields: [a], route: '\"x\"'}\n", "line 5: transforms[0]: a transform sets exactly one"},
		{"unknown transform", "transforms:\n  - drop_field: [a]\n", "line 5: transforms[0].drop_field: unknown key (did you mean drop_fields?)"},
		{"hash without key", "transforms:\n  - mask_fields: {email: hash}\n", "line 5: transforms[0].mask_fields.email: hash needs mask_key"},
		{"drop _id", "transforms:\n  - drop_fields: [_id]\n", "line 5: transforms[0].drop_fields[0]: the document key (_id) is never dropped"},
		{"on_error", "on_error: retry\n", `line 4: on_error: "retry" is not one of fail, skip, dead_letter`},
		{"dead_letter without on_error", "dead_letter: {file: {path: d}}\n", `line 4: dead_letter: set, but on_error is "fail"`},
		{"dead_letter two", "on_error: dead_letter\ndead_letter: {file: {path: d}, nats: {servers: [nats://x], subject: s}}\n", "line 5: dead_letter: file and nats are set"},
		{"dead_letter nats wildcard", "on_error: dead_letter\ndead_letter: {nats: {servers: [nats://x], subject: 'a.>'}}\n", `line 5: dead_letter.nats.subject: "a.>" is not a subject`},
		{"dead_letter needed", "on_error: dead_letter\n", "line 4: on_error: dead_letter: sink.out keeps no dead letters itself: set dead_letter"},
		{"wrong result type", "transforms:\n  - filter: {where: 'doc.a + 1'}\n", "line 5: transforms[0].filter.where: column 1: the expression gives int; want bool"},
		{"wrong operand types", "transforms:\n  - set: {x: '1 + \"a\"'}\n", "line 5: transforms[0].set.x: column 3: found no matching overload for '_+_'"},
		{"set a list", "transforms:\n  - set: {a: [1]}\n", "line 5: transforms[0].set: a: expected a string"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Parse([]byte(transformsHead+tt.text), env(nil), testConnectors)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("Parse error:\n%v\nwant one containing\n%s", err, tt.want)
			}
		})
	}
}
