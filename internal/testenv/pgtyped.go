package testenv

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"math"
	"math/big"
	"reflect"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgtype"
	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/tide-cdc/tide/encode"
)

// This file reads a typed table of the PostgreSQL sink back into
// documents, by the columns' recorded paths and types (tide_columns) plus
// _tide_overflow, and compares them with documents, value for value:
// numbers by value (a column that widened holds the same number in a
// wider type), field order aside.

// TypedRows returns the live rows of a typed table, each as a normalised
// document without _id, keyed by the text of its _id column.
func TypedRows(t testing.TB, c *pgx.Conn, table string) map[string]any {
	t.Helper()
	ctx := t.Context()
	type colInfo struct {
		name, typ, bson string
		path            []string
	}
	rows, err := c.Query(ctx, `SELECT a.attname, format_type(a.atttypid, a.atttypmod),
		coalesce((SELECT bson_type FROM tide_columns WHERE table_name = $1 AND column_name = a.attname AND decision IN ('added', 'pinned', 'key') ORDER BY seen_at LIMIT 1), ''),
		(SELECT path FROM tide_columns WHERE table_name = $1 AND column_name = a.attname LIMIT 1)
		FROM pg_attribute a WHERE a.attrelid = to_regclass($1) AND a.attnum > 0 AND NOT a.attisdropped ORDER BY a.attnum`, table)
	if err != nil {
		t.Fatalf("columns of %s: %v", table, err)
	}
	var cols []colInfo
	for rows.Next() {
		var ci colInfo
		if err := rows.Scan(&ci.name, &ci.typ, &ci.bson, &ci.path); err != nil {
			t.Fatal(err)
		}
		if ci.path == nil && ci.name != "_id" && ci.name != "_tide_overflow" {
			continue // a system column
		}
		cols = append(cols, ci)
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	var sel []string
	for _, ci := range cols {
		id := pgx.Identifier{ci.name}.Sanitize()
		if ci.typ == "jsonb" {
			id += "::text" // as written, numbers exact
		}
		sel = append(sel, id)
	}
	q := `SELECT _id::text, ` + strings.Join(sel, ", ") + ` FROM ` + pgx.Identifier{table}.Sanitize() + ` WHERE NOT _tide_deleted`
	rows, err = c.Query(ctx, q)
	if err != nil {
		t.Fatalf("%s: %v", q, err)
	}
	defer rows.Close()
	out := map[string]any{}
	for rows.Next() {
		vals, err := rows.Values()
		if err != nil {
			t.Fatal(err)
		}
		key := vals[0].(string)
		doc := map[string]any{}
		var over map[string]any
		for i, ci := range cols {
			v := vals[i+1]
			if ci.name == "_tide_overflow" {
				if v != nil {
					over = normalJSONValue(t, v).(map[string]any)
				}
				continue
			}
			if ci.name == "_id" || v == nil {
				continue
			}
			setPath(doc, ci.path, columnValue(t, ci.typ, ci.bson, v))
		}
		mergeOverflow(doc, over)
		out[key] = doc
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

func setPath(doc map[string]any, path []string, v any) {
	for _, p := range path[:len(path)-1] {
		sub, ok := doc[p].(map[string]any)
		if !ok {
			sub = map[string]any{}
			doc[p] = sub
		}
		doc = sub
	}
	doc[path[len(path)-1]] = v
}

// mergeOverflow puts the values of _tide_overflow into doc; an
// overflowed value wins over its column (a timestamp keeps its exact
// value there).
func mergeOverflow(doc, over map[string]any) {
	for k, v := range over {
		sub, isObj := v.(map[string]any)
		cur, curObj := doc[k].(map[string]any)
		if isObj && curObj && len(sub) > 0 && !isWrapper(sub) {
			mergeOverflow(cur, sub)
			continue
		}
		if isObj && !isWrapper(sub) {
			cp := map[string]any{}
			mergeOverflow(cp, sub)
			doc[k] = cp
			continue
		}
		doc[k] = v
	}
}

// isWrapper reports a normalised Extended JSON value (a map with one $ key).
func isWrapper(m map[string]any) bool {
	if len(m) != 1 {
		return false
	}
	for k := range m {
		return strings.HasPrefix(k, "$")
	}
	return false
}

// columnValue normalises a value read from a typed column.
func columnValue(t testing.TB, typ, bsonType string, v any) any {
	t.Helper()
	if typ == "jsonb" {
		return normalJSONValue(t, v)
	}
	switch x := v.(type) {
	case string:
		if bsonType == "objectId" {
			return map[string]any{"$oid": x}
		}
		return x
	case int32:
		return normNum(fmt.Sprint(x))
	case int64:
		return normNum(fmt.Sprint(x))
	case float64:
		return numFloat(x)
	case pgtype.Numeric:
		switch {
		case x.NaN:
			return num("NaN")
		case x.InfinityModifier == pgtype.Infinity:
			return num("Infinity")
		case x.InfinityModifier == pgtype.NegativeInfinity:
			return num("-Infinity")
		}
		return normNum(x.Int.String() + "e" + fmt.Sprint(x.Exp))
	case bool:
		return x
	case time.Time:
		return map[string]any{"$date": normNum(fmt.Sprint(x.UnixMilli()))}
	case [16]uint8:
		return map[string]any{"$binary": base64.StdEncoding.EncodeToString(x[:]) + "/04"}
	case []byte:
		return map[string]any{"$binary": base64.StdEncoding.EncodeToString(x) + "/00"}
	}
	return normalJSONValue(t, v) // jsonb
}

// num is a number normalised to the lowest terms of its value, so that
// 5, 5.0 and 5E0 compare equal; NaN and the infinities as themselves.
type num string

func numFloat(f float64) any {
	switch {
	case math.IsNaN(f):
		return num("NaN")
	case math.IsInf(f, 1):
		return num("Infinity")
	case math.IsInf(f, -1):
		return num("-Infinity")
	}
	return normNum(fmt.Sprint(f))
}

func normNum(s string) any {
	switch s {
	case "NaN":
		return num("NaN")
	case "Infinity", "+Inf", "Inf":
		return num("Infinity")
	case "-Infinity", "-Inf":
		return num("-Infinity")
	}
	r, ok := new(big.Rat).SetString(s)
	if !ok {
		return num("?" + s)
	}
	return num(r.RatString())
}

// normalJSONValue normalises a jsonb value read by pgx (already decoded
// into Go values) or raw JSON text.
func normalJSONValue(t testing.TB, v any) any {
	t.Helper()
	var raw []byte
	switch x := v.(type) {
	case []byte:
		raw = x
	case string:
		raw = []byte(x)
	default:
		var err error
		if raw, err = json.Marshal(x); err != nil {
			t.Fatal(err)
		}
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	var out any
	if err := dec.Decode(&out); err != nil {
		t.Fatalf("json %s: %v", raw, err)
	}
	return normalize(t, out)
}

// normalize turns decoded relaxed or canonical Extended JSON into the
// comparable form.
func normalize(t testing.TB, v any) any {
	t.Helper()
	switch x := v.(type) {
	case json.Number:
		return normNum(string(x))
	case []any:
		out := make([]any, len(x))
		for i, e := range x {
			out[i] = normalize(t, e)
		}
		return out
	case map[string]any:
		if len(x) == 1 {
			for k, e := range x {
				switch k {
				case "$numberDouble", "$numberDecimal", "$numberLong", "$numberInt":
					return normNum(e.(string))
				case "$date":
					switch d := e.(type) {
					case string:
						tm, err := time.Parse(time.RFC3339Nano, d)
						if err != nil {
							t.Fatalf("date %q: %v", d, err)
						}
						return map[string]any{"$date": normNum(fmt.Sprint(tm.UnixMilli()))}
					case map[string]any:
						return map[string]any{"$date": normNum(d["$numberLong"].(string))}
					}
				case "$binary":
					b := e.(map[string]any)
					return map[string]any{"$binary": b["base64"].(string) + "/" + b["subType"].(string)}
				case "$tideBSON":
					raw, err := base64.StdEncoding.DecodeString(e.(string))
					if err != nil {
						t.Fatal(err)
					}
					js, err := encode.AppendRelaxed(nil, raw)
					if err != nil {
						t.Fatal(err)
					}
					return normalJSONValue(t, js).(map[string]any)[""]
				}
			}
		}
		out := make(map[string]any, len(x))
		for k, e := range x {
			out[k] = normalize(t, e)
		}
		return out
	}
	return v
}

// NormalDoc normalises a BSON document (a bson.D or raw BSON), without
// its _id, for comparison with TypedRows.
func NormalDoc(t testing.TB, doc any) any {
	t.Helper()
	raw, ok := doc.(bson.Raw)
	if !ok {
		var err error
		if raw, err = bson.Marshal(doc); err != nil {
			t.Fatal(err)
		}
	}
	js, err := encode.AppendCanonical(nil, raw)
	if err != nil {
		t.Fatal(err)
	}
	m := normalJSONValue(t, js).(map[string]any)
	delete(m, "_id")
	return m
}

// CompareTyped reports every difference between a typed table and the
// documents it should hold (bson.D or raw BSON), keyed as TypedRows keys
// them: by the text of the _id column.
func CompareTyped[D any](t testing.TB, c *pgx.Conn, table string, want map[string]D) {
	t.Helper()
	got := TypedRows(t, c, table)
	var keys []string
	for k := range want {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	bad := 0
	for _, k := range keys {
		w := NormalDoc(t, want[k])
		g, ok := got[k]
		switch {
		case !ok:
			t.Errorf("table %s: no row for _id %s; want %v", table, k, w)
			bad++
		case !reflect.DeepEqual(g, w):
			t.Errorf("table %s, _id %s:\n got %v\nwant %v", table, k, g, w)
			bad++
		}
		if bad > 10 {
			t.Fatalf("table %s: too many differences", table)
		}
	}
	for k := range got {
		if _, ok := want[k]; !ok {
			t.Errorf("table %s: row for _id %s that no document has", table, k)
		}
	}
}
