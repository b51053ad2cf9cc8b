package transform

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"strings"
	"sync"
	"testing"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/tide-cdc/tide/cdc"
	"github.com/tide-cdc/tide/encode"
)

func raw(t *testing.T, d bson.D) []byte {
	t.Helper()
	b, err := bson.Marshal(d)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func js(t *testing.T, doc []byte) string {
	t.Helper()
	if doc == nil {
		return "null"
	}
	out, err := encode.AppendRelaxed(nil, doc)
	if err != nil {
		t.Fatal(err)
	}
	return string(out)
}

// change is an update of shop.orders with a full document, a
// before-image and an update description.
func change(t *testing.T) cdc.Event {
	doc := bson.D{
		{Key: "_id", Value: int32(7)},
		{Key: "status", Value: "paid"},
		{Key: "qty", Value: int32(3)},
		{Key: "email", Value: "Ann@example.com"},
		{Key: "password", Value: "hunter2"},
		{Key: "profile", Value: bson.D{{Key: "ssn", Value: "123-45-6789"}, {Key: "age", Value: int32(41)}}},
		{Key: "cust_id", Value: int64(99)},
		{Key: "address", Value: bson.D{{Key: "country", Value: "DE"}}},
		{Key: "items", Value: bson.A{bson.D{{Key: "sku", Value: "a"}, {Key: "price", Value: 1.5}}}},
	}
	return cdc.Event{
		Pos: cdc.Position(`{"n":1}`), Op: cdc.OpUpdate, Namespace: "shop.orders",
		ClusterTime:  cdc.Timestamp{T: 1700000000, I: 1},
		WallTimeMS:   1700000000123,
		DocumentKey:  raw(t, bson.D{{Key: "_id", Value: int32(7)}}),
		FullDocument: raw(t, doc),
		PreImage:     raw(t, bson.D{{Key: "_id", Value: int32(7)}, {Key: "password", Value: "old"}, {Key: "status", Value: "draft"}}),
		UpdateDesc: raw(t, bson.D{
			{Key: "updatedFields", Value: bson.D{{Key: "password", Value: "hunter2"}, {Key: "profile.ssn", Value: "1"}, {Key: "profile", Value: bson.D{{Key: "ssn", Value: "2"}, {Key: "age", Value: int32(1)}}}, {Key: "status", Value: "paid"}}},
			{Key: "removedFields", Value: bson.A{"password", "notes", "cust_id"}},
			{Key: "truncatedArrays", Value: bson.A{}},
		}),
	}
}

func TestSteps(t *testing.T) {
	key := []byte("k")
	mac := hmac.New(sha256.New, key)
	mac.Write([]byte("Ann@example.com"))
	emailHash := hex.EncodeToString(mac.Sum(nil))

	tests := []struct {
		name                string
		steps               []Step
		keep                bool
		doc, before, update string // relaxed JSON; "" = not checked
		route               string
	}{
		{name: "filter ops keeps", steps: []Step{{Filter: &Filter{Ops: []string{"insert", "update"}}}}, keep: true},
		{name: "filter ops drops", steps: []Step{{Filter: &Filter{Ops: []string{"delete"}}}}},
		{name: "filter namespace glob", steps: []Step{{Filter: &Filter{Namespaces: []string{"shop.*"}}}}, keep: true},
		{name: "filter namespace miss", steps: []Step{{Filter: &Filter{Namespaces: []string{"crm.*"}}}}},
		{name: "filter where", steps: []Step{{Filter: &Filter{Where: `doc.status != "draft" && doc.qty * 2 == 6`}}}, keep: true},
		{name: "filter where false", steps: []Step{{Filter: &Filter{Where: `before.status != "draft"`}}}},
		{name: "filter missing field is null", steps: []Step{{Filter: &Filter{Where: `doc.nothing == null`}}}, keep: true},
		{name: "filter variables", keep: true, steps: []Step{{Filter: &Filter{Where: `op == "update" && ns.db == "shop" && ns.coll == "orders" && key._id == 7 && ` +
			`"password" in update.updatedFields && update.removedFields.size() == 3 && ` +
			`cluster_time == timestamp("2023-11-14T22:13:20Z") && wall_time == timestamp("2023-11-14T22:13:20.123Z") && ` +
			`doc.items[0].price == 1.5 && doc.profile.age > 40 && subject == "" && payload == null`}}}},
		{name: "drop_fields", steps: []Step{{DropFields: []string{"password", "profile.ssn", "items.price"}}}, keep: true,
			doc:    `{"_id":7,"status":"paid","qty":3,"email":"Ann@example.com","profile":{"age":41},"cust_id":99,"address":{"country":"DE"},"items":[{"sku":"a"}]}`,
			before: `{"_id":7,"status":"draft"}`,
			update: `{"updatedFields":{"profile":{"age":1},"status":"paid"},"removedFields":["notes","cust_id"],"truncatedArrays":[]}`},
		{name: "drop_fields absent field keeps the bytes", steps: []Step{{DropFields: []string{"nothing"}}}, keep: true,
			before: `{"_id":7,"password":"old","status":"draft"}`},
		{name: "keep_fields", steps: []Step{{KeepFields: []string{"status", "profile.age"}}}, keep: true,
			doc:    `{"_id":7,"status":"paid","profile":{"age":41}}`,
			before: `{"_id":7,"status":"draft"}`,
			update: `{"updatedFields":{"profile":{"age":1},"status":"paid"},"removedFields":[],"truncatedArrays":[]}`},
		{name: "rename_fields", steps: []Step{{RenameFields: []Field{{"cust_id", "customer_id"}, {"profile.ssn", "tax_id"}}}}, keep: true,
			doc:    `{"_id":7,"status":"paid","qty":3,"email":"Ann@example.com","password":"hunter2","profile":{"tax_id":"123-45-6789","age":41},"customer_id":99,"address":{"country":"DE"},"items":[{"sku":"a","price":1.5}]}`,
			update: `{"updatedFields":{"password":"hunter2","profile.tax_id":"1","profile":{"tax_id":"2","age":1},"status":"paid"},"removedFields":["password","notes","customer_id"],"truncatedArrays":[]}`},
		{name: "mask_fields", steps: []Step{{MaskFields: []Field{{"email", "hash"}, {"cust_id", "last4"}, {"password", "redact"}}}}, keep: true,
			doc:    `{"_id":7,"status":"paid","qty":3,"email":"` + emailHash + `","password":"[redacted]","profile":{"ssn":"123-45-6789","age":41},"cust_id":"99","address":{"country":"DE"},"items":[{"sku":"a","price":1.5}]}`,
			before: `{"_id":7,"password":"[redacted]","status":"draft"}`},
		{name: "set", steps: []Step{{Set: []Field{{"region", `doc.address.country in ["DE", "FR"] ? "eu" : "other"`}, {"meta.twice", `doc.qty * 2`}, {"status", `doc.region + "-" + doc.status`}}}}, keep: true,
			doc: `{"_id":7,"status":"eu-paid","qty":3,"email":"Ann@example.com","password":"hunter2","profile":{"ssn":"123-45-6789","age":41},"cust_id":99,"address":{"country":"DE"},"items":[{"sku":"a","price":1.5}],"region":"eu","meta":{"twice":6}}`},
		{name: "route", steps: []Step{{Set: []Field{{"region", `"eu"`}}}, {Route: `"orders_" + doc.region`}}, keep: true, route: "orders_eu"},
		{name: "func", steps: []Step{{Func: func(ev *cdc.Event) (bool, error) { return ev.Op == cdc.OpInsert, nil }}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, err := Compile(tt.steps, Options{MaskKey: key})
			if err != nil {
				t.Fatal(err)
			}
			ev := change(t)
			keep, err := c.Apply(&ev)
			if err != nil {
				t.Fatal(err)
			}
			if keep != tt.keep {
				t.Fatalf("keep = %v, want %v", keep, tt.keep)
			}
			for _, f := range []struct {
				name, want string
				got        []byte
			}{{"doc", tt.doc, ev.FullDocument}, {"before", tt.before, ev.PreImage}, {"update", tt.update, ev.UpdateDesc}} {
				if f.want != "" {
					if got := js(t, f.got); got != f.want {
						t.Errorf("%s:\n got %s\nwant %s", f.name, got, f.want)
					}
				}
			}
			if ev.Route != tt.route {
				t.Errorf("route = %q, want %q", ev.Route, tt.route)
			}
			if js(t, ev.DocumentKey) != `{"_id":7}` {
				t.Errorf("document key changed: %s", js(t, ev.DocumentKey))
			}
		})
	}
}

func TestDroppedCounts(t *testing.T) {
	c, err := Compile([]Step{{DropFields: []string{"a"}}, {Filter: &Filter{Ops: []string{"insert"}}}}, Options{})
	if err != nil {
		t.Fatal(err)
	}
	for range 3 {
		ev := change(t)
		if keep, err := c.Apply(&ev); keep || err != nil {
			t.Fatalf("Apply = %v, %v", keep, err)
		}
	}
	got := c.Dropped()
	if len(got) != 2 || got[1] != (Dropped{"transforms[1].filter", 3}) || got[0].Count != 0 {
		t.Fatalf("Dropped = %+v", got)
	}
}

func TestCompileErrors(t *testing.T) {
	tests := []struct {
		name  string
		steps []Step
		opts  Options
		want  string // the error's text
	}{
		{"unknown variable", []Step{{Filter: &Filter{Where: `doc.a == 1 && foo`}}}, Options{},
			"transforms[0].filter.where: line 1, column 15 of the expression: undeclared reference to 'foo'"},
		{"unknown function", []Step{{DropFields: []string{"a"}}, {Set: []Field{{"x", "\n  frobnicate(doc)"}}}}, Options{},
			"transforms[1].set.x: line 2, column 13 of the expression: undeclared reference to 'frobnicate'"},
		{"now is refused", []Step{{Route: `string(now())`}}, Options{}, "there is no clock"},
		{"syntax", []Step{{Route: `"a" +`}}, Options{}, "transforms[0].route: line 1, column 6 of the expression: Syntax error"},
		{"wrong type", []Step{{Filter: &Filter{Where: `"yes"`}}}, Options{}, "transforms[0].filter.where: line 1, column 1 of the expression: the expression gives string; want bool"},
		{"route not a string", []Step{{Route: `1 + 2`}}, Options{}, "gives int; want string"},
		{"wrong operand types", []Step{{Filter: &Filter{Where: `1 + "a" == 2`}}}, Options{}, "found no matching overload for '_+_'"},
		{"cost exceeded", []Step{{Filter: &Filter{Where: `[1,2,3,4,5,6,7,8,9,10].map(a, [1,2,3,4,5,6,7,8,9,10].map(b, [1,2,3,4,5,6,7,8,9,10].map(c, a+b+c))).size() > 0`}}},
			Options{CostLimit: 1000}, "over the limit of 1000"},
		{"two kinds in one step", []Step{{DropFields: []string{"a"}, Route: `"x"`}}, Options{}, "transforms[0]: a transform sets exactly one"},
		{"drop _id", []Step{{DropFields: []string{"a", "_id"}}}, Options{}, "transforms[0].drop_fields[1]: the document key (_id) is never dropped"},
		{"bad path", []Step{{KeepFields: []string{"a..b"}}}, Options{}, `transforms[0].keep_fields[0]: "a..b" is not a field path`},
		{"hash without key", []Step{{MaskFields: []Field{{"email", "hash"}}}}, Options{}, "transforms[0].mask_fields.email: hash needs mask_key"},
		{"unknown mask", []Step{{MaskFields: []Field{{"email", "blur"}}}}, Options{}, `"blur" is not a mask`},
		{"rename with dots", []Step{{RenameFields: []Field{{"a", "b.c"}}}}, Options{}, "transforms[0].rename_fields.a: \"b.c\" is not a new field name"},
		{"unknown op", []Step{{Filter: &Filter{Ops: []string{"upsert"}}}}, Options{}, `transforms[0].filter.ops[0]: "upsert" is not an operation`},
		{"bad glob", []Step{{Filter: &Filter{Namespaces: []string{"shop.["}}}}, Options{}, `transforms[0].filter.namespaces[0]`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Compile(tt.steps, tt.opts)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("Compile error = %v\nwant one containing %q", err, tt.want)
			}
		})
	}
}

func TestApplyErrors(t *testing.T) {
	tests := []struct {
		name  string
		steps []Step
		want  string
	}{
		{"int times string field", []Step{{Filter: &Filter{Where: `doc.status * 2 == 4`}}}, "transforms[0].filter.where: no such overload"},
		{"missing parent", []Step{{DropFields: []string{"x"}}, {Set: []Field{{"c", `doc.nothing.country`}}}}, "transforms[1].set.c: no such key: country"},
		{"runtime cost", []Step{{Filter: &Filter{Where: `doc.items.all(i, doc.items.all(j, doc.items.all(k, true)))`}}}, ""},
		{"set through a scalar", []Step{{Set: []Field{{"status.x", `1`}}}}, "field status is a string, not a document"},
		{"route on a delete", []Step{{Route: `"orders_" + doc.region`}}, "transforms[0].route: no such key: region"},
		{"func error", []Step{{Func: func(*cdc.Event) (bool, error) { return false, errors.New("boom") }, FuncName: "mine"}}, "mine: boom"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, err := Compile(tt.steps, Options{CostLimit: 50})
			if tt.want == "" { // the runtime limit, with a doc of 30 items
				c, err = Compile(tt.steps, Options{CostLimit: 500})
			}
			if err != nil {
				t.Fatal(err)
			}
			ev := change(t)
			if tt.name == "route on a delete" {
				ev.Op, ev.FullDocument = cdc.OpDelete, nil
			}
			if tt.want == "" {
				items := bson.A{}
				for range 30 {
					items = append(items, int32(1))
				}
				ev.FullDocument = raw(t, bson.D{{Key: "_id", Value: 1}, {Key: "items", Value: items}})
				tt.want = "transforms[0].filter.where: operation cancelled: actual cost limit exceeded"
			}
			keep, err := c.Apply(&ev)
			var te *Error
			if err == nil || !errors.As(err, &te) || !strings.Contains(err.Error(), tt.want) || keep {
				t.Fatalf("Apply = %v, %v\nwant an *Error containing %q", keep, err, tt.want)
			}
		})
	}
}

func TestNATSPayload(t *testing.T) {
	c, err := Compile([]Step{
		{Filter: &Filter{Where: `subject == "orders.new" && payload.qty * 2 == 4 && headers["X-Kind"][0] == "a"`}},
		{DropFields: []string{"secret"}},
		{Set: []Field{{"total", `double(doc.qty) * doc.price`}}},
	}, Options{})
	if err != nil {
		t.Fatal(err)
	}
	ev := cdc.Event{Op: cdc.OpInsert, Namespace: "orders.new", PayloadFormat: cdc.PayloadJSON,
		Payload: []byte(`{"qty":2,"price":1.25,"secret":"x"}`), Headers: map[string][]string{"X-Kind": {"a"}}}
	keep, err := c.Apply(&ev)
	if err != nil || !keep {
		t.Fatalf("Apply = %v, %v", keep, err)
	}
	if got, want := string(ev.Payload), `{"qty":2,"price":1.25,"total":2.5}`; got != want || ev.FullDocument != nil {
		t.Fatalf("payload = %s, want %s", got, want)
	}
}

// TestSetNeverWritesPastTheDocument: a source's document may be a slice
// of a larger buffer; set must not write into what follows it.
func TestSetNeverWritesPastTheDocument(t *testing.T) {
	c, err := Compile([]Step{{Set: []Field{{"x", `1`}}}}, Options{})
	if err != nil {
		t.Fatal(err)
	}
	doc := raw(t, bson.D{{Key: "_id", Value: 1}})
	buf := append(append([]byte{}, doc...), []byte("NEIGHBOUR-BYTES-THAT-MUST-STAY")...)
	ev := cdc.Event{Op: cdc.OpInsert, FullDocument: buf[:len(doc)]}
	if _, err := c.Apply(&ev); err != nil {
		t.Fatal(err)
	}
	if string(buf[len(doc):]) != "NEIGHBOUR-BYTES-THAT-MUST-STAY" {
		t.Fatalf("set wrote past the document: %q", buf[len(doc):])
	}
	if got := js(t, ev.FullDocument); got != `{"_id":1,"x":1}` {
		t.Fatalf("doc = %s", got)
	}
}

// TestDropWhereDocumentAndBeforeShareBytes: a source may hand out one
// buffer as both the document and the before-image; a drop in place of
// the one must leave the other readable.
func TestDropWhereDocumentAndBeforeShareBytes(t *testing.T) {
	c, err := Compile([]Step{{DropFields: []string{"a"}}}, Options{})
	if err != nil {
		t.Fatal(err)
	}
	doc := raw(t, bson.D{{Key: "_id", Value: 1}, {Key: "a", Value: "x"}, {Key: "b", Value: 2}})
	ev := cdc.Event{Op: cdc.OpReplace, FullDocument: doc, PreImage: doc}
	if _, err := c.Apply(&ev); err != nil {
		t.Fatal(err)
	}
	for _, d := range [][]byte{ev.FullDocument, ev.PreImage} {
		if got := js(t, d); got != `{"_id":1,"b":2}` {
			t.Fatalf("doc = %s", got)
		}
	}
}

// TestRuntimeErrorsConcurrently: a runtime error of the same kind (no
// such overload: a string times two) met by many encode workers at once.
// cel-go keeps that error as one shared value and labels it on first use;
// under -race this fails unless the label is set before any expression
// runs (cel.go's init).
func TestRuntimeErrorsConcurrently(t *testing.T) {
	chain, err := Compile([]Step{{Set: []Field{{"twice", `doc.qty == 3 ? doc.status * 2 : 0`}}}}, Options{})
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			for range 50 {
				ev := change(t)
				if _, err := chain.Apply(&ev); err == nil || !strings.Contains(err.Error(), "no such overload") {
					t.Errorf("Apply = %v, want no such overload", err)
					return
				}
			}
		})
	}
	wg.Wait()
}
