package admit_test

import (
	"fmt"
	"net/http"
	"net/netip"
	"strings"
	"testing"
	"unsafe"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sluice-go/sluice/admit"
)

// keyOf returns k's key for a, copied, or "(none)" when it has none.
func keyOf(k admit.Key, a *admit.Attempt) string {
	var buf [admit.KeyBufLen]byte
	s, ok := k.Of(&buf, a)
	if !ok {
		if s != "" {
			return "(none, yet " + s + ")"
		}
		return "(none)"
	}
	return strings.Clone(s)
}

func peer(s string) *admit.Attempt {
	return &admit.Attempt{Peer: netip.MustParseAddrPort(s)}
}

func remote(s string) *admit.Attempt { return &admit.Attempt{RemoteAddr: s} }

func TestKeyClientIP(t *testing.T) {
	k := admit.ClientIP()
	for _, tc := range []struct {
		a    *admit.Attempt
		want string
		msg  string
	}{
		{peer("203.0.113.7:5555"), "203.0.113.7", "IPv4: the address"},
		{remote("192.0.2.9:4000"), "192.0.2.9", "net/http's RemoteAddr"},
		{peer("[::ffff:203.0.113.7]:1"), "203.0.113.7", "a mapped IPv4 address is the IPv4 address"},
		{remote("[::ffff:192.0.2.9]:4000"), "192.0.2.9", "mapped, as text"},
		{peer("[2001:db8:1:2:aaaa:bbbb:cccc:dddd]:1"), "2001:db8:1:2::/64", "IPv6: the /64"},
		{peer("[2001:db8:1:2:aaaa:bbbb:cccc:dddd%eth0]:1"), "2001:db8:1:2::/64", "the zone dropped"},
		{remote("[fe80::1%eth0]:80"), "fe80::/64", "RemoteAddr with a zone"},
		{&admit.Attempt{Peer: netip.MustParseAddrPort("198.51.100.1:1"), RemoteAddr: "192.0.2.9:4000"},
			"198.51.100.1", "Peer before RemoteAddr"},
		{&admit.Attempt{}, "(none)", "no address"},
		{remote("@"), "(none)", "a RemoteAddr that is no address (a Unix socket)"},
		{remote("192.0.2.9"), "(none)", "a RemoteAddr without a port"},
	} {
		assert.Equal(t, tc.want, keyOf(k, tc.a), tc.msg)
	}
}

func TestKeyClientPrefix(t *testing.T) {
	for _, tc := range []struct {
		k    admit.Key
		a    *admit.Attempt
		want string
	}{
		{admit.ClientPrefix(24, 48), peer("198.51.100.77:1"), "198.51.100.0/24"},
		{admit.ClientPrefix(24, 48), peer("[2001:db8:1:2::1]:1"), "2001:db8:1::/48"},
		{admit.ClientPrefix(24, 48), peer("[::ffff:198.51.100.77]:1"), "198.51.100.0/24"},
		{admit.ClientPrefix(24, 48), remote("[::ffff:198.51.100.77]:1"), "198.51.100.0/24"},
		{admit.ClientPrefix(16, 56), remote("[2001:db8:1:2ff::1%eth0]:1"), "2001:db8:1:200::/56"},
		{admit.ClientPrefix(32, 128), peer("[2001:db8::1]:1"), "2001:db8::1"},
		{admit.ClientPrefix(32, 128), peer("198.51.100.77:1"), "198.51.100.77"},
		{admit.ClientPrefix(0, 0), peer("198.51.100.77:1"), "0.0.0.0/0"},
		{admit.ClientPrefix(0, 0), peer("[2001:db8::1]:1"), "::/0"},
		{admit.ClientPrefix(24, 48), &admit.Attempt{}, "(none)"},
		// Out of range (Validate rejects them): no key, no panic.
		{admit.ClientPrefix(33, 64), peer("198.51.100.77:1"), "(none)"},
		{admit.ClientPrefix(33, 64), peer("[2001:db8::1]:1"), "2001:db8::/64"},
		{admit.ClientPrefix(-1, 129), peer("[2001:db8::1]:1"), "(none)"},
		{admit.ClientPrefix(-1, 129), peer("198.51.100.77:1"), "(none)"},
	} {
		assert.Equal(t, tc.want, keyOf(tc.k, tc.a), "%v", tc.a.Client())
	}
	assert.Equal(t, keyOf(admit.ClientIP(), peer("[2001:db8::1]:1")), keyOf(admit.ClientPrefix(32, 64), peer("[2001:db8::1]:1")))
}

func TestKeyHeader(t *testing.T) {
	h := func(kv ...string) *admit.Attempt {
		a := &admit.Attempt{Header: http.Header{}}
		for i := 0; i < len(kv); i += 2 {
			a.Header[kv[i]] = append(a.Header[kv[i]], kv[i+1])
		}
		return a
	}
	k := admit.HeaderKey("x-api-key")
	assert.Equal(t, "k1", keyOf(k, h("X-Api-Key", "k1")), "the name in any case")
	assert.Equal(t, "k1", keyOf(admit.HeaderKey("X-API-KEY"), h("X-Api-Key", "k1")))
	assert.Equal(t, "k1", keyOf(k, h("X-Api-Key", "k1", "X-Api-Key", "k2")), "the first value")
	assert.Equal(t, "a b,c", keyOf(k, h("X-Api-Key", "a b,c")), "the value as it is")
	assert.Equal(t, "(none)", keyOf(k, h()), "missing")
	assert.Equal(t, "(none)", keyOf(k, h("X-Tenant", "t1")), "another field")
	assert.Equal(t, "(none)", keyOf(k, h("X-Api-Key", "")), "empty")
	assert.Equal(t, "(none)", keyOf(k, h("X-Api-Key", "", "X-Api-Key", "k2")), "an empty first value")
	assert.Equal(t, "(none)", keyOf(k, &admit.Attempt{Header: http.Header{"X-Api-Key": {}}}), "no values")
	assert.Equal(t, "(none)", keyOf(k, &admit.Attempt{}), "no header at all")
	assert.Equal(t, "(none)", keyOf(k, peer("203.0.113.7:1")), "not the address")
}

func TestKeyFunc(t *testing.T) {
	calls := 0
	k := admit.KeyFunc(func(a *admit.Attempt) (string, bool) {
		calls++
		return a.Method + " " + a.Path, a.Path != ""
	})
	assert.Equal(t, "GET /a", keyOf(k, &admit.Attempt{Method: "GET", Path: "/a"}))
	assert.Equal(t, "(none)", keyOf(k, &admit.Attempt{Method: "GET"}), "the function says none: no key, whatever it returned")
	assert.Equal(t, 2, calls, "once per Of")
	empty := admit.KeyFunc(func(*admit.Attempt) (string, bool) { return "", true })
	assert.Equal(t, "", keyOf(empty, &admit.Attempt{}), "the function's answer, as it is")
	assert.Equal(t, "(none)", keyOf(admit.KeyFunc(nil), &admit.Attempt{Path: "/a"}), "nil: no key, no panic")
}

func TestZeroKey(t *testing.T) {
	var zero admit.Key
	assert.True(t, zero.IsZero())
	assert.NoError(t, zero.Validate())
	a := &admit.Attempt{Peer: netip.MustParseAddrPort("203.0.113.7:1"), Header: http.Header{"X-Api-Key": {"k1"}}}
	assert.Equal(t, "(none)", keyOf(zero, a), "the zero Key keys nothing")
	for _, k := range []admit.Key{
		admit.ClientIP(), admit.ClientPrefix(0, 0), admit.HeaderKey("X-Api-Key"), admit.HeaderKey(""),
		admit.KeyFunc(func(*admit.Attempt) (string, bool) { return "", false }), admit.KeyFunc(nil),
	} {
		assert.False(t, k.IsZero())
	}
}

func TestKeyValidate(t *testing.T) {
	for _, k := range []admit.Key{
		admit.ClientIP(), admit.ClientPrefix(0, 0), admit.ClientPrefix(32, 128), admit.HeaderKey("X-Api-Key"),
		admit.KeyFunc(func(*admit.Attempt) (string, bool) { return "", false }),
	} {
		assert.NoError(t, k.Validate())
	}
	for _, tc := range []struct {
		k    admit.Key
		want string
	}{
		{admit.ClientPrefix(33, 64), "admit: ClientPrefix(33, 64): use 0 to 32 bits for IPv4 and 0 to 128 for IPv6"},
		{admit.ClientPrefix(24, 129), "admit: ClientPrefix(24, 129)"},
		{admit.ClientPrefix(-1, 64), "admit: ClientPrefix(-1, 64)"},
		{admit.ClientPrefix(24, -8), "admit: ClientPrefix(24, -8)"},
		{admit.HeaderKey(""), `admit: HeaderKey(""): name a header field`},
		{admit.KeyFunc(nil), "admit: KeyFunc(nil): give a function"},
	} {
		if err := tc.k.Validate(); assert.Error(t, err, tc.want) {
			assert.Contains(t, err.Error(), tc.want)
		}
	}
}

// An address key is written in the caller's buffer; a header key is the
// header's own string: neither is a copy.
func TestKeyOfSharesMemory(t *testing.T) {
	var buf [admit.KeyBufLen]byte
	k := admit.ClientIP()
	s, ok := k.Of(&buf, peer("[2001:db8:1:2::1]:1"))
	require.True(t, ok)
	assert.Same(t, &buf[0], unsafe.StringData(s), "written in buf")
	assert.Equal(t, "2001:db8:1:2::/64", string(buf[:len(s)]))

	// The longest address key fits.
	k = admit.ClientPrefix(32, 128)
	s, ok = k.Of(&buf, peer("[ffff:ffff:ffff:ffff:ffff:ffff:ffff:fffe]:1"))
	require.True(t, ok)
	assert.Equal(t, "ffff:ffff:ffff:ffff:ffff:ffff:ffff:fffe", s)
	assert.Same(t, &buf[0], unsafe.StringData(s))
	k = admit.ClientPrefix(32, 127)
	s, ok = k.Of(&buf, peer("[ffff:ffff:ffff:ffff:ffff:ffff:ffff:fffe]:1"))
	require.True(t, ok)
	assert.Equal(t, "ffff:ffff:ffff:ffff:ffff:ffff:ffff:fffe/127", s)
	assert.Same(t, &buf[0], unsafe.StringData(s))

	v := "k1"
	k = admit.HeaderKey("X-Api-Key")
	s, ok = k.Of(&buf, &admit.Attempt{Header: http.Header{"X-Api-Key": {v}}})
	require.True(t, ok)
	assert.Same(t, unsafe.StringData(v), unsafe.StringData(s), "the header's value")
}

func TestKeyOfDoesNotAllocate(t *testing.T) {
	tenant := admit.KeyFunc(func(a *admit.Attempt) (string, bool) {
		tenant, _, _ := strings.Cut(strings.TrimPrefix(a.Path, "/"), "/")
		return tenant, tenant != ""
	})
	for _, tc := range []struct {
		name string
		k    admit.Key
		a    *admit.Attempt
	}{
		{"ipv4", admit.ClientIP(), peer("203.0.113.7:5555")},
		{"ipv6", admit.ClientIP(), peer("[2001:db8:1:2::7%eth0]:5555")},
		{"mapped", admit.ClientIP(), peer("[::ffff:203.0.113.7]:5555")},
		{"prefix", admit.ClientPrefix(24, 48), peer("[2001:db8:1:2::7]:5555")},
		{"remote-addr-ipv4", admit.ClientIP(), remote("192.0.2.7:4000")},
		{"remote-addr-ipv6", admit.ClientIP(), remote("[2001:db8::7]:4000")},
		{"header", admit.HeaderKey("X-Api-Key"), &admit.Attempt{Header: http.Header{"X-Api-Key": {"secret"}}}},
		{"header-missing", admit.HeaderKey("X-Api-Key"), &admit.Attempt{Header: http.Header{}}},
		{"func", tenant, &admit.Attempt{Path: "/acme/orders"}},
		{"zero", admit.Key{}, peer("203.0.113.7:5555")},
		// Not here: an Attempt whose RemoteAddr is no address ("", "@"),
		// whose parse in Attempt.Client allocates its error.
	} {
		t.Run(tc.name, func(t *testing.T) {
			k := tc.k
			n := 0
			assert.Zero(t, testing.AllocsPerRun(1000, func() {
				var buf [admit.KeyBufLen]byte
				key, _ := k.Of(&buf, tc.a)
				n += len(key)
			}))
		})
	}
}

// The kinds of Key, for one request. A policy that counts per caller
// takes a Key in its options and calls Of for each request, with a buffer
// of its own.
func ExampleKey() {
	a := &admit.Attempt{
		Method:     http.MethodGet,
		Path:       "/acme/orders",
		Header:     http.Header{"X-Api-Key": {"k-123"}},
		RemoteAddr: "[2001:db8:1:2::7]:50123",
	}
	for _, k := range []admit.Key{
		admit.ClientIP(),
		admit.ClientPrefix(24, 48),
		admit.HeaderKey("x-api-key"),
		admit.HeaderKey("X-Tenant"),
		admit.KeyFunc(func(a *admit.Attempt) (string, bool) {
			tenant, _, _ := strings.Cut(strings.TrimPrefix(a.Path, "/"), "/")
			return tenant, tenant != ""
		}),
		{}, // the zero Key
	} {
		var buf [admit.KeyBufLen]byte
		key, ok := k.Of(&buf, a)
		fmt.Printf("%q %v\n", key, ok)
	}
	// Output:
	// "2001:db8:1:2::/64" true
	// "2001:db8:1::/48" true
	// "k-123" true
	// "" false
	// "acme" true
	// "" false
}

func TestKeyHeaderReadsPickedFields(t *testing.T) {
	k := admit.HeaderKey("x-tenant")
	name, ok := k.HeaderName()
	require.True(t, ok)
	assert.Equal(t, "X-Tenant", name)
	_, ok = admit.ClientIP().HeaderName()
	assert.False(t, ok)

	// The picked value is read; the map is not (here it disagrees, which
	// an adapter must never let happen, to show which one is read).
	a := &admit.Attempt{Header: http.Header{"X-Tenant": {"from the map"}},
		Picked: []admit.Field{{Name: "Authorization"}, {Name: "X-Tenant", Value: "picked"}}}
	assert.Equal(t, "picked", keyOf(k, a))
	a.Picked[1].Value = ""
	assert.Equal(t, "(none)", keyOf(k, a), "picked as absent")
	a.Picked = a.Picked[:1]
	assert.Equal(t, "from the map", keyOf(k, a), "not among the picked: the map")
	a.Picked = nil
	assert.Equal(t, "from the map", keyOf(k, a))
}

// picker is a policy that admits everything and asks for header fields
// to be picked out.
type picker struct{ names []string }

func (picker) Admit(*admit.Attempt) *admit.Refusal { return nil }
func (picker) Done(*admit.Attempt, admit.Outcome)  {}

func (p picker) Attach(env admit.Env) (func(), error) {
	for _, n := range p.names {
		env.PickHeader(n)
	}
	return nil, nil
}

func TestPipelinePickedHeaders(t *testing.T) {
	p, err := admit.New(admit.Config{Policies: []admit.Policy{
		picker{[]string{"x-tenant", "X-Tenant", "authorization"}},
		picker{[]string{"a", "b", "c", "d"}},
	}}, admit.Host{})
	require.NoError(t, err)
	defer p.Close()
	assert.Equal(t, []string{admit.TimeoutHeader, "X-Tenant", "Authorization", "A"}, p.PickedHeaders(),
		"the deadline's field first (read for every request), then the policies' names: canonical, once each, at most MaxPicked")
}
