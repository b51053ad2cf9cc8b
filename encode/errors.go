package encode

import (
	"errors"
	"fmt"
)

// ErrMalformed is wrapped by every error about BSON bytes that do not form a
// valid document or value. The message names the byte offset (from the start
// of the document or value given) and the problem.
var ErrMalformed = errors.New("encode: malformed BSON")

// ErrTooDeep is wrapped by the error for a document nested more than
// MaxDepth levels deep.
var ErrTooDeep = errors.New("encode: BSON nested too deeply")

// malformed returns an error wrapping ErrMalformed that names the offset of
// the problem. It allocates, so it is for the error path only.
func malformed(off int, format string, args ...any) error {
	return fmt.Errorf("%w at offset %d: %s", ErrMalformed, off, fmt.Sprintf(format, args...))
}
