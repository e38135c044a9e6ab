package netpoll

import (
	"context"
	"fmt"
	"net"
	"net/netip"
	"os"
	"strconv"
	"strings"
)

// listenAddr is a listening address resolved to what bind(2) takes.
type listenAddr struct {
	// ap is the address to bind, its port 0 while the kernel is to choose
	// one; an IPv4 address is never IPv4-mapped.
	ap netip.AddrPort
	// any is set when the host was empty: every address of the machine,
	// IPv6 and IPv4 together on one socket bound to ::, or IPv4 alone
	// where the machine has no IPv6.
	any bool
	// zoneID is the interface index of ap's zone ("fe80::1%eth0"), or 0.
	zoneID uint32
}

// resolveListenAddr resolves addr as net.Listen("tcp", addr) does, with r
// for host names and service names:
//
//   - ":8080", ":0" (an empty host): every address, IPv6 and IPv4 together
//     on one socket bound to :: where the machine has IPv6, 0.0.0.0
//     otherwise;
//   - "[::]:80": every address, IPv6 and IPv4 together (so IPv6 only where
//     the machine has no IPv6);
//   - "0.0.0.0:80": every IPv4 address, and IPv4 only (net.Listen("tcp")
//     listens on IPv6 too, but this package has no "tcp4" to ask for IPv4
//     alone, so the IPv4 wildcard asks for it);
//   - an IP address, IPv4 ("127.0.0.1:0") or IPv6 ("[::1]:8080", with a
//     zone: "[fe80::1%eth0]:8080"); an IPv4-mapped one is IPv4;
//   - a host name ("localhost:8080"): its first IPv4 address, or its first
//     address when it has none of IPv4, as net.Listen binds;
//   - the port, a number from 0 to 65535 or a service name ("http", from
//     /etc/services); empty means 0, the kernel's choice.
func resolveListenAddr(ctx context.Context, r *net.Resolver, addr string) (listenAddr, error) {
	host, service, err := net.SplitHostPort(addr)
	if err != nil {
		return listenAddr{}, fmt.Errorf("netpoll: listen address %q: %w (want host:port, such as 127.0.0.1:8080, [::1]:8080, localhost:8080, or :8080 for every address)", addr, err)
	}
	port, err := r.LookupPort(ctx, "tcp", service)
	if err != nil {
		return listenAddr{}, fmt.Errorf("netpoll: listen address %q: %w (the port must be a number from 0 to 65535, 0 letting the kernel choose, or a service name such as http)", addr, err)
	}
	if host == "" {
		ip := netip.IPv6Unspecified()
		if !dualStack() {
			ip = netip.IPv4Unspecified()
		}
		return listenAddr{ap: netip.AddrPortFrom(ip, uint16(port)), any: true}, nil
	}
	ip, err := netip.ParseAddr(host)
	if err != nil {
		if looksLikeIP(host) {
			return listenAddr{}, fmt.Errorf("netpoll: listen address %q: %q is not a valid IP address: %w", addr, host, err)
		}
		ip, err = lookupListenIP(ctx, r, host)
		if err != nil {
			return listenAddr{}, fmt.Errorf("netpoll: listen address %q: %w (use an IP address, or a host name this machine resolves)", addr, err)
		}
	}
	la := listenAddr{ap: netip.AddrPortFrom(ip.Unmap(), uint16(port))}
	if zone := ip.Zone(); zone != "" && la.ap.Addr().Is6() {
		la.zoneID, err = zoneIndex(zone)
		if err != nil {
			return listenAddr{}, fmt.Errorf("netpoll: listen address %q: zone %q: %w (name an interface of this machine, or give its index)", addr, zone, err)
		}
	}
	return la, nil
}

// looksLikeIP reports whether host was meant as an IP address: only digits
// and dots ("256.0.0.1"), or a colon, which no host name has. Such a host is
// not looked up: the answer would be a puzzling "no such host".
func looksLikeIP(host string) bool {
	if strings.Contains(host, ":") {
		return true
	}
	return strings.Trim(host, "0123456789.") == ""
}

// lookupListenIP resolves a host name to the address net.Listen binds: the
// first IPv4 one, or the first one when none is IPv4.
func lookupListenIP(ctx context.Context, r *net.Resolver, host string) (netip.Addr, error) {
	ips, err := r.LookupNetIP(ctx, "ip", host)
	if err != nil {
		return netip.Addr{}, err
	}
	for _, ip := range ips {
		if ip.Unmap().Is4() {
			return ip.Unmap(), nil
		}
	}
	if len(ips) == 0 {
		return netip.Addr{}, fmt.Errorf("lookup %s: no addresses", host)
	}
	return ips[0], nil
}

// zoneIndex is the interface index of an IPv6 zone: an interface name, or
// an index in decimal.
func zoneIndex(zone string) (uint32, error) {
	if n, err := strconv.ParseUint(zone, 10, 32); err == nil {
		return uint32(n), nil
	}
	ifi, err := net.InterfaceByName(zone)
	if err != nil {
		return 0, err
	}
	return uint32(ifi.Index), nil
}

// shown is the address an error names for port: as written for an empty
// host (":8080", as net.Listen's errors), the address otherwise.
func (la listenAddr) shown(port uint16) net.Addr {
	if la.any {
		return &net.TCPAddr{Port: int(port)}
	}
	return net.TCPAddrFromAddrPort(netip.AddrPortFrom(la.ap.Addr(), port))
}

// listenError is err from the system call op on a socket for la's address
// with port, worded as net.Listen's errors are: "netpoll: listen tcp
// 127.0.0.1:8080: bind: address already in use". It wraps a *net.OpError,
// and through it the errno (errors.Is(err, syscall.EADDRINUSE)).
func (la listenAddr) listenError(op string, port uint16, err error) error {
	return fmt.Errorf("netpoll: %w", &net.OpError{Op: "listen", Net: "tcp", Addr: la.shown(port), Err: os.NewSyscallError(op, err)})
}
