package postgres

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
)

// Append mode COPYs each record straight into its table, with the columns
// taken from the encoded envelope on this side: what the statement
// INSERT ... SELECT rec->>'_op', rec->'_document_key', ... did on the
// server from a staging table, which cost a second pass over every row.

// The envelope fields append mode writes, in appendCopyColumns order.
const (
	fNamespace = iota
	fOp
	fDocumentKey
	fClusterTimeS
	fClusterTimeI
	fWallTimeMS
	fFullDocument
	fBefore
	fUpdateDesc
	fExtra
	fHeaders
	fResumeToken
	nFields
)

// appendCopyColumns are the columns COPY writes in append mode; id and
// _tide_synced_at take their defaults (the sequence, and now(): the
// transaction's start, as for the statement it replaces).
var appendCopyColumns = []string{"_namespace", "_op", "_document_key", "_cluster_time_s", "_cluster_time_i",
	"_wall_time_ms", "_full_document", "_before", "_update_desc", "_extra", "_headers", "_resume_token"}

// fieldKind says how a field becomes its column, as the SQL did: ->> for
// text, (->>)::bigint for integers, and a JSON null as SQL NULL for jsonb.
type fieldKind uint8

const (
	kindText fieldKind = iota
	kindInt
	kindJSON
)

var fieldKinds = [nFields]fieldKind{kindText, kindText, kindJSON, kindInt, kindInt, kindInt,
	kindJSON, kindJSON, kindJSON, kindJSON, kindJSON, kindJSON}

// fieldOf returns the field named key, or -1 for a field append mode
// does not write.
func fieldOf(key []byte) int {
	switch string(key) { // a switch, not a map: this runs for every field of every record
	case "_namespace":
		return fNamespace
	case "_op":
		return fOp
	case "_document_key":
		return fDocumentKey
	case "_cluster_time_s":
		return fClusterTimeS
	case "_cluster_time_i":
		return fClusterTimeI
	case "_wall_time_ms":
		return fWallTimeMS
	case "_full_document":
		return fFullDocument
	case "_before":
		return fBefore
	case "_update_desc":
		return fUpdateDesc
	case "_extra":
		return fExtra
	case "_headers":
		return fHeaders
	case "_resume_token":
		return fResumeToken
	}
	return -1
}

// appendRow holds one record's columns: text and JSON as spans of
// stage.buf, integers decoded; a column not valid is NULL.
type appendRow struct {
	span  [nFields]span
	ints  [nFields]int64
	valid [nFields]bool
}

// splitEnvelope finds the top-level fields of the envelope buf[base:],
// a JSON object, and fills r with its columns as spans of buf, appending
// decoded text to buf. As with jsonb, a later duplicate key wins.
func splitEnvelope(buf []byte, base int, r *appendRow) ([]byte, error) {
	end := len(buf)
	env := buf[base:end]
	i := skipSpace(env, 0)
	if i >= len(env) || env[i] != '{' {
		return buf, errors.New("not a JSON object")
	}
	i = skipSpace(env, i+1)
	if i < len(env) && env[i] == '}' {
		return buf, nil
	}
	for {
		if i >= len(env) || env[i] != '"' {
			return buf, fmt.Errorf("byte %d: want a key", i)
		}
		kEnd, err := stringEnd(env, i)
		if err != nil {
			return buf, err
		}
		key := env[i+1 : kEnd-1]
		if bytes.IndexByte(key, '\\') >= 0 {
			var k string
			if err := json.Unmarshal(env[i:kEnd], &k); err != nil {
				return buf, fmt.Errorf("byte %d: key: %w", i, err)
			}
			key = []byte(k)
		}
		i = skipSpace(env, kEnd)
		if i >= len(env) || env[i] != ':' {
			return buf, fmt.Errorf("byte %d: want ':'", i)
		}
		from := skipSpace(env, i+1)
		to, err := valueEnd(env, from)
		if err != nil {
			return buf, err
		}
		if f := fieldOf(key); f >= 0 {
			if buf, err = r.set(buf, f, base+from, base+to); err != nil {
				return buf, err
			}
			env = buf[base:end] // set may have moved buf
		}
		i = skipSpace(env, to)
		switch {
		case i < len(env) && env[i] == ',':
			i = skipSpace(env, i+1)
		case i < len(env) && env[i] == '}':
			return buf, nil
		default:
			return buf, fmt.Errorf("byte %d: want ',' or '}'", i)
		}
	}
}

// set records field f, whose JSON value is buf[from:to].
func (r *appendRow) set(buf []byte, f, from, to int) ([]byte, error) {
	v := buf[from:to]
	r.span[f], r.valid[f] = span{}, false
	if string(v) == "null" {
		return buf, nil
	}
	r.valid[f] = true
	switch fieldKinds[f] {
	case kindJSON:
		r.span[f] = span{from, to}
	case kindText:
		if v[0] != '"' {
			r.span[f] = span{from, to} // ->> of a non-string is its JSON text
			break
		}
		if bytes.IndexByte(v, '\\') < 0 {
			r.span[f] = span{from + 1, to - 1}
			break
		}
		var s string
		if err := json.Unmarshal(v, &s); err != nil {
			return buf, fmt.Errorf("%s: %w", appendCopyColumns[f], err)
		}
		at := len(buf)
		buf = append(buf, s...)
		r.span[f] = span{at, len(buf)}
	case kindInt:
		text := v
		if v[0] == '"' {
			var s string
			if err := json.Unmarshal(v, &s); err != nil {
				return buf, fmt.Errorf("%s: %w", appendCopyColumns[f], err)
			}
			text = []byte(s)
		}
		n, ok := parseDigits(text)
		if !ok {
			var err error
			if n, err = strconv.ParseInt(string(text), 10, 64); err != nil {
				return buf, fmt.Errorf("%s: %s is not a bigint", appendCopyColumns[f], v)
			}
		}
		r.ints[f] = n
	}
	return buf, nil
}

// parseDigits parses up to 18 decimal digits, the common case, faster
// than strconv.
func parseDigits(b []byte) (int64, bool) {
	if len(b) == 0 || len(b) > 18 {
		return 0, false
	}
	var n int64
	for _, c := range b {
		if c < '0' || c > '9' {
			return 0, false
		}
		n = n*10 + int64(c-'0')
	}
	return n, true
}

func skipSpace(b []byte, i int) int {
	for i < len(b) && (b[i] == ' ' || b[i] == '\t' || b[i] == '\n' || b[i] == '\r') {
		i++
	}
	return i
}

// stringEnd returns the offset after the JSON string starting at b[i]:
// the first quote not escaped by an odd number of backslashes.
func stringEnd(b []byte, i int) (int, error) {
	for j := i + 1; ; j++ {
		k := bytes.IndexByte(b[j:], '"')
		if k < 0 {
			return 0, fmt.Errorf("byte %d: unterminated string", i)
		}
		j += k
		n := 0
		for p := j - 1; p > i && b[p] == '\\'; p-- {
			n++
		}
		if n%2 == 0 {
			return j + 1, nil
		}
	}
}

// valueEnd returns the offset after the JSON value starting at b[i]. It
// finds the value's end only; PostgreSQL checks what is inside a jsonb
// column's value.
func valueEnd(b []byte, i int) (int, error) {
	if i >= len(b) {
		return 0, fmt.Errorf("byte %d: want a value", i)
	}
	switch b[i] {
	case '"':
		return stringEnd(b, i)
	case '{', '[':
		depth := 0
		for j := i; j < len(b); j++ {
			switch b[j] {
			case '"':
				end, err := stringEnd(b, j)
				if err != nil {
					return 0, err
				}
				j = end - 1
			case '{', '[':
				depth++
			case '}', ']':
				depth--
				if depth == 0 {
					return j + 1, nil
				}
			}
		}
		return 0, fmt.Errorf("byte %d: unterminated %c", i, b[i])
	}
	j := i
	for ; j < len(b); j++ {
		if c := b[j]; c == ',' || c == '}' || c == ']' || c == ' ' || c == '\t' || c == '\n' || c == '\r' {
			break
		}
	}
	if j == i {
		return 0, fmt.Errorf("byte %d: want a value", i)
	}
	return j, nil
}
