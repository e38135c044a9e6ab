package laneadmin

import (
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/sluice-go/sluice/internal/syncbuf"
	"github.com/sluice-go/sluice/lanes"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

const token = "0123456789abcdef0123456789abcdef"

// newSet returns a set with the built-in lanes and a "background" lane.
func newSet(t *testing.T) (*lanes.Set, lanes.ID) {
	t.Helper()
	set := lanes.NewSet()
	bg, err := set.Register(lanes.Spec{Name: "background", Priority: 2, Shares: 50})
	require.NoError(t, err)
	return set, bg
}

func newHandler(t *testing.T, set *lanes.Set, opts Config) (*Handler, *syncbuf.Buffer) {
	t.Helper()
	var logs syncbuf.Buffer
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.NewTextHandler(&logs, nil))
	}
	h, err := New(set, opts)
	require.NoError(t, err)
	return h, &logs
}

// do sends a request to h, with the token unless mod changes it.
func do(h http.Handler, method, body string, mod func(*http.Request)) *httptest.ResponseRecorder {
	r := httptest.NewRequest(method, "/admin/lanes", strings.NewReader(body))
	r.RemoteAddr = "192.0.2.7:4321"
	r.Header.Set("Authorization", "Bearer "+token)
	if method == http.MethodPost {
		r.Header.Set("Content-Type", "application/json")
	}
	if mod != nil {
		mod(r)
	}
	w := httptest.NewRecorder()
	h.ServeHTTP(w, r)
	return w
}

func decodeState(t *testing.T, w *httptest.ResponseRecorder) State {
	t.Helper()
	require.Equal(t, http.StatusOK, w.Code, w.Body.String())
	assert.Equal(t, "application/json", w.Header().Get("Content-Type"))
	var st State
	dec := json.NewDecoder(w.Body)
	dec.DisallowUnknownFields()
	require.NoError(t, dec.Decode(&st))
	return st
}

func TestNewRefusesWhatCannotBeSafe(t *testing.T) {
	set := lanes.NewSet()
	_, err := New(nil, Config{Token: token})
	assert.ErrorContains(t, err, "rt.Lanes()")
	_, err = New(set, Config{})
	assert.ErrorContains(t, err, "changes how the server schedules; give it Config.Token or Config.Authorize")
	_, err = New(set, Config{Logger: slog.Default()})
	assert.ErrorContains(t, err, "Config.Token or Config.Authorize", "a logger is no credential")
	_, err = New(set, Config{Token: "short-secret"})
	assert.ErrorContains(t, err, "12 bytes")
	assert.ErrorContains(t, err, "guessed")
	_, err = New(set, Config{Token: "0123456789abcdef 0123"})
	assert.ErrorContains(t, err, "Authorization header")

	h, err := New(set, Config{Token: token})
	require.NoError(t, err)
	assert.NotNil(t, h.log, "a nil Logger is slog.Default()")
	_, err = New(set, Config{Authorize: func(*http.Request) bool { return true }})
	assert.NoError(t, err, "Authorize alone is enough")
	_, err = New(set, Config{Token: token[:MinTokenLen]})
	assert.NoError(t, err, "MinTokenLen bytes are enough")
}

func TestRefusedWithoutCredentials(t *testing.T) {
	set, bg := newSet(t)
	authorize := true
	h, logs := newHandler(t, set, Config{Token: token, Authorize: func(*http.Request) bool { return authorize }})
	before := StateOf(set)

	change := `{"lane":"background","shares":30}`
	for _, c := range []struct {
		name      string
		mod       func(*http.Request)
		authorize bool
	}{
		{"no Authorization", func(r *http.Request) { r.Header.Del("Authorization") }, true},
		{"wrong token", func(r *http.Request) { r.Header.Set("Authorization", "Bearer "+strings.ToUpper(token)) }, true},
		{"token's prefix", func(r *http.Request) { r.Header.Set("Authorization", "Bearer "+token[:20]) }, true},
		{"empty token", func(r *http.Request) { r.Header.Set("Authorization", "Bearer ") }, true},
		{"wrong scheme", func(r *http.Request) { r.Header.Set("Authorization", "Basic "+token) }, true},
		{"no scheme", func(r *http.Request) { r.Header.Set("Authorization", token) }, true},
		{"Authorize says no", nil, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			authorize = c.authorize
			for _, m := range []string{http.MethodPost, http.MethodGet, http.MethodPut} {
				body := change
				if m == http.MethodGet {
					body = ""
				}
				w := do(h, m, body, c.mod)
				assert.Equal(t, http.StatusUnauthorized, w.Code, m)
				assert.Equal(t, `Bearer realm="sluice lanes"`, w.Header().Get("WWW-Authenticate"))
				assert.True(t, strings.HasPrefix(w.Header().Get("Content-Type"), "text/plain"))
				assert.NotContains(t, w.Body.String(), "background", "nothing shown")
				assert.NotContains(t, w.Body.String(), "continuation", "nothing shown")
			}
		})
	}
	assert.Equal(t, before, StateOf(set), "nothing changed")
	sp, err := set.Spec(bg)
	require.NoError(t, err)
	assert.Equal(t, uint32(50), sp.Shares)
	assert.Equal(t, Stats{Refused: 21}, h.Stats())
	assert.Empty(t, logs.String(), "refusals are counted, not logged")

	authorize = true
	assert.Equal(t, http.StatusOK, do(h, http.MethodPost, change, nil).Code, "both checks pass")
	assert.Equal(t, http.StatusOK, do(h, http.MethodGet, "", func(r *http.Request) {
		r.Header.Set("Authorization", "bearer  "+token)
	}).Code, "the scheme is case-insensitive")
}

func TestAuthorizeAlone(t *testing.T) {
	set, _ := newSet(t)
	h, _ := newHandler(t, set, Config{Authorize: func(r *http.Request) bool {
		return r.Header.Get("X-Operator") == "alice"
	}})
	noAuth := func(r *http.Request) { r.Header.Del("Authorization") }
	assert.Equal(t, http.StatusUnauthorized, do(h, http.MethodGet, "", noAuth).Code)
	assert.Equal(t, http.StatusOK, do(h, http.MethodGet, "", func(r *http.Request) {
		noAuth(r)
		r.Header.Set("X-Operator", "alice")
	}).Code, "no token needed when only Authorize is set")
}

func TestGetShowsLanes(t *testing.T) {
	set, _ := newSet(t)
	h, _ := newHandler(t, set, Config{Token: token})
	w := do(h, http.MethodGet, "", nil)
	assert.Equal(t, "no-store", w.Header().Get("Cache-Control"))
	assert.JSONEq(t, `{"policy":"strict","guard":"500µs","guard_ns":500000,"lanes":[
		{"id":0,"name":"continuation","priority":0,"shares":800},
		{"id":1,"name":"upstream","priority":1,"shares":100},
		{"id":2,"name":"background","priority":2,"shares":50}]}`, w.Body.String())
	assert.Equal(t, Stats{}, h.Stats(), "a read is no change")
}

func TestPostChanges(t *testing.T) {
	set, bg := newSet(t)
	h, logs := newHandler(t, set, Config{Token: token})

	st := decodeState(t, do(h, http.MethodPost, `{"lane":"background","shares":30}`, nil))
	sp, err := set.Spec(bg)
	require.NoError(t, err)
	assert.Equal(t, lanes.Spec{Name: "background", Priority: 2, Shares: 30}, sp)
	assert.Equal(t, LaneState{ID: bg, Name: "background", Priority: 2, Shares: 30}, st.Lanes[bg], "the answer is the new state")

	decodeState(t, do(h, http.MethodPost, `{"lane":"background","priority":1}`, nil))
	sp, _ = set.Spec(bg)
	assert.Equal(t, int32(1), sp.Priority)

	decodeState(t, do(h, http.MethodPost, `{"lane":"upstream","shares":200,"priority":3}`, func(r *http.Request) {
		r.Header.Set("Content-Type", "application/json; charset=utf-8")
	}))
	sp, _ = set.Spec(lanes.Upstream)
	assert.Equal(t, lanes.Spec{Name: "upstream", Priority: 3, Shares: 200}, sp)

	st = decodeState(t, do(h, http.MethodPost, `{"policy":"shares"}`, nil))
	assert.Equal(t, lanes.Shares, set.Policy())
	assert.Equal(t, "shares", st.Policy)

	st = decodeState(t, do(h, http.MethodPost, `{"guard":"5ms"}`, nil))
	assert.Equal(t, 5*time.Millisecond, set.Guard())
	assert.Equal(t, "5ms", st.Guard)
	assert.Equal(t, int64(5*time.Millisecond), st.GuardNS)

	st = decodeState(t, do(h, http.MethodPost, `{"guard":"0"}`, nil))
	assert.Equal(t, time.Duration(0), set.Guard(), `"0" turns the guard off`)
	assert.Equal(t, "0s", st.Guard)
	assert.Zero(t, st.GuardNS)

	decodeState(t, do(h, http.MethodPost, `{"policy":"strict"}`, nil))
	assert.Equal(t, lanes.Strict, set.Policy())

	log := logs.String()
	for _, want := range []string{
		`what="lane background shares" from=50 to=30 remote=192.0.2.7:4321`,
		`what="lane background priority" from=2 to=1 remote=192.0.2.7:4321`,
		`what="lane upstream shares and priority" from="shares=100 priority=1" to="shares=200 priority=3"`,
		`what=policy from=strict to=shares`,
		`what=guard from=500µs to=5ms`,
		`what=guard from=5ms to=0s`,
		`what=policy from=shares to=strict`,
	} {
		assert.Contains(t, log, want)
	}
	assert.Equal(t, 7, strings.Count(log, "level=INFO msg=\"laneadmin: lanes changed\""), log)
	assert.Equal(t, Stats{Changes: 7}, h.Stats())
}

func TestBadChanges(t *testing.T) {
	set, _ := newSet(t)
	h, logs := newHandler(t, set, Config{Token: token})
	before := StateOf(set)

	for _, c := range []struct {
		method string
		body   string
		mod    func(*http.Request)
		code   int
		says   []string
	}{
		{"POST", `{"policy":"shares"}`, func(r *http.Request) { r.Header.Set("Content-Type", "text/plain") },
			http.StatusUnsupportedMediaType, []string{"application/json"}},
		{"POST", `{"policy":"shares"}`, func(r *http.Request) { r.Header.Del("Content-Type") },
			http.StatusUnsupportedMediaType, nil},
		{"POST", `{"policy":"shares","surprise":1}`, nil, http.StatusBadRequest, []string{"surprise"}},
		{"POST", `not json`, nil, http.StatusBadRequest, []string{"bad change"}},
		{"POST", ``, nil, http.StatusBadRequest, nil},
		{"POST", `{}`, nil, http.StatusBadRequest, []string{"exactly one"}},
		{"POST", `{"policy":"shares"} {"guard":"1ms"}`, nil, http.StatusBadRequest, []string{"more than one"}},
		{"POST", `{"lane":"background","shares":0}`, nil, http.StatusBadRequest, []string{"shares 0", "1 to 1048576"}},
		{"POST", `{"lane":"background","shares":1048577}`, nil, http.StatusBadRequest, []string{"shares 1048577", "1 to 1048576"}},
		{"POST", `{"lane":"background","shares":-3}`, nil, http.StatusBadRequest, []string{"shares -3"}},
		{"POST", `{"lane":"background","shares":1.5}`, nil, http.StatusBadRequest, []string{"1..1048576"}},
		{"POST", `{"lane":"background","shares":10,"priority":4294967296}`, nil, http.StatusBadRequest,
			[]string{"priority 4294967296", "-2147483648 to 2147483647"}},
		{"POST", `{"lane":"background"}`, nil, http.StatusBadRequest, []string{`"shares" (1 to 1048576), "priority", or both`}},
		{"POST", `{"shares":10}`, nil, http.StatusBadRequest, []string{`need the "lane"`}},
		{"POST", `{"lane":"nope","shares":10}`, nil, http.StatusNotFound,
			[]string{`no lane "nope"`, "continuation, upstream, background"}},
		{"POST", `{"lane":"background","shares":10,"policy":"shares"}`, nil, http.StatusBadRequest, []string{"exactly one", "has 2"}},
		{"POST", `{"policy":"shares","guard":"1ms"}`, nil, http.StatusBadRequest, []string{"exactly one"}},
		{"POST", `{"policy":"fair"}`, nil, http.StatusBadRequest, []string{`"fair"`, `"strict" or "shares"`}},
		{"POST", `{"guard":"soon"}`, nil, http.StatusBadRequest, []string{`"soon"`, "Go duration"}},
		{"POST", `{"guard":5}`, nil, http.StatusBadRequest, []string{"guard"}},
		{"POST", `{"guard":"-1ms"}`, nil, http.StatusBadRequest, []string{"-1ms", "negative"}},
		{"POST", `{"guard":"1ms","pad":"` + strings.Repeat("x", MaxBody) + `"}`, nil,
			http.StatusRequestEntityTooLarge, []string{"4096 bytes"}},
		{"POST", `{"guard":"1ms"}` + strings.Repeat(" ", MaxBody), nil, http.StatusRequestEntityTooLarge, nil},
		{"PUT", `{"policy":"shares"}`, nil, http.StatusMethodNotAllowed, []string{"PUT"}},
		{"DELETE", ``, nil, http.StatusMethodNotAllowed, nil},
	} {
		w := do(h, c.method, c.body, c.mod)
		name := c.method + " " + c.body
		if len(name) > 80 {
			name = name[:80]
		}
		assert.Equal(t, c.code, w.Code, "%s: %s", name, w.Body)
		for _, s := range c.says {
			assert.Contains(t, w.Body.String(), s, name)
		}
		if c.code == http.StatusMethodNotAllowed {
			assert.Equal(t, "GET, POST", w.Header().Get("Allow"))
		}
	}
	assert.Equal(t, before, StateOf(set), "no refused change applied")
	assert.Equal(t, Stats{Invalid: 25}, h.Stats())
	assert.Empty(t, logs.String())
}

func TestApply(t *testing.T) {
	set, bg := newSet(t)

	what, old, now, err := Apply(set, Change{Lane: "background", Shares: new(int64(70))})
	require.NoError(t, err)
	assert.Equal(t, "lane background shares", what)
	assert.Equal(t, uint32(50), old)
	assert.Equal(t, uint32(70), now)

	what, old, now, err = Apply(set, Change{Guard: new(Duration(time.Millisecond))})
	require.NoError(t, err)
	assert.Equal(t, "guard", what)
	assert.Equal(t, lanes.DefaultGuard, old)
	assert.Equal(t, time.Millisecond, now)

	_, _, _, err = Apply(set, Change{Lane: "gone", Priority: new(int64(1))})
	assert.ErrorIs(t, err, lanes.ErrNoSuchLane)
	_, _, _, err = Apply(set, Change{Lane: "background", Shares: new(int64(0)), Priority: new(int64(5))})
	assert.Error(t, err)
	assert.False(t, errors.Is(err, lanes.ErrNoSuchLane))
	sp, _ := set.Spec(bg)
	assert.Equal(t, lanes.Spec{Name: "background", Priority: 2, Shares: 70}, sp, "a half-valid change changes nothing")
	_, _, _, err = Apply(nil, Change{Policy: "strict"})
	assert.Error(t, err)
}

// TestLiveChanges changes the lanes from several clients while a worker's
// Picker picks among them; run it under -race.
func TestLiveChanges(t *testing.T) {
	set, _ := newSet(t)
	h, logs := newHandler(t, set, Config{Token: token})
	srv := httptest.NewServer(h)
	defer srv.Close()

	stop := make(chan struct{})
	var picks [lanes.MaxLanes]int
	picked := make(chan struct{})
	go func() {
		defer close(picked)
		p := lanes.NewPicker(set)
		ready := lanes.Mask(0)
		for id := range lanes.ID(set.Len()) {
			ready = ready.With(id)
			p.Activate(id)
		}
		for {
			select {
			case <-stop:
				return
			default:
			}
			id, ok := p.Pick(ready)
			if !ok {
				panic("no lane picked")
			}
			picks[id]++
			p.Charge(id, 1000)
		}
	}()

	const clients, each = 4, 25
	var wg sync.WaitGroup
	for c := range clients {
		wg.Go(func() {
			cl := srv.Client()
			for i := range each {
				var body string
				switch i % 4 {
				case 0:
					body = fmt.Sprintf(`{"lane":"background","shares":%d}`, 1+c*100+i)
				case 1:
					body = fmt.Sprintf(`{"lane":"upstream","priority":%d,"shares":%d}`, i%3, 50+i)
				case 2:
					body = []string{`{"policy":"shares"}`, `{"policy":"strict"}`}[(c+i)%2]
				default:
					body = fmt.Sprintf(`{"guard":"%dus"}`, i*10)
				}
				req, err := http.NewRequest(http.MethodPost, srv.URL, strings.NewReader(body))
				if !assert.NoError(t, err) {
					return
				}
				req.Header.Set("Authorization", "Bearer "+token)
				req.Header.Set("Content-Type", "application/json")
				resp, err := cl.Do(req)
				if !assert.NoError(t, err) {
					return
				}
				var st State
				assert.NoError(t, json.NewDecoder(resp.Body).Decode(&st))
				resp.Body.Close()
				assert.Equal(t, http.StatusOK, resp.StatusCode, body)
				assert.Len(t, st.Lanes, 3)
			}
		})
	}
	wg.Wait()
	close(stop)
	<-picked
	srv.Client().CloseIdleConnections()

	assert.Equal(t, Stats{Changes: clients * each}, h.Stats())
	assert.Equal(t, clients*each, strings.Count(logs.String(), "laneadmin: lanes changed"))
	total := 0
	for _, n := range picks {
		total += n
	}
	assert.Positive(t, total)
	st := StateOf(set)
	require.Len(t, st.Lanes, 3)
	assert.GreaterOrEqual(t, st.Lanes[2].Shares, uint32(1))
}
