package nats

import "errors"

var (
	// ErrDecode is wrapped by the error for a payload that is not valid in
	// the configured format.
	ErrDecode = errors.New("natssource: payload does not decode")

	// ErrPosition is wrapped by errors about a restored checkpoint that does
	// not fit the configured source.
	ErrPosition = errors.New("natssource: restored checkpoint does not fit the source")
)
