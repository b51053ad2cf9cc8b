package wire

import (
	"encoding/binary"

	"github.com/tide-cdc/tide/mongowire/internal/mongoerr"
)

// CheckDocument validates the structure of the BSON document b — every
// length, terminator and type tag — and refuses nesting deeper than
// maxDepth (the top-level document is depth 1). It walks the bytes with an
// explicit stack, so hostile input cannot exhaust the goroutine stack, and
// it runs before anything decodes b. Malformed input is InvalidBSON (22);
// too deep is Overflow (15), as MongoDB reports it. Neither requires the
// connection to close: the message framing is intact.
func CheckDocument(b []byte, maxDepth int) error {
	n, err := docLen(b)
	if err != nil {
		return recoverable(mongoerr.InvalidBSON, "%s", err.(*Error).Err.Message)
	}
	if n != len(b) {
		return recoverable(mongoerr.InvalidBSON, "document length %d does not match its %d bytes", n, len(b))
	}
	if b[n-1] != 0 {
		return recoverable(mongoerr.InvalidBSON, "document is not terminated by a NUL byte")
	}
	// ends[i] is the offset one past the document at depth i+1.
	ends := make([]int, 1, 16)
	ends[0] = n
	pos := 4
	bad := func(what string) error {
		return recoverable(mongoerr.InvalidBSON, "invalid BSON at byte %d: %s", pos, what)
	}
	for len(ends) > 0 {
		end := ends[len(ends)-1]
		if pos == end-1 {
			if b[pos] != 0 {
				return bad("document is not terminated by a NUL byte")
			}
			pos = end
			ends = ends[:len(ends)-1]
			continue
		}
		if pos >= end-1 {
			return bad("element runs past the end of its document")
		}
		typ := b[pos]
		pos++
		key := indexByte(b[pos:end-1], 0)
		if key < 0 {
			return bad("field name is not terminated")
		}
		pos += key + 1
		avail := end - 1 - pos // bytes before the enclosing terminator
		fixed := func(k int) error {
			if avail < k {
				return bad("value is truncated")
			}
			pos += k
			return nil
		}
		str := func() error { // int32 length, bytes, NUL
			if avail < 4 {
				return bad("string length is truncated")
			}
			l := int(int32(binary.LittleEndian.Uint32(b[pos:])))
			if l < 1 || l > avail-4 {
				return bad("string length is out of range")
			}
			if b[pos+4+l-1] != 0 {
				return bad("string is not terminated by a NUL byte")
			}
			pos += 4 + l
			return nil
		}
		var err error
		switch typ {
		case 0x01, 0x09, 0x11, 0x12: // double, datetime, timestamp, int64
			err = fixed(8)
		case 0x02, 0x0D, 0x0E: // string, JavaScript, symbol
			err = str()
		case 0x03, 0x04: // document, array
			if avail < 5 {
				return bad("embedded document is truncated")
			}
			l := int(int32(binary.LittleEndian.Uint32(b[pos:])))
			if l < 5 || l > avail {
				return bad("embedded document length is out of range")
			}
			if len(ends) >= maxDepth {
				return recoverable(mongoerr.Overflow, "BSONObj exceeds maximum nested object depth")
			}
			ends = append(ends, pos+l)
			pos += 4
		case 0x05: // binary
			if avail < 5 {
				return bad("binary length is truncated")
			}
			l := int(int32(binary.LittleEndian.Uint32(b[pos:])))
			if l < 0 || l > avail-5 {
				return bad("binary length is out of range")
			}
			// The old binary subtype 2 holds its own length again, which
			// must be the rest: the driver refuses it otherwise.
			if b[pos+4] == 0x02 && (l < 4 || int(int32(binary.LittleEndian.Uint32(b[pos+5:]))) != l-4) {
				return bad("binary subtype 2 inner length does not match its length")
			}
			pos += 5 + l
		case 0x06, 0x0A, 0xFF, 0x7F: // undefined, null, minKey, maxKey
		case 0x07:
			err = fixed(12)
		case 0x08:
			if err = fixed(1); err == nil && b[pos-1] > 1 {
				err = bad("boolean is neither 0 nor 1")
			}
		case 0x0B: // regex: two cstrings
			for range 2 {
				i := indexByte(b[pos:end-1], 0)
				if i < 0 {
					return bad("regular expression is not terminated")
				}
				pos += i + 1
			}
		case 0x0C: // DBPointer
			if err = str(); err == nil {
				avail = end - 1 - pos
				err = fixed(12)
			}
		case 0x0F: // code with scope: int32 total, string, document
			if avail < 4 {
				return bad("code with scope is truncated")
			}
			total := int(int32(binary.LittleEndian.Uint32(b[pos:])))
			if total < 14 || total > avail {
				return bad("code with scope length is out of range")
			}
			start := pos
			pos += 4
			avail -= 4
			if err = str(); err != nil {
				return err
			}
			l := total - (pos - start)
			if l < 5 || int(int32(binary.LittleEndian.Uint32(b[pos:]))) != l {
				return bad("code with scope document length is inconsistent")
			}
			if len(ends) >= maxDepth {
				return recoverable(mongoerr.Overflow, "BSONObj exceeds maximum nested object depth")
			}
			ends = append(ends, pos+l)
			pos += 4
		case 0x10:
			err = fixed(4)
		case 0x13:
			err = fixed(16)
		default:
			return bad("unknown element type")
		}
		if err != nil {
			return err
		}
	}
	return nil
}
