// Package loopback checks that a URL names a target on this machine: the
// load generator (package bench/load) and the chaos clients (package
// bench/chaos) only ever load local targets.
package loopback

import (
	"fmt"
	"net"
	"net/url"
)

// Check parses raw and returns it when its scheme is http or https and its
// host is a loopback address or "localhost". It resolves no other name, so
// a host name that happens to point at this machine is refused too.
func Check(raw string) (*url.URL, error) {
	u, err := url.Parse(raw)
	if err != nil {
		return nil, fmt.Errorf("bad URL: %w", err)
	}
	if u.Scheme != "http" && u.Scheme != "https" {
		return nil, fmt.Errorf("URL %q: scheme must be http or https", raw)
	}
	h := u.Hostname()
	if h == "localhost" {
		return u, nil
	}
	if ip := net.ParseIP(h); ip != nil && ip.IsLoopback() {
		return u, nil
	}
	return nil, fmt.Errorf("URL %q: host %q is not a loopback address; bench only loads local targets", raw, h)
}
