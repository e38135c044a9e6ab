package admit

import (
	"errors"
	"fmt"
	"net/http"
	"slices"
	"unsafe"
)

// A Key says which caller a request belongs to, for the policies that
// count or share per caller (a quota per API key, a share per tenant): the
// client's address or network, a header field, or a function of the
// request. Build one with ClientIP, ClientPrefix, HeaderKey or KeyFunc,
// give it to the policy's configuration, and the policy calls Of for each
// request.
//
// The zero Key is unset: it gives no request a key (Of reports false).
// The configurations that take a Key say what their zero value means (a
// ratelimit.PolicyConfig without one keys by ClientIP); IsZero tells it
// apart.
//
// A Key is a value: copy it freely. It is safe for concurrent use.
type Key struct {
	kind   keyKind
	header string // canonical form
	v4, v6 int    // prefix lengths kept of an address
	fn     func(a *Attempt) (string, bool)
}

type keyKind uint8

const (
	keyUnset keyKind = iota
	keyIP
	keyHeader
	keyFunc
)

// KeyBufLen is the size of the buffer that Key.Of writes an address key
// in: room for the longest, an IPv6 address and "/128".
const KeyBufLen = 64

// ClientIP keys requests by their client's address: the IPv4 address
// ("203.0.113.7"), or the IPv6 /64 network ("2001:db8:1:2::/64"), since a
// single IPv6 host commonly holds a whole /64. An IPv4 address mapped into
// IPv6 ("::ffff:203.0.113.7") is keyed as the IPv4 address, and a zone is
// dropped. It is ClientPrefix(32, 64), and allocates nothing per request.
//
// The address is Attempt.Client: on the sluice server the connection's
// peer, under the net/http middleware (package httpgate) net/http's
// RemoteAddr. Behind a proxy every request comes from the proxy's
// address: key by the field the proxy sets instead (HeaderKey, or KeyFunc
// to parse it).
func ClientIP() Key { return ClientPrefix(32, 64) }

// ClientPrefix keys requests by the network of their client's address:
// the first v4Bits bits of an IPv4 address (32: the address itself) and
// the first v6Bits of an IPv6 one (128: the address itself), written as a
// prefix ("198.51.100.0/24", "2001:db8::/48") unless all bits are kept.
// v4Bits must be 0 to 32 and v6Bits 0 to 128 (Key.Validate). See ClientIP
// for where the address comes from.
func ClientPrefix(v4Bits, v6Bits int) Key {
	return Key{kind: keyIP, v4: v4Bits, v6: v6Bits}
}

// HeaderKey keys requests by the first value of the header field name (an
// API key, a tenant's name), in any case ("x-api-key" reads X-Api-Key). A
// request without the field, or whose first value is empty, has no key.
// The value is used as it is, without allocating: clients choose it, so
// trust it only as far as what sets it (an API key checked later, a proxy
// of your own that sets the field).
func HeaderKey(name string) Key {
	return Key{kind: keyHeader, header: http.CanonicalHeaderKey(name)}
}

// KeyFunc keys requests by fn, which returns the request's key and true,
// or false for a request without one. fn is called on the goroutine that
// decides for the request, once per question a policy asks (a quota asks
// again to take back an admission that never ran), with the queue's lock
// held for a request that waits: it must be quick, must not block, must
// give the same answer each time for a request, and should not allocate.
//
// For instance, by the first segment of the path ("/acme/orders" belongs
// to "acme"), without allocating:
//
//	admit.KeyFunc(func(a *admit.Attempt) (string, bool) {
//		tenant, _, _ := strings.Cut(strings.TrimPrefix(a.Path, "/"), "/")
//		return tenant, tenant != ""
//	})
func KeyFunc(fn func(a *Attempt) (key string, ok bool)) Key {
	return Key{kind: keyFunc, fn: fn}
}

// MaxPicked is how many header names a pipeline has picked out for its
// keys (Env.PickHeader); a key by another header looks in the map.
const MaxPicked = 4

// pickHeader is Env.PickHeader.
func (p *Pipeline) pickHeader(name string) {
	name = http.CanonicalHeaderKey(name)
	if p.pickDone || len(p.picked) == MaxPicked || slices.Contains(p.picked, name) {
		return
	}
	p.picked = append(p.picked, name)
}

// firstValue returns the first value of a's header field name (canonical),
// from Picked when the adapter picked it out, else from Header; "" when
// there is none.
func (a *Attempt) firstValue(name string) string {
	for _, f := range a.Picked {
		if f.Name == name {
			return f.Value
		}
	}
	if v := a.Header[name]; len(v) > 0 {
		return v[0]
	}
	return ""
}

// PickedHeaders returns the canonical names of the header fields the
// pipeline's policies key by (Env.PickHeader), at most MaxPicked: an
// adapter that parses the requests itself picks their first values out as
// it goes and hands them over in Attempt.Picked, in any order, one Field
// per name. The slice is the pipeline's: do not modify it.
func (p *Pipeline) PickedHeaders() []string { return p.picked }

// HeaderName returns the canonical name of the header field that k reads,
// for a key made by HeaderKey.
func (k Key) HeaderName() (string, bool) { return k.header, k.kind == keyHeader }

// IsZero reports whether k is the zero Key, one that no constructor
// returned: the unset value of an option.
func (k Key) IsZero() bool { return k.kind == keyUnset }

// Validate reports why k cannot work, naming the call that built it: a
// ClientPrefix length out of range, a HeaderKey without a name, a KeyFunc
// without a function. It returns nil for every other Key, the zero Key
// included. Policies call it when they are built, so that a mistake is an
// error then rather than requests that are never keyed.
func (k Key) Validate() error {
	switch k.kind {
	case keyIP:
		if k.v4 < 0 || k.v4 > 32 || k.v6 < 0 || k.v6 > 128 {
			return fmt.Errorf("admit: ClientPrefix(%d, %d): use 0 to 32 bits for IPv4 and 0 to 128 for IPv6", k.v4, k.v6)
		}
	case keyHeader:
		if k.header == "" {
			return errors.New(`admit: HeaderKey(""): name a header field`)
		}
	case keyFunc:
		if k.fn == nil {
			return errors.New("admit: KeyFunc(nil): give a function")
		}
	}
	return nil
}

// Of returns the key of the request that a describes, and false when it
// has none: its client's address is unknown (ClientIP, ClientPrefix), it
// lacks the header field or the field is empty (HeaderKey), the function
// says so (KeyFunc), or k is the zero Key. Of does not panic for a Key
// that Validate rejects: what is out of range gives no key.
//
// An address key is written in buf, and the string returned shares buf's
// memory: it is good only while buf is, and until buf is written again.
// Copy it (strings.Clone) to keep it. With buf a local variable, Of
// allocates nothing for ClientIP, ClientPrefix and HeaderKey (only
// Attempt.Client does, for the error of a RemoteAddr that is no address,
// such as a Unix socket's "@"):
//
//	var buf [admit.KeyBufLen]byte
//	key, ok := p.key.Of(&buf, a)
func (k *Key) Of(buf *[KeyBufLen]byte, a *Attempt) (key string, ok bool) {
	switch k.kind {
	case keyIP:
		b := k.appendIP(buf[:0], a)
		if len(b) == 0 {
			return "", false
		}
		return unsafe.String(unsafe.SliceData(b), len(b)), true
	case keyHeader:
		v := a.firstValue(k.header)
		return v, v != ""
	case keyFunc:
		if k.fn == nil {
			return "", false
		}
		if key, ok = k.fn(a); ok {
			return key, true
		}
	}
	return "", false
}

// appendIP appends the key of a's client address to b, or nothing when the
// address is unknown or the prefix length is out of range.
func (k *Key) appendIP(b []byte, a *Attempt) []byte {
	ap := a.Client()
	if !ap.IsValid() {
		return b
	}
	addr := ap.Addr().Unmap().WithZone("")
	bits := k.v6
	if addr.Is4() {
		bits = k.v4
	}
	if bits == addr.BitLen() {
		return addr.AppendTo(b)
	}
	p, err := addr.Prefix(bits) // an error for bits out of range
	if err != nil {
		return b
	}
	return p.AppendTo(b)
}
