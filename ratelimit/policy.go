package ratelimit

import (
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/sluice-go/sluice/admit"
	"github.com/sluice-go/sluice/reject"
)

// ContentLength is a PolicyConfig.Cost for a quota of bytes received: the
// request's declared Content-Length (0 when it declares none, as a chunked
// body does: charge the bytes read with Limiter.Charge if they must count).
// Use it with Unit "content-bytes".
func ContentLength(a *admit.Attempt) int64 {
	if r, ok := a.Request.(*http.Request); ok {
		return max(r.ContentLength, 0)
	}
	if v := a.Header["Content-Length"]; len(v) > 0 {
		if n, err := strconv.ParseInt(v[0], 10, 64); err == nil && n > 0 {
			return n
		}
	}
	return 0
}

// PolicyConfig configures a Policy.
type PolicyConfig struct {
	// Name identifies the quota in the answer's RateLimit-Policy and
	// RateLimit fields; zero means "default". It must be printable ASCII.
	Name string
	// Key says which quota a request counts against: its client's address
	// (admit.ClientIP, admit.ClientPrefix), a header field such as an API
	// key or a tenant (admit.HeaderKey), or a function of the request
	// (admit.KeyFunc). The zero Key means admit.ClientIP(). A request
	// without a key (no such header field, say) is not limited by this
	// policy: put a policy by admit.ClientIP after it to limit those. A
	// key longer than MaxKeyLen bytes is counted under its first bytes and
	// a hash (see Limiter.Allow).
	Key admit.Key
	// Cost is what a request counts for: nil means 1 (a quota of
	// requests); ContentLength counts the bytes a request declares. It is
	// called for each request the policy decides on (and again for an
	// admission taken back), on the deciding goroutine: it must be quick
	// and must give the same answer both times.
	Cost func(a *admit.Attempt) int64
	// Unit is the quota unit the RateLimit-Policy field names (its "qu"
	// parameter): "" or "requests" (the draft's default, not written),
	// "content-bytes", or another token of the draft's registry.
	Unit string
}

// Policy is a Limiter as an admission policy (admit.Config.Policies): a
// request over its key's quota is refused before any of its work, with
// 429 Too Many Requests, and never waits in the queue (policies are asked
// before the gates). The answer carries the rejection fields every refusal
// has (Sluice-Not-Started: 1, safe to retry later; Sluice-Reject-Reason:
// rate-limit), and says which quota and when it has room again, with
// Retry-After and the fields of the IETF draft
// draft-ietf-httpapi-ratelimit-headers (version 10):
//
//	HTTP/1.1 429 Too Many Requests
//	Ratelimit: "default";r=0;t=12
//	Ratelimit-Policy: "default";q=100;w=60
//	Retry-After: 12
//	Sluice-Not-Started: 1
//	Sluice-Reject-Reason: rate-limit
//
// q is the key's quota per window and w the window in seconds (left out
// for a window that is not a whole number of seconds); r is what remains
// of the quota under the sliding window (0 for a quota of requests; for a
// quota of bytes the request needed more than r), and t, like Retry-After,
// the seconds until the sliding window has room for the request again. A
// request that can never fit (a cost over its whole quota, or a quota of
// 0) gets neither t nor Retry-After. The key itself is never written (the
// draft's pk): it may be a secret.
//
// A request this policy admitted and a later policy or gate refused does
// not use its quota: Done takes its units back (Limiter.Refund). Admitted
// responses carry no RateLimit fields: a policy has no hold on them (a
// handler can write them from Limiter.AllowN(key, 0)).
//
// Refusals are built once per quota, reset time and remaining units, and
// kept (256 of them); Retry-After is one of their fields rather than the
// pipeline's, so that the pipeline's answer stays one prebuilt answer for
// every value.
type Policy struct {
	l      *Limiter
	by     admit.Key
	cost   func(a *admit.Attempt) int64
	name   string // as a structured-field string, quoted
	params string // ";qu=..." or ""
	window string // ";w=60" or ""
	cache  [refusalSlots]atomic.Pointer[cachedRefusal]
}

// refusalSlots is the size of the cache of built refusals.
const refusalSlots = 256

// refusalKey is what an answer depends on.
type refusalKey struct{ quota, t, r int64 }

type cachedRefusal struct {
	k refusalKey
	r *admit.Refusal
}

// NewPolicy returns l as an admission policy. It fails, naming the value,
// for a nil Limiter, a name or unit that cannot be written in the
// RateLimit fields, or a Key that cannot work (admit.Key.Validate: a
// prefix length out of range, a KeyFunc without a function).
func NewPolicy(l *Limiter, opts PolicyConfig) (*Policy, error) {
	var errs []error
	if l == nil {
		errs = append(errs, errors.New("the Limiter is nil"))
	}
	name := opts.Name
	if name == "" {
		name = "default"
	}
	for _, c := range []byte(name) {
		if c < 0x20 || c > 0x7e {
			errs = append(errs, fmt.Errorf("PolicyConfig.Name %q: only printable ASCII can be written in a RateLimit field", opts.Name))
			break
		}
	}
	unit := opts.Unit
	if unit == "requests" {
		unit = ""
	}
	for _, c := range []byte(unit) {
		if !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '-') {
			errs = append(errs, fmt.Errorf("PolicyConfig.Unit %q: use \"requests\", \"content-bytes\" or another lowercase token", opts.Unit))
			break
		}
	}
	by := opts.Key
	if by.IsZero() {
		by = admit.ClientIP()
	}
	if err := by.Validate(); err != nil {
		errs = append(errs, fmt.Errorf("PolicyConfig.Key: %w", err))
	}
	if err := errors.Join(errs...); err != nil {
		return nil, fmt.Errorf("ratelimit: NewPolicy: %w", err)
	}
	p := &Policy{l: l, by: by, cost: opts.Cost, name: sfString(name)}
	if unit != "" {
		p.params = ";qu=" + sfString(unit)
	}
	if w := l.Window(); w >= time.Second && w%time.Second == 0 {
		p.window = ";w=" + strconv.FormatInt(int64(w/time.Second), 10)
	}
	return p, nil
}

// Admit counts the request against its key's quota, or refuses it when it
// does not fit.
func (p *Policy) Admit(a *admit.Attempt) *admit.Refusal {
	var buf [admit.KeyBufLen]byte
	key, ok := p.by.Of(&buf, a)
	if !ok {
		return nil
	}
	r := p.l.decide(key, p.costOf(a), false)
	if r.Allowed {
		return nil
	}
	return p.refusal(r)
}

// Done takes back the units of an admission that never ran (a later policy
// or gate refused the request, or it left the queue unstarted); a request
// that ran keeps them.
func (p *Policy) Done(a *admit.Attempt, o admit.Outcome) {
	if !o.Canceled {
		return
	}
	var buf [admit.KeyBufLen]byte
	if key, ok := p.by.Of(&buf, a); ok {
		p.l.Refund(key, p.costOf(a))
	}
}

func (p *Policy) costOf(a *admit.Attempt) int64 {
	if p.cost == nil {
		return 1
	}
	return max(p.cost(a), 0)
}

// refusal returns the refusal for r, built once per quota, reset time and
// remaining units (a small cache; a miss builds a new one).
func (p *Policy) refusal(r Result) *admit.Refusal {
	k := refusalKey{quota: r.Quota, t: -1, r: r.Remaining}
	if r.RetryAfter >= 0 {
		k.t = max(int64((r.RetryAfter+time.Second-1)/time.Second), 1)
	}
	slot := &p.cache[uint64(k.quota*31+k.t*7+k.r)%refusalSlots]
	if c := slot.Load(); c != nil && c.k == k {
		return c.r
	}
	c := &cachedRefusal{k: k, r: p.build(k)}
	slot.Store(c)
	return c.r
}

// build writes the answer's fields for k.
func (p *Policy) build(k refusalKey) *admit.Refusal {
	policy := p.name + ";q=" + strconv.FormatInt(k.quota, 10) + p.params + p.window
	limit := p.name + ";r=" + strconv.FormatInt(k.r, 10)
	h := http.Header{"Ratelimit-Policy": {policy}}
	if k.t >= 0 {
		t := strconv.FormatInt(k.t, 10)
		limit += ";t=" + t
		h["Retry-After"] = []string{t}
	}
	h["Ratelimit"] = []string{limit}
	// Retry-After is one of the refusal's own fields, not the pipeline's:
	// the pipeline prebuilds a few answers per reason, one per Retry-After
	// value, and a quota's take every value up to two windows.
	return &admit.Refusal{
		Reason:     reject.RateLimit,
		Status:     http.StatusTooManyRequests,
		RetryAfter: -1,
		Header:     h,
	}
}

// sfString writes s as a structured-field String (RFC 9651): quoted, with
// '"' and '\' escaped. s is printable ASCII.
func sfString(s string) string {
	var b strings.Builder
	b.WriteByte('"')
	for i := 0; i < len(s); i++ {
		if s[i] == '"' || s[i] == '\\' {
			b.WriteByte('\\')
		}
		b.WriteByte(s[i])
	}
	b.WriteByte('"')
	return b.String()
}

var _ admit.Policy = (*Policy)(nil)
