package conn

import "errors"

// ErrClose, returned by a Session, ends the connection without a reply
// and without logging it as a failure (a fail point's closeConnection).
var ErrClose = errors.New("mongowire: close connection")

// errNotTLS ends a connection whose first bytes are not a TLS handshake.
var errNotTLS = errors.New("mongowire: not a TLS handshake on a TLS-only port")
