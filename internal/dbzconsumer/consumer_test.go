package dbzconsumer

import (
	"strings"
	"testing"
)

const good = `{"before":null,"after":"{\"_id\": {\"$numberLong\": \"1004\"},\"first_name\": \"Anne\"}","updateDescription":null,` +
	`"source":{"version":"3.0.0.Final","connector":"mongodb","name":"fulfillment","ts_ms":1558965508000,"snapshot":"false",` +
	`"db":"inventory","sequence":null,"ts_us":1558965508000000,"ts_ns":1558965508000000000,"collection":"customers","ord":31,` +
	`"lsid":null,"txnNumber":null,"wallTime":1558965508123},"op":"c","ts_ms":1558965515240,"transaction":null}`

func TestParseDocumentedValue(t *testing.T) {
	ev, err := Parse([]byte(good))
	if err != nil {
		t.Fatal(err)
	}
	if ev.Op != "c" || ev.Source.Ord != 31 || ev.Source.WallTime == nil || *ev.Source.WallTime != 1558965508123 ||
		!strings.Contains(ev.After, "Anne") || ev.TsMS != 1558965515240 {
		t.Errorf("parsed %+v", ev)
	}
}

// TestParseRefuses: each change to the good value that the documentation
// does not allow is refused, naming the field.
func TestParseRefuses(t *testing.T) {
	for name, tc := range map[string]struct{ old, new, want string }{
		"unknown op":            {`"op":"c"`, `"op":"x"`, `op "x"`},
		"missing op":            {`,"op":"c"`, ``, "op: required"},
		"missing source field":  {`"db":"inventory",`, ``, "source.db: required"},
		"ord is not int32":      {`"ord":31`, `"ord":4294967296`, "source.ord: 4294967296 is outside int32"},
		"ts_ms not a number":    {`"ts_ms":1558965508000`, `"ts_ms":"1558965508000"`, "source.ts_ms: not a number"},
		"after not a string":    {`"after":"{`, `"after":{"x":1},"y":"{`, "after: not a string"},
		"after not JSON":        {`"after":"{\"_id\"`, `"after":"nope{\"_id\"`, "after: the string is not a JSON object"},
		"create without after":  {`"after":"{\"_id\": {\"$numberLong\": \"1004\"},\"first_name\": \"Anne\"}"`, `"after":null`, `op "c" without after`},
		"unknown field":         {`"op":"c"`, `"op":"c","patch":null`, "fields the documentation does not name: [patch]"},
		"unknown source field":  {`"ord":31`, `"ord":31,"rs":"rs0"`, "source: fields the documentation does not name: [rs]"},
		"other connector":       {`"connector":"mongodb"`, `"connector":"postgresql"`, `source.connector "postgresql"`},
		"bad snapshot value":    {`"snapshot":"false"`, `"snapshot":"maybe"`, `source.snapshot "maybe"`},
		"truncated array shape": {`"updateDescription":null`, `"updateDescription":{"truncatedArrays":[{"field":"a"}]}`, "updateDescription.truncatedArrays[0].size: required"},
	} {
		line := strings.Replace(good, tc.old, tc.new, 1)
		if line == good {
			t.Fatalf("%s: the replacement did not apply", name)
		}
		_, err := Parse([]byte(line))
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: error %v, want one containing %q", name, err, tc.want)
		}
	}
}
