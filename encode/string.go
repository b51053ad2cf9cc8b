package encode

import (
	"encoding/binary"
	"unicode/utf8"
	"unsafe"
)

// AppendString appends s as a JSON string, escaped exactly as the driver's
// Extended JSON writer escapes strings (without HTML escaping): `"` and `\`
// and the control characters below U+0020 are escaped (\n, \r, \t, \b, \f by
// name, the rest as \u00XX), U+2028 and U+2029 as \u2028 and \u2029, and
// each byte of invalid UTF-8 becomes \ufffd. Everything else is copied.
func AppendString(dst []byte, s string) []byte {
	// The bytes are only read, never kept or written.
	return appendEscaped(dst, unsafe.Slice(unsafe.StringData(s), len(s)))
}

// safe reports, for each byte below utf8.RuneSelf, whether it is copied
// unescaped.
var safe = func() (t [utf8.RuneSelf]bool) {
	for c := 0x20; c < utf8.RuneSelf; c++ {
		t[c] = c != '"' && c != '\\'
	}
	return t
}()

const (
	ones  = 0x0101010101010101
	highs = 0x8080808080808080
)

// plain8 reports whether none of the 8 bytes in x needs a closer look: none
// is below 0x20, none is '"' or '\\', and none is 0x80 or above.
func plain8(x uint64) bool {
	less := (x - ones*0x20) & ^x // high bit set where a byte is < 0x20 (or >= 0x80)
	quote := x ^ (ones * '"')
	quote = (quote - ones) & ^quote
	slash := x ^ (ones * '\\')
	slash = (slash - ones) & ^slash
	return (less|quote|slash|x)&highs == 0
}

// appendEscaped appends s as a quoted, escaped JSON string; see AppendString.
func appendEscaped(dst []byte, s []byte) []byte {
	dst = append(dst, '"')
	start := 0
	i := 0
	for i < len(s) {
		// Skip runs of plain ASCII eight bytes at a time.
		for i+8 <= len(s) && plain8(binary.LittleEndian.Uint64(s[i:])) {
			i += 8
		}
		if i >= len(s) {
			break
		}
		c := s[i]
		if c < utf8.RuneSelf {
			if safe[c] {
				i++
				continue
			}
			dst = append(dst, s[start:i]...)
			switch c {
			case '"', '\\':
				dst = append(dst, '\\', c)
			case '\n':
				dst = append(dst, '\\', 'n')
			case '\r':
				dst = append(dst, '\\', 'r')
			case '\t':
				dst = append(dst, '\\', 't')
			case '\b':
				dst = append(dst, '\\', 'b')
			case '\f':
				dst = append(dst, '\\', 'f')
			default:
				dst = append(dst, '\\', 'u', '0', '0', hexDigits[c>>4], hexDigits[c&0xF])
			}
			i++
			start = i
			continue
		}
		r, size := utf8.DecodeRune(s[i:])
		switch {
		case r == utf8.RuneError && size == 1:
			dst = append(dst, s[start:i]...)
			dst = append(dst, `\ufffd`...)
		case r == '\u2028' || r == '\u2029':
			dst = append(dst, s[start:i]...)
			dst = append(dst, '\\', 'u', '2', '0', '2', hexDigits[r&0xF])
		default:
			i += size
			continue
		}
		i += size
		start = i
	}
	dst = append(dst, s[start:]...)
	return append(dst, '"')
}
