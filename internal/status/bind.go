package status

import (
	"errors"
	"fmt"
	"net"
	"net/netip"
	"strings"
)

// CheckBind is the rule every tide command's --http-addr follows (tide
// run, demo, serve and worker): an address that is not loopback, such as
// ":9464", "0.0.0.0:9464", "[::]:9464" or a host name other than
// localhost, needs authFile (--http-auth-file), or insecure
// (--http-insecure) to accept serving /metrics, and the status page where
// there is one, to anyone who reaches it. An empty addr serves nothing, so
// authFile and insecure must be unset with it. Listen applies the rule
// too; commands call CheckBind to refuse before they start anything.
func CheckBind(addr, authFile string, insecure bool) error {
	if addr == "" {
		switch {
		case authFile != "":
			return errors.New("--http-auth-file needs --http-addr")
		case insecure:
			return errors.New("--http-insecure needs --http-addr")
		}
		return nil
	}
	loop, err := isLoopback(addr)
	if err != nil || loop || authFile != "" || insecure {
		return err
	}
	return fmt.Errorf("--http-addr %s is not a loopback address: /metrics (names of pipelines, of users who failed "+
		"to log in) and any status page would be open to the network; set --http-auth-file (a file of one user:password line) "+
		"for basic auth, listen on 127.0.0.1, or pass --http-insecure to accept the risk", addr)
}

// isLoopback reports whether addr's host is a loopback IP address or
// localhost. Any other name counts as the network, even one that resolves
// to loopback today; an empty host, 0.0.0.0 and :: listen on every
// interface.
func isLoopback(addr string) (bool, error) {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return false, fmt.Errorf("--http-addr %q: want host:port, for example 127.0.0.1:9464: %w", addr, err)
	}
	return loopbackHost(host), nil
}

// loopbackHost reports whether host (no port, no brackets) is localhost
// or a loopback IP address (127.0.0.0/8, ::1).
func loopbackHost(host string) bool {
	if strings.EqualFold(host, "localhost") {
		return true
	}
	ip, err := netip.ParseAddr(host)
	return err == nil && ip.Unmap().IsLoopback()
}
