package status

import (
	"fmt"
	"mime"
	"net"
	"net/http"
	"net/url"
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

// guardWrites wraps h so that a request that may change something (any
// method but GET and HEAD) is refused when a browser says it comes from
// another origin, with 403, and when its body is not JSON, with 415.
// Without a CORS preflight, which this server never answers, a page of
// another site can send a form or a text/plain body, but not
// application/json. A request with neither Origin nor Sec-Fetch-Site, as
// curl and tide send, is not a browser's: only its content type counts.
// The origin rule is that of net/http's CrossOriginProtection, stricter:
// Origin is checked even beside Sec-Fetch-Site, and OPTIONS is guarded
// too.
func guardWrites(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodGet || r.Method == http.MethodHead {
			h.ServeHTTP(w, r)
			return
		}
		for _, origin := range r.Header.Values("Origin") {
			if !sameHost(origin, r.Host) {
				http.Error(w, fmt.Sprintf("403 forbidden: %s from Origin %q, not this server (Host %q): "+
					"requests that change something are accepted from this server's own page or from programs only", r.Method, origin, r.Host),
					http.StatusForbidden)
				return
			}
		}
		if site := r.Header.Get("Sec-Fetch-Site"); site != "" && site != "same-origin" && site != "none" {
			http.Error(w, fmt.Sprintf("403 forbidden: %s from another site (Sec-Fetch-Site: %s): "+
				"requests that change something are accepted from this server's own page or from programs only", r.Method, site),
				http.StatusForbidden)
			return
		}
		if mt, _, err := mime.ParseMediaType(r.Header.Get("Content-Type")); err != nil || mt != "application/json" {
			http.Error(w, fmt.Sprintf("415 unsupported media type: %s needs Content-Type: application/json (got %q)",
				r.Method, r.Header.Get("Content-Type")), http.StatusUnsupportedMediaType)
			return
		}
		h.ServeHTTP(w, r)
	})
}

// sameHost reports whether origin (scheme://host[:port]) names host, the
// request's Host header: a browser forms both from the same URL. "null"
// names no host.
func sameHost(origin, host string) bool {
	u, err := url.Parse(origin)
	return err == nil && u.Host != "" && strings.EqualFold(u.Host, host)
}
