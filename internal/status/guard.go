package status

import (
	"fmt"
	"net"
	"net/http"
	"strings"
)

// loopbackOnly wraps h, on a server bound to loopback, so that it answers
// only requests whose Host names loopback: localhost, 127.0.0.0/8 or
// [::1], with or without a port. A web page the operator opens can make
// its own name resolve to 127.0.0.1 (DNS rebinding) and then read this
// server as its own origin; its requests still carry its name in Host.
func loopbackOnly(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !loopbackHostHeader(r.Host) {
			http.Error(w, fmt.Sprintf("403 forbidden: Host %q does not name loopback. This server listens on loopback only "+
				"and answers requests for localhost, 127.0.0.1 or [::1] (a guard against DNS rebinding); "+
				"to reach it under another name, listen on that address with --http-auth-file", r.Host), http.StatusForbidden)
			return
		}
		h.ServeHTTP(w, r)
	})
}

// loopbackHostHeader reports whether a Host header names loopback.
func loopbackHostHeader(hostport string) bool {
	host, _, err := net.SplitHostPort(hostport)
	if err != nil { // no port
		host = strings.TrimSuffix(strings.TrimPrefix(hostport, "["), "]")
	}
	return loopbackHost(strings.TrimSuffix(host, "."))
}
