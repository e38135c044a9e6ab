// Package laneadmin serves an authenticated HTTP endpoint through which an
// operator reads and changes, while the server runs, the lanes of a sluice
// executor: each lane's shares and priority, the policy (lanes.Strict or
// lanes.Shares) and the starvation guard.
//
// Nothing is served unless a program asks for it: it builds a Handler with
// New, over its runtime's lane set (rt.Lanes(), or a sluice Server's
// Runtime().Lanes()), and mounts it on a mux that only its operators can
// reach, such as one listening on a loopback or admin address. Every
// request must carry credentials (a bearer token, a check of the program's
// own, or both); every change is logged with the old and new values and the
// client's address.
//
//	GET  /admin/lanes                                    the state, as JSON
//	POST /admin/lanes  {"lane":"background","shares":30} one lane's shares
//	POST /admin/lanes  {"lane":"background","priority":2}
//	POST /admin/lanes  {"policy":"shares"}               the policy
//	POST /admin/lanes  {"guard":"5ms"}                   the starvation guard
//
// Apply is the validation and the change itself, for programs that offer
// the same changes through another channel (the dashboard's lane control
// uses it).
package laneadmin

import (
	"crypto/sha256"
	"crypto/subtle"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math"
	"mime"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/sluice-go/sluice/lanes"
)

// MinTokenLen is the shortest Config.Token that New accepts, in bytes.
const MinTokenLen = 16

// MaxBody is the largest request body the Handler reads, in bytes; a
// change is a small JSON object.
const MaxBody = 4 << 10

// Config configures a Handler. At least one of Token and Authorize must
// be set; when both are, a request must pass both.
type Config struct {
	// Token, when set, is a secret that every request must present as
	// "Authorization: Bearer <Token>". It is compared in constant time.
	// It must be at least MinTokenLen bytes of visible ASCII; draw it at
	// random (for example 32 hex digits from crypto/rand) and give it to
	// the program outside its command line, such as in the environment
	// or a file.
	Token string

	// Authorize, when set, is the program's own check of a request: the
	// client certificate's identity under mutual TLS (r.TLS), a session,
	// a network allow-list. It returns true to let the request through.
	// It is called after the Token check, only for requests that passed
	// it, and may be called concurrently.
	//
	// An Authorize that trusts a cookie should know that the Handler
	// takes changes only as application/json, which a browser sends
	// cross-origin only after a CORS preflight that nothing here answers.
	Authorize func(r *http.Request) bool

	// Logger receives a line at Info for every change made. Nil means
	// slog.Default() as of New.
	Logger *slog.Logger
}

// Handler is the lane admin endpoint, an http.Handler. New makes one.
//
// A request without valid credentials gets 401 Unauthorized with
// "WWW-Authenticate: Bearer" and nothing else: no state is shown, nothing
// is changed, and nothing is logged (Stats counts it).
//
// GET answers 200 with the State as JSON.
//
// POST takes one Change as a JSON object, sent with
// "Content-Type: application/json", at most MaxBody bytes, with no field
// other than those of Change. A change is exactly one of: a lane's shares
// and/or priority ({"lane":"background","shares":30,"priority":2}), the
// policy ({"policy":"shares"}), or the starvation guard ({"guard":"5ms"};
// "0" turns it off). The Handler applies it with Apply, logs it, and
// answers 200 with the new State. It answers 400 for a malformed or
// out-of-range change (the message names the value and what is accepted),
// 404 for a lane the set does not hold, 413 for a body over MaxBody, 415
// for another content type.
//
// Other methods get 405 Method Not Allowed with "Allow: GET, POST".
//
// The Handler serves any path: mount it at the path it should answer,
// for example admin.Handle("/admin/lanes", h).
type Handler struct {
	set       *lanes.Set
	tokenHash []byte // sha256 of Config.Token, or nil when none
	authorize func(*http.Request) bool
	log       *slog.Logger

	// mu serialises this Handler's changes, and its reads of the state
	// against them, so that each logged old value is the one replaced
	// and each State shown is whole.
	mu sync.Mutex

	changes atomic.Uint64
	refused atomic.Uint64
	invalid atomic.Uint64
}

// New returns a Handler serving the lanes of set. It fails for a nil set,
// when opts has neither a Token nor an Authorize, and for a Token shorter
// than MinTokenLen or with characters that cannot travel in a header.
func New(set *lanes.Set, opts Config) (*Handler, error) {
	if set == nil {
		return nil, errors.New("laneadmin: New needs a lane set: pass the runtime's rt.Lanes() (or a sluice Server's Runtime().Lanes())")
	}
	if opts.Token == "" && opts.Authorize == nil {
		return nil, errors.New("laneadmin: the lane admin endpoint changes how the server schedules; give it Config.Token or Config.Authorize")
	}
	h := &Handler{set: set, authorize: opts.Authorize, log: opts.Logger}
	if opts.Token != "" {
		if len(opts.Token) < MinTokenLen {
			return nil, fmt.Errorf("laneadmin: Config.Token is %d bytes, under the %d required: a short token can be guessed; use at least %d random bytes (for example 32 hex digits from crypto/rand)",
				len(opts.Token), MinTokenLen, MinTokenLen)
		}
		for i := 0; i < len(opts.Token); i++ {
			if c := opts.Token[i]; c <= ' ' || c >= 0x7f {
				return nil, fmt.Errorf("laneadmin: Config.Token has a space, a control or a non-ASCII byte at %d, which no client can send in an Authorization header; use visible ASCII, such as hex or base64", i)
			}
		}
		sum := sha256.Sum256([]byte(opts.Token))
		h.tokenHash = sum[:]
	}
	if h.log == nil {
		h.log = slog.Default()
	}
	return h, nil
}

// Stats are a Handler's counters since New.
type Stats struct {
	// Changes counts the changes applied.
	Changes uint64
	// Refused counts requests refused for their credentials (401).
	Refused uint64
	// Invalid counts requests that passed the credentials but were
	// refused for what they asked (400, 404, 405, 413, 415).
	Invalid uint64
}

// Stats returns the Handler's counters. It is safe to call concurrently
// with requests.
func (h *Handler) Stats() Stats {
	return Stats{Changes: h.changes.Load(), Refused: h.refused.Load(), Invalid: h.invalid.Load()}
}

// ServeHTTP checks the request's credentials, then shows the state (GET)
// or applies one change (POST), as the Handler's documentation describes.
func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Cache-Control", "no-store")
	if !h.authorized(r) {
		h.refused.Add(1)
		w.Header().Set("WWW-Authenticate", `Bearer realm="sluice lanes"`)
		http.Error(w, "unauthorized: the lane admin endpoint needs credentials", http.StatusUnauthorized)
		return
	}
	switch r.Method {
	case http.MethodGet:
		h.mu.Lock()
		st := StateOf(h.set)
		h.mu.Unlock()
		writeState(w, st)
	case http.MethodPost:
		h.post(w, r)
	default:
		h.invalid.Add(1)
		w.Header().Set("Allow", "GET, POST")
		http.Error(w, "method "+r.Method+" not allowed: GET the lanes, or POST one change as JSON", http.StatusMethodNotAllowed)
	}
}

// authorized reports whether r passes the Token check and the Authorize
// check, each where set.
func (h *Handler) authorized(r *http.Request) bool {
	if h.tokenHash != nil {
		scheme, cred, ok := strings.Cut(r.Header.Get("Authorization"), " ")
		if !ok || !strings.EqualFold(scheme, "Bearer") {
			return false
		}
		// Hashing both sides makes the comparison as long whatever the
		// presented token's length.
		sum := sha256.Sum256([]byte(strings.TrimLeft(cred, " ")))
		if subtle.ConstantTimeCompare(sum[:], h.tokenHash) != 1 {
			return false
		}
	}
	if h.authorize != nil && !h.authorize(r) {
		return false
	}
	return true
}

// changeForms lists the accepted changes, for the messages of 400s.
func changeForms() string {
	return fmt.Sprintf(`a change is one JSON object: {"lane":NAME,"shares":1..%d,"priority":N} (shares, priority or both), {"policy":"strict"|"shares"}, or {"guard":DURATION} such as "500µs", "5ms", or "0" for off`, lanes.MaxShares)
}

func (h *Handler) post(w http.ResponseWriter, r *http.Request) {
	mt, _, err := mime.ParseMediaType(r.Header.Get("Content-Type"))
	if err != nil || mt != "application/json" {
		h.invalid.Add(1)
		http.Error(w, "the change must be sent with Content-Type: application/json", http.StatusUnsupportedMediaType)
		return
	}
	var c Change
	dec := json.NewDecoder(http.MaxBytesReader(w, r.Body, MaxBody))
	dec.DisallowUnknownFields()
	err = dec.Decode(&c)
	if err == nil {
		// One object, and nothing after it.
		var more json.RawMessage
		if err = dec.Decode(&more); err == io.EOF {
			err = nil
		} else if err == nil {
			err = errors.New("laneadmin: more than one JSON value in the body")
		}
	}
	if err != nil {
		h.invalid.Add(1)
		var tooBig *http.MaxBytesError
		if errors.As(err, &tooBig) {
			http.Error(w, fmt.Sprintf("the body is over %d bytes; %s", MaxBody, changeForms()), http.StatusRequestEntityTooLarge)
			return
		}
		http.Error(w, "bad change: "+err.Error()+"; "+changeForms(), http.StatusBadRequest)
		return
	}

	h.mu.Lock()
	what, old, now, err := Apply(h.set, c)
	var st State
	if err == nil {
		st = StateOf(h.set)
	}
	h.mu.Unlock()
	if err != nil {
		h.invalid.Add(1)
		code := http.StatusBadRequest
		if errors.Is(err, lanes.ErrNoSuchLane) {
			code = http.StatusNotFound
		}
		http.Error(w, err.Error(), code)
		return
	}
	h.changes.Add(1)
	h.log.Info("laneadmin: lanes changed", "what", what, "from", old, "to", now, "remote", r.RemoteAddr)
	writeState(w, st)
}

func writeState(w http.ResponseWriter, st State) {
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(st)
}

// State is the lanes' configuration as the Handler shows it, in JSON:
//
//	{"policy":"strict","guard":"500µs","guard_ns":500000,
//	 "lanes":[{"id":0,"name":"continuation","priority":0,"shares":800}, ...]}
type State struct {
	// Policy is the policy's name: "strict" or "shares".
	Policy string `json:"policy"`
	// Guard is the starvation guard of the Strict policy as a Go
	// duration ("500µs"); "0s" when it is off.
	Guard string `json:"guard"`
	// GuardNS is the same guard in nanoseconds; zero when it is off.
	GuardNS int64 `json:"guard_ns"`
	// Lanes are the lanes in ID order, built-in ones first.
	Lanes []LaneState `json:"lanes"`
}

// LaneState is one lane in a State.
type LaneState struct {
	// ID is the lane's lanes.ID.
	ID lanes.ID `json:"id"`
	// Name, Priority and Shares are the lane's lanes.Spec now.
	Name     string `json:"name"`
	Priority int32  `json:"priority"`
	Shares   uint32 `json:"shares"`
}

// StateOf returns the configuration of set now. Each value is read
// atomically, but a change made meanwhile by another goroutine may show
// in some values and not others.
func StateOf(set *lanes.Set) State {
	g := set.Guard()
	if g < 0 {
		g = 0
	}
	st := State{Policy: set.Policy().String(), Guard: g.String(), GuardNS: int64(g)}
	n := set.Len()
	st.Lanes = make([]LaneState, 0, n)
	for i := 0; i < n; i++ {
		id := lanes.ID(i)
		sp, err := set.Spec(id)
		if err != nil {
			continue
		}
		st.Lanes = append(st.Lanes, LaneState{ID: id, Name: sp.Name, Priority: sp.Priority, Shares: sp.Shares})
	}
	return st
}

// Change is one change to a lane set: exactly one of a lane's shares
// and/or priority (Lane with Shares, Priority or both), the Policy, or the
// Guard. It is also the JSON body the Handler takes. The optional fields
// are pointers: Change{Lane: "background", Shares: new(int64(30))}.
type Change struct {
	// Lane names the lane whose Shares or Priority change.
	Lane string `json:"lane,omitempty"`
	// Shares, when set, is the lane's new shares, 1 to lanes.MaxShares.
	// Zero is refused: lanes.Set.SetShares takes it to mean
	// DefaultShares, which an operator would not expect.
	Shares *int64 `json:"shares,omitempty"`
	// Priority, when set, is the lane's new priority, any int32; lower
	// runs first under the Strict policy.
	Priority *int64 `json:"priority,omitempty"`
	// Policy, when not empty, is the new policy by name: "strict" or
	// "shares" (lanes.Policy.String).
	Policy string `json:"policy,omitempty"`
	// Guard, when set, is the new starvation guard: zero turns it off,
	// a negative one is refused. In JSON it is a Go duration string.
	Guard *Duration `json:"guard,omitempty"`
}

// Duration is a time.Duration written in JSON as a Go duration string
// ("500µs", "5ms", "0").
type Duration time.Duration

// MarshalText writes d as time.Duration.String does.
func (d Duration) MarshalText() ([]byte, error) { return []byte(time.Duration(d).String()), nil }

// UnmarshalText reads a duration as time.ParseDuration does.
func (d *Duration) UnmarshalText(b []byte) error {
	v, err := time.ParseDuration(string(b))
	if err != nil {
		return fmt.Errorf(`laneadmin: guard %q is not a Go duration: give one such as "500µs" or "5ms", or "0" to turn the guard off`, b)
	}
	*d = Duration(v)
	return nil
}

// noSuchLane is the error for a lane the set does not hold; it matches
// lanes.ErrNoSuchLane under errors.Is.
type noSuchLane struct {
	name  string
	known []string
}

func (e *noSuchLane) Error() string {
	return fmt.Sprintf("laneadmin: no lane %q: the lanes are %s", e.name, strings.Join(e.known, ", "))
}

func (e *noSuchLane) Is(target error) bool { return target == lanes.ErrNoSuchLane }

// Apply validates the change c and makes it to set, and says what it
// changed: what names it ("lane background shares", "policy"), old and now
// are the values before and after, for a log line. A lane change that sets
// both shares and priority reports both, as "shares=30 priority=2".
//
// Nothing is changed when err is not nil. An error for a lane that set
// does not hold matches lanes.ErrNoSuchLane under errors.Is; any other
// error is a malformed or out-of-range change, and its message names the
// value and what is accepted.
//
// Each of set's values is changed atomically, but Apply itself is not:
// concurrent calls may report an old value that another call had already
// replaced. A caller that logs old values serialises its calls (the
// Handler does).
func Apply(set *lanes.Set, c Change) (what string, old, now any, err error) {
	if set == nil {
		return "", nil, nil, errors.New("laneadmin: no lane set")
	}
	laneChange := c.Lane != "" || c.Shares != nil || c.Priority != nil
	kinds := 0
	for _, b := range []bool{laneChange, c.Policy != "", c.Guard != nil} {
		if b {
			kinds++
		}
	}
	if kinds != 1 {
		return "", nil, nil, fmt.Errorf(`laneadmin: a change is exactly one of: a lane's "shares" and/or "priority" (with "lane"), "policy", or "guard"; this one has %d`, kinds)
	}
	switch {
	case laneChange:
		return applyLane(set, c)
	case c.Policy != "":
		what = "policy"
		var p lanes.Policy
		switch c.Policy {
		case lanes.Strict.String():
			p = lanes.Strict
		case lanes.Shares.String():
			p = lanes.Shares
		default:
			return what, nil, nil, fmt.Errorf(`laneadmin: policy %q is not one of "strict" or "shares"`, c.Policy)
		}
		old := set.Policy()
		if err := set.SetPolicy(p); err != nil {
			return what, nil, nil, err
		}
		return what, old.String(), p.String(), nil
	default:
		what = "guard"
		g := time.Duration(*c.Guard)
		if g < 0 {
			return what, nil, nil, fmt.Errorf(`laneadmin: guard %v is negative: give 0 to turn it off, or a positive duration such as "500µs"`, g)
		}
		old := set.Guard()
		set.SetGuard(g)
		return what, old, g, nil
	}
}

func applyLane(set *lanes.Set, c Change) (what string, old, now any, err error) {
	if c.Lane == "" {
		return "lane", nil, nil, errors.New(`laneadmin: "shares" and "priority" need the "lane" they change`)
	}
	switch {
	case c.Shares != nil && c.Priority != nil:
		what = "lane " + c.Lane + " shares and priority"
	case c.Shares != nil:
		what = "lane " + c.Lane + " shares"
	case c.Priority != nil:
		what = "lane " + c.Lane + " priority"
	default:
		return "lane " + c.Lane, nil, nil, fmt.Errorf(`laneadmin: a change of lane %q needs "shares" (1 to %d), "priority", or both`, c.Lane, lanes.MaxShares)
	}
	id, ok := set.Lookup(c.Lane)
	if !ok {
		known := make([]string, 0, set.Len())
		for i := 0; i < set.Len(); i++ {
			known = append(known, set.Name(lanes.ID(i)))
		}
		return what, nil, nil, &noSuchLane{name: c.Lane, known: known}
	}
	if c.Shares != nil {
		if s := *c.Shares; s < 1 || s > lanes.MaxShares {
			return what, nil, nil, fmt.Errorf("laneadmin: shares %d for lane %q is out of range: give 1 to %d", s, c.Lane, lanes.MaxShares)
		}
	}
	if c.Priority != nil {
		if p := *c.Priority; p < math.MinInt32 || p > math.MaxInt32 {
			return what, nil, nil, fmt.Errorf("laneadmin: priority %d for lane %q is out of range: give %d to %d (lower runs first)", p, c.Lane, math.MinInt32, math.MaxInt32)
		}
	}
	spec, err := set.Spec(id)
	if err != nil {
		return what, nil, nil, err
	}
	// Both values are validated: neither setter can fail now, so a change
	// is made whole or not at all.
	if c.Shares != nil {
		if err := set.SetShares(id, uint32(*c.Shares)); err != nil {
			return what, nil, nil, err
		}
	}
	if c.Priority != nil {
		if err := set.SetPriority(id, int32(*c.Priority)); err != nil {
			return what, nil, nil, err
		}
	}
	switch {
	case c.Shares != nil && c.Priority != nil:
		return what, fmt.Sprintf("shares=%d priority=%d", spec.Shares, spec.Priority),
			fmt.Sprintf("shares=%d priority=%d", *c.Shares, *c.Priority), nil
	case c.Shares != nil:
		return what, spec.Shares, uint32(*c.Shares), nil
	default:
		return what, spec.Priority, int32(*c.Priority), nil
	}
}
