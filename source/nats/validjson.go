package nats

import (
	"encoding/binary"
	"math/bits"
)

// validJSON reports whether b is one JSON value, as encoding/json's Valid
// does: RFC 8259 syntax, white space around the value, strings not
// checked for valid UTF-8, duplicate names allowed, nesting at most
// maxDepth deep. FuzzValidJSON holds it to encoding/json.
//
// It is written here rather than taken from a library because validating
// every payload is on the hot path of format: json, and payloads are
// mostly string bytes: scanning strings eight bytes at a time makes it
// about twice as fast as jsontext (the fastest validator we measured,
// three times encoding/json) on the benchmark's 256-byte message.
func validJSON(b []byte) bool {
	v := validator{b: b}
	v.space()
	if !v.value(0) {
		return false
	}
	v.space()
	return v.i == len(b)
}

// maxDepth is encoding/json's limit on nested objects and arrays.
const maxDepth = 10000

type validator struct {
	b []byte
	i int
}

func (v *validator) space() {
	for v.i < len(v.b) {
		switch v.b[v.i] {
		case ' ', '\t', '\n', '\r':
			v.i++
		default:
			return
		}
	}
}

// value checks the value at v.i, nested depth objects and arrays deep,
// and moves past it.
func (v *validator) value(depth int) bool {
	if v.i >= len(v.b) {
		return false
	}
	switch c := v.b[v.i]; {
	case c == '"':
		return v.string()
	case c == '{':
		return v.container(depth+1, '}')
	case c == '[':
		return v.container(depth+1, ']')
	case c == '-' || c >= '0' && c <= '9':
		return v.number()
	case c == 't':
		return v.literal("true")
	case c == 'f':
		return v.literal("false")
	case c == 'n':
		return v.literal("null")
	}
	return false
}

func (v *validator) literal(word string) bool {
	if len(v.b)-v.i < len(word) || string(v.b[v.i:v.i+len(word)]) != word {
		return false
	}
	v.i += len(word)
	return true
}

// container checks an object (close '}') or an array (close ']') nested
// depth deep and moves past it.
func (v *validator) container(depth int, close byte) bool {
	if depth > maxDepth {
		return false
	}
	v.i++ // { or [
	v.space()
	if v.i < len(v.b) && v.b[v.i] == close {
		v.i++
		return true
	}
	for {
		if close == '}' && !v.name() {
			return false
		}
		if !v.value(depth) {
			return false
		}
		v.space()
		if v.i >= len(v.b) {
			return false
		}
		switch v.b[v.i] {
		case ',':
			v.i++
			v.space()
		case close:
			v.i++
			return true
		default:
			return false
		}
	}
}

// name checks an object member's name and colon and moves past them.
func (v *validator) name() bool {
	if v.i >= len(v.b) || v.b[v.i] != '"' || !v.string() {
		return false
	}
	v.space()
	if v.i >= len(v.b) || v.b[v.i] != ':' {
		return false
	}
	v.i++
	v.space()
	return true
}

// Masks for testing the eight bytes of a word at once.
const (
	ones   = 0x0101010101010101
	highs  = 0x8080808080808080
	quotes = '"' * ones
	slashs = '\\' * ones
)

// special marks the bytes of w that a string scan stops at, a quote, a
// backslash or a control character, with their high bit; the lowest mark
// is the first such byte (marks above it may be false). x-ones &^ x &
// highs marks the zero bytes of x; w - 0x20*ones &^ w & highs the bytes of
// w below 0x20.
func special(w uint64) uint64 {
	q := w ^ quotes
	s := w ^ slashs
	return ((q-ones)&^q | (s-ones)&^s | (w-0x20*ones)&^w) & highs
}

func (v *validator) string() bool {
	v.i++ // "
	b := v.b
	for {
		if len(b)-v.i >= 8 {
			m := special(binary.LittleEndian.Uint64(b[v.i:]))
			if m == 0 {
				v.i += 8
				continue
			}
			v.i += bits.TrailingZeros64(m) / 8
		} else {
			for v.i < len(b) && b[v.i] != '"' && b[v.i] != '\\' && b[v.i] >= 0x20 {
				v.i++
			}
			if v.i >= len(b) {
				return false
			}
		}
		switch c := b[v.i]; {
		case c == '"':
			v.i++
			return true
		case c == '\\':
			if !v.escape() {
				return false
			}
		default: // a control character
			return false
		}
	}
}

// escape checks the escape sequence at v.i and moves past it.
func (v *validator) escape() bool {
	b := v.b
	if v.i+1 >= len(b) {
		return false
	}
	switch b[v.i+1] {
	case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
		v.i += 2
		return true
	case 'u':
		if len(b)-v.i < 6 {
			return false
		}
		for _, h := range b[v.i+2 : v.i+6] {
			if !isHex(h) {
				return false
			}
		}
		v.i += 6
		return true
	}
	return false
}

func isHex(c byte) bool {
	return c >= '0' && c <= '9' || c >= 'a' && c <= 'f' || c >= 'A' && c <= 'F'
}

// number checks -?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)? at v.i and
// moves past it. What may follow is the caller's to check.
func (v *validator) number() bool {
	b := v.b
	if b[v.i] == '-' {
		v.i++
	}
	switch {
	case v.i >= len(b):
		return false
	case b[v.i] == '0':
		v.i++
	case b[v.i] >= '1' && b[v.i] <= '9':
		v.digits()
	default:
		return false
	}
	if v.i < len(b) && b[v.i] == '.' {
		v.i++
		if v.digits() == 0 {
			return false
		}
	}
	if v.i < len(b) && (b[v.i] == 'e' || b[v.i] == 'E') {
		v.i++
		if v.i < len(b) && (b[v.i] == '+' || b[v.i] == '-') {
			v.i++
		}
		if v.digits() == 0 {
			return false
		}
	}
	return true
}

func (v *validator) digits() int {
	start := v.i
	for v.i < len(v.b) && v.b[v.i] >= '0' && v.b[v.i] <= '9' {
		v.i++
	}
	return v.i - start
}
