// Package wire is the MongoDB wire protocol framing of the embedded server:
// bytes in, structs out. It reads message headers with their length bounds,
// parses OP_MSG (kind-0 and kind-1 sections, flag bits, CRC-32C checksums)
// and the legacy OP_QUERY handshake, validates BSON structure and nesting
// depth without recursion, and builds OP_MSG and OP_REPLY replies. It knows
// nothing of commands; every parse error is a *mongoerr.Error wrapped in an
// *Error that says whether the connection can still be trusted.
package wire

import (
	"encoding/binary"
	"fmt"
	"hash/crc32"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/tide-cdc/tide/mongowire/internal/mongoerr"
)

// Opcodes, as MongoDB numbers them.
const (
	OpReply      int32 = 1
	OpQuery      int32 = 2004
	OpCompressed int32 = 2012
	OpMsg        int32 = 2013
)

// Size limits of a message.
const (
	HeaderLen     = 16
	MaxMessageLen = 48_000_000 // maxMessageSizeBytes in hello
	// MaxCommandDepth is the deepest nesting of a command document
	// (MongoDB's maxBSONDepth default); stored documents have a lower limit.
	MaxCommandDepth = 200
)

// OP_MSG flag bits.
const (
	FlagChecksumPresent uint32 = 1 << 0
	FlagMoreToCome      uint32 = 1 << 1
	FlagExhaustAllowed  uint32 = 1 << 16

	requiredBits = 0xffff // unknown bits in this range must be refused
	knownBits    = FlagChecksumPresent | FlagMoreToCome
)

// Header is the 16-byte prefix of every message.
type Header struct {
	Length     int32
	RequestID  int32
	ResponseTo int32
	OpCode     int32
}

// Error is a malformed message. Err is what the client is told; Close says
// whether the stream can no longer be trusted and the connection must end.
type Error struct {
	Err   *mongoerr.Error
	Close bool
}

func (e *Error) Error() string { return e.Err.Error() }
func (e *Error) Unwrap() error { return e.Err }

func fatal(code int32, format string, args ...any) *Error {
	return &Error{Err: mongoerr.New(code, format, args...), Close: true}
}

func recoverable(code int32, format string, args ...any) *Error {
	return &Error{Err: mongoerr.New(code, format, args...)}
}

// ParseHeader decodes a header and checks its length bounds, so that the
// caller allocates nothing for a message that is too short or too long.
func ParseHeader(b []byte) (Header, error) {
	if len(b) < HeaderLen {
		return Header{}, fatal(mongoerr.InvalidLength, "message header is %d bytes, want %d", len(b), HeaderLen)
	}
	h := Header{
		Length:     int32(binary.LittleEndian.Uint32(b[0:])),
		RequestID:  int32(binary.LittleEndian.Uint32(b[4:])),
		ResponseTo: int32(binary.LittleEndian.Uint32(b[8:])),
		OpCode:     int32(binary.LittleEndian.Uint32(b[12:])),
	}
	if h.Length < HeaderLen || h.Length > MaxMessageLen {
		return h, fatal(mongoerr.InvalidLength, "message length %d is outside %d..%d", h.Length, HeaderLen, MaxMessageLen)
	}
	return h, nil
}

// Msg is a parsed OP_MSG request.
type Msg struct {
	Flags uint32
	// Command is the kind-0 document with every kind-1 sequence merged
	// into it as an array field named by the sequence's identifier.
	Command bson.Raw
}

// MoreToCome reports whether the client expects no reply.
func (m Msg) MoreToCome() bool { return m.Flags&FlagMoreToCome != 0 }

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// ParseMsg parses a whole OP_MSG message (header included). Every document
// is validated structurally, and refused if nested deeper than maxDepth,
// before anything decodes it.
func ParseMsg(msg []byte, maxDepth int) (Msg, error) {
	if len(msg) < HeaderLen+4 {
		return Msg{}, fatal(mongoerr.InvalidLength, "OP_MSG of %d bytes has no flag bits", len(msg))
	}
	flags := binary.LittleEndian.Uint32(msg[HeaderLen:])
	if unknown := flags & requiredBits &^ knownBits; unknown != 0 {
		return Msg{}, fatal(mongoerr.BadValue, "OP_MSG has unknown required flag bits %#x", unknown)
	}
	body := msg[HeaderLen+4:]
	if flags&FlagChecksumPresent != 0 {
		if len(body) < 4 {
			return Msg{}, fatal(mongoerr.InvalidLength, "OP_MSG has checksumPresent but no room for a checksum")
		}
		end := len(msg) - 4
		want := binary.LittleEndian.Uint32(msg[end:])
		if got := crc32.Checksum(msg[:end], castagnoli); got != want {
			return Msg{}, fatal(mongoerr.BadValue, "OP_MSG checksum mismatch: computed %#08x, message says %#08x", got, want)
		}
		body = body[:len(body)-4]
	}

	var (
		command bson.Raw
		seqs    []sequence
	)
	for len(body) > 0 {
		kind := body[0]
		body = body[1:]
		switch kind {
		case 0:
			n, err := docLen(body)
			if err != nil {
				return Msg{}, err
			}
			if command != nil {
				return Msg{}, fatal(mongoerr.BadValue, "OP_MSG has more than one kind-0 section")
			}
			command = bson.Raw(body[:n])
			body = body[n:]
		case 1:
			if len(body) < 4 {
				return Msg{}, fatal(mongoerr.InvalidLength, "OP_MSG kind-1 section is truncated")
			}
			size := int(int32(binary.LittleEndian.Uint32(body)))
			if size < 5 || size > len(body) {
				return Msg{}, fatal(mongoerr.InvalidLength, "OP_MSG kind-1 section size %d is outside 5..%d", size, len(body))
			}
			sec := body[4:size]
			body = body[size:]
			nul := indexByte(sec, 0)
			if nul < 0 {
				return Msg{}, fatal(mongoerr.BadValue, "OP_MSG kind-1 section identifier is not terminated")
			}
			s := sequence{id: string(sec[:nul])}
			if s.id == "" {
				return Msg{}, fatal(mongoerr.BadValue, "OP_MSG kind-1 section has an empty identifier")
			}
			for _, o := range seqs {
				if o.id == s.id {
					return Msg{}, fatal(mongoerr.BadValue, "OP_MSG has two kind-1 sections named %q", s.id)
				}
			}
			docs := sec[nul+1:]
			for len(docs) > 0 {
				n, err := docLen(docs)
				if err != nil {
					return Msg{}, err
				}
				s.docs = append(s.docs, docs[:n])
				docs = docs[n:]
			}
			seqs = append(seqs, s)
		default:
			return Msg{}, fatal(mongoerr.BadValue, "OP_MSG has a section of unknown kind %d", kind)
		}
	}
	if command == nil {
		return Msg{}, fatal(mongoerr.BadValue, "OP_MSG has no kind-0 section")
	}
	if err := CheckDocument(command, maxDepth); err != nil {
		return Msg{Flags: flags}, err
	}
	for _, s := range seqs {
		for _, d := range s.docs {
			// A sequence document sits two levels below the command.
			if err := CheckDocument(d, maxDepth-2); err != nil {
				return Msg{Flags: flags}, err
			}
		}
	}
	if len(seqs) > 0 {
		merged, err := merge(command, seqs)
		if err != nil {
			return Msg{Flags: flags}, err
		}
		command = merged
	}
	return Msg{Flags: flags, Command: command}, nil
}

type sequence struct {
	id   string
	docs [][]byte
}

// docLen returns the declared length of the document at the start of b,
// checked against the bytes available.
func docLen(b []byte) (int, error) {
	if len(b) < 5 {
		return 0, fatal(mongoerr.InvalidBSON, "document of %d bytes is truncated", len(b))
	}
	n := int(int32(binary.LittleEndian.Uint32(b)))
	if n < 5 || n > len(b) {
		return 0, fatal(mongoerr.InvalidBSON, "document length %d is outside 5..%d", n, len(b))
	}
	return n, nil
}

// merge appends each sequence to the command as an array field.
func merge(cmd bson.Raw, seqs []sequence) (bson.Raw, error) {
	size := len(cmd)
	for _, s := range seqs {
		if _, err := cmd.LookupErr(s.id); err == nil {
			return nil, recoverable(mongoerr.BadValue, "field %q is given both in the command body and as a document sequence", s.id)
		}
		size += 1 + len(s.id) + 1 + 5
		for i, d := range s.docs {
			size += 1 + len(fmt.Sprint(i)) + 1 + len(d)
		}
	}
	out := make([]byte, 0, size)
	out = append(out, cmd[:len(cmd)-1]...)
	for _, s := range seqs {
		out = append(out, 0x04)
		out = append(out, s.id...)
		out = append(out, 0)
		start := len(out)
		out = append(out, 0, 0, 0, 0)
		var key []byte
		for i, d := range s.docs {
			out = append(out, 0x03)
			key = fmt.Appendf(key[:0], "%d", i)
			out = append(out, key...)
			out = append(out, 0)
			out = append(out, d...)
		}
		out = append(out, 0)
		binary.LittleEndian.PutUint32(out[start:], uint32(len(out)-start))
	}
	out = append(out, 0)
	binary.LittleEndian.PutUint32(out, uint32(len(out)))
	return bson.Raw(out), nil
}

func indexByte(b []byte, c byte) int {
	for i, x := range b {
		if x == c {
			return i
		}
	}
	return -1
}

// AppendMsg appends an OP_MSG reply carrying doc to dst.
func AppendMsg(dst []byte, requestID, responseTo int32, doc []byte) []byte {
	start := len(dst)
	dst = binary.LittleEndian.AppendUint32(dst, 0)
	dst = binary.LittleEndian.AppendUint32(dst, uint32(requestID))
	dst = binary.LittleEndian.AppendUint32(dst, uint32(responseTo))
	dst = binary.LittleEndian.AppendUint32(dst, uint32(OpMsg))
	dst = binary.LittleEndian.AppendUint32(dst, 0) // flags: never a checksum
	dst = append(dst, 0)
	dst = append(dst, doc...)
	binary.LittleEndian.PutUint32(dst[start:], uint32(len(dst)-start))
	return dst
}

// OP_REPLY response flags.
const (
	ReplyQueryFailure int32 = 1 << 1
	ReplyAwaitCapable int32 = 1 << 3
)

// AppendReply appends an OP_REPLY carrying one document to dst.
func AppendReply(dst []byte, requestID, responseTo, flags int32, doc []byte) []byte {
	start := len(dst)
	dst = binary.LittleEndian.AppendUint32(dst, 0)
	dst = binary.LittleEndian.AppendUint32(dst, uint32(requestID))
	dst = binary.LittleEndian.AppendUint32(dst, uint32(responseTo))
	dst = binary.LittleEndian.AppendUint32(dst, uint32(OpReply))
	dst = binary.LittleEndian.AppendUint32(dst, uint32(flags))
	dst = binary.LittleEndian.AppendUint64(dst, 0) // cursorID
	dst = binary.LittleEndian.AppendUint32(dst, 0) // startingFrom
	dst = binary.LittleEndian.AppendUint32(dst, 1) // numberReturned
	dst = append(dst, doc...)
	binary.LittleEndian.PutUint32(dst[start:], uint32(len(dst)-start))
	return dst
}

// Query is a parsed OP_QUERY request. Only the handshake uses it.
type Query struct {
	Flags      int32
	Collection string // "admin.$cmd"
	Skip       int32
	Return     int32
	Query      bson.Raw
}

// ParseQuery parses a whole OP_QUERY message (header included).
func ParseQuery(msg []byte, maxDepth int) (Query, error) {
	b := msg[HeaderLen:]
	if len(b) < 4 {
		return Query{}, fatal(mongoerr.InvalidLength, "OP_QUERY is truncated")
	}
	q := Query{Flags: int32(binary.LittleEndian.Uint32(b))}
	b = b[4:]
	nul := indexByte(b, 0)
	if nul < 0 {
		return Query{}, fatal(mongoerr.BadValue, "OP_QUERY collection name is not terminated")
	}
	q.Collection = string(b[:nul])
	b = b[nul+1:]
	if len(b) < 8 {
		return Query{}, fatal(mongoerr.InvalidLength, "OP_QUERY is truncated")
	}
	q.Skip = int32(binary.LittleEndian.Uint32(b))
	q.Return = int32(binary.LittleEndian.Uint32(b[4:]))
	b = b[8:]
	n, err := docLen(b)
	if err != nil {
		return Query{}, err
	}
	if err := CheckDocument(b[:n], maxDepth); err != nil {
		return Query{}, err
	}
	q.Query = bson.Raw(b[:n])
	if rest := b[n:]; len(rest) > 0 { // optional returnFieldsSelector
		m, err := docLen(rest)
		if err != nil {
			return Query{}, err
		}
		if m != len(rest) {
			return Query{}, fatal(mongoerr.InvalidLength, "OP_QUERY has %d trailing bytes", len(rest)-m)
		}
		if err := CheckDocument(rest, maxDepth); err != nil {
			return Query{}, err
		}
	}
	return q, nil
}
