// Package dashboard serves a live page of a sluice server: its workers,
// its admissions and rejections, the wait before each request's start,
// the age limit's state, its lanes and, given a tenant tracker, its
// tenants' shares and drops. The page is HTML, JavaScript and CSS embedded
// in the binary; it loads nothing from other hosts, and polls a JSON
// endpoint beside it about once a second.
//
//	d, err := dashboard.New(dashboard.Config{Server: srv})
//	...
//	defer d.Close()
//	admin := http.NewServeMux() // on an address of its own, not the public one
//	admin.Handle("/debug/sluice/", d)
//
// Mount it at a path that ends in "/": the page and its data are served
// under that path (/debug/sluice/ the page, /debug/sluice/data its
// samples as JSON, /debug/sluice/control its controls).
//
// # Controls
//
// With Config.Controls, the page can change the server while it runs:
// lane shares, the knobs given (gate limits, the age limit), tenant
// enforcement on or off. They are off by default because a control plane
// is a security surface: whoever can reach the page could then open the
// gates of an overloaded server or stop a tenant's drops. Turn them on
// only behind what already guards the program's administration (an
// address of its own, authentication in front of the handler). Changes
// must be POSTed as JSON from the page's own origin (cross-origin requests
// are refused), and every change is logged, with the old and new values
// and who asked.
//
// The page, its data and its controls answer only requests addressed to
// the dashboard's own names: an IP address, localhost, or a name listed in
// Config.Hosts (others get 421). A site whose name an attacker points at
// the admin address (DNS rebinding) is the page's own origin to the
// browser; its Host is not one of the dashboard's names.
package dashboard

import (
	"bytes"
	"crypto/rand"
	"embed"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"html/template"
	"log/slog"
	"net"
	"net/http"
	"net/netip"
	"path"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/sluice-go/sluice"
	"github.com/sluice-go/sluice/admit"
	"github.com/sluice-go/sluice/internal/obs"
	"github.com/sluice-go/sluice/lanes"
	"github.com/sluice-go/sluice/sched"
	"github.com/sluice-go/sluice/tenant"
)

// Defaults of Config's zero fields.
const (
	// DefaultInterval is the time between two samples, and between two
	// polls of the page.
	DefaultInterval = time.Second
	// DefaultHistory is the number of samples kept: five minutes at one a
	// second.
	DefaultHistory = 300
	// TenantWindow is the span the tenants' table is computed over: the
	// tracker's totals change once a control period (one second by
	// default), so one interval would show mostly zeros.
	TenantWindow = 10 * time.Second
)

// Executor is what the dashboard reads of a sluice executor: its counters
// and its lanes. *runtime.Runtime and *sched.Scheduler implement it.
type Executor interface {
	Snapshot() sched.Snapshot
	Lanes() *lanes.Set
}

// Config configures a Dashboard. Server, or Pipeline, is required.
type Config struct {
	// Server is the sluice server to show: its admission pipeline, its
	// connections, its runtime's workers and lanes.
	Server *sluice.Server
	// Pipeline and Executor show a server built otherwise: a
	// server.Server on a runtime of the program's (its Pipeline, and the
	// runtime), or net/http behind httpgate (its Pipeline alone: no
	// workers, no lanes). They are ignored when Server is set.
	Pipeline *admit.Pipeline
	Executor Executor
	// Tenants, when set, adds the tenants' table: each tenant's share of
	// the requests, of the admissions and of the blame, and its drops.
	// Its figures move once a control period, when the tenant agent
	// collects them.
	Tenants *tenant.Tracker
	// Title heads the page; empty means "sluice".
	Title string
	// Controls turns on the page's controls: lane shares, Knobs, tenant
	// enforcement. Off by default: see the package documentation.
	Controls bool
	// Knobs are the settings the controls can change besides lane shares
	// and tenant enforcement (BusyKnob, ConcurrencyKnob, MaxAgeKnob, or
	// your own). They are shown, read-only, without Controls.
	Knobs []Knob
	// Hosts are the host names the dashboard answers to, besides
	// "localhost" and IP addresses (which it always answers to): the
	// names of the admin address it is mounted on, as the browser sends
	// them in Host, without the port ("admin.internal"). A request for
	// another name is answered 421 Misdirected Request, so that a page
	// of another site whose name an attacker points at this address (DNS
	// rebinding) can neither read the data, tenant names included, nor
	// use the controls with the page's own origin.
	Hosts []string
	// Logger receives each change made from the page; nil means
	// slog.Default().
	Logger *slog.Logger
	// Interval is the time between samples, and the page's polling
	// period; zero means DefaultInterval. History is the number of samples
	// kept; zero means DefaultHistory.
	Interval time.Duration
	History  int
}

// Dashboard is the page and its endpoints, an http.Handler. It samples the
// server when the page asks for data, at most once an Interval, so an
// unwatched dashboard costs nothing but the observer it adds to the
// pipeline (a few atomic additions per request). Close removes that.
type Dashboard struct {
	title    string
	instance string
	interval time.Duration
	history  int
	controls bool
	hosts    []string // Config.Hosts
	log      *slog.Logger

	p        *admit.Pipeline
	ex       Executor // nil: none
	conns    func() int
	tracker  *tenant.Tracker
	knobList []Knob
	knobs    map[string]Knob
	rec      *obs.Recorder
	remove   func()
	index    []byte
	controlH http.Handler

	mu       sync.Mutex // the samples and the controls' changes
	last     *reading
	seq      uint64
	samples  []Sample
	tenantAt []tenantReading // the tracker's totals over the last TenantWindow
	rows     []TenantRow
}

// New returns the dashboard that opts describe; it fails without a server
// or pipeline to show, and for knobs without a name, a Get or a Set, or
// with the same name.
func New(opts Config) (*Dashboard, error) {
	d := &Dashboard{
		title:    opts.Title,
		interval: opts.Interval,
		history:  opts.History,
		controls: opts.Controls,
		hosts:    slices.Clone(opts.Hosts),
		log:      opts.Logger,
		tracker:  opts.Tenants,
		knobs:    map[string]Knob{},
		rec:      new(obs.Recorder),
	}
	switch {
	case opts.Server != nil:
		// Off Linux the server is net/http behind the same pipeline,
		// with no runtime and no sluice server to read.
		d.p = opts.Server.Pipeline()
		if rt := opts.Server.Runtime(); rt != nil {
			d.ex = rt
		}
		if srv := opts.Server.Server(); srv != nil {
			d.conns = srv.OpenConns
		}
	case opts.Pipeline != nil:
		d.p = opts.Pipeline
		d.ex = opts.Executor
	default:
		return nil, errors.New("dashboard: Config has neither a Server nor a Pipeline: nothing to show")
	}
	var errs []error
	switch {
	case opts.Interval < 0:
		errs = append(errs, fmt.Errorf("Interval %v: must be zero (the default, %v) or positive", opts.Interval, DefaultInterval))
	case opts.History < 0:
		errs = append(errs, fmt.Errorf("History %d: must be zero (the default, %d) or positive", opts.History, DefaultHistory))
	}
	for i, k := range opts.Knobs {
		switch {
		case k.Name == "" || k.Get == nil || k.Set == nil:
			errs = append(errs, fmt.Errorf("Knobs[%d] (%q) needs a Name, a Get and a Set", i, k.Name))
		case d.knobs[k.Name].Get != nil:
			errs = append(errs, fmt.Errorf("Knobs[%d]: two knobs are named %q", i, k.Name))
		default:
			d.knobs[k.Name] = k
			d.knobList = append(d.knobList, k)
		}
	}
	if err := errors.Join(errs...); err != nil {
		return nil, fmt.Errorf("dashboard: %w", err)
	}
	if d.title == "" {
		d.title = "sluice"
	}
	if d.interval == 0 {
		d.interval = DefaultInterval
	}
	if d.history == 0 {
		d.history = DefaultHistory
	}
	if d.log == nil {
		d.log = slog.Default()
	}
	var id [8]byte
	_, _ = rand.Read(id[:])
	d.instance = hex.EncodeToString(id[:])
	page, err := template.ParseFS(assets, "assets/index.html")
	if err != nil {
		return nil, fmt.Errorf("dashboard: %w", err)
	}
	var b bytes.Buffer
	if err := page.Execute(&b, struct{ Title string }{d.title}); err != nil {
		return nil, fmt.Errorf("dashboard: %w", err)
	}
	d.index = b.Bytes()
	d.controlH = http.NewCrossOriginProtection().Handler(http.HandlerFunc(d.control))
	d.remove = d.p.Observe(d.rec)
	d.mu.Lock()
	d.last = d.read(time.Now())
	d.tenantAt = append(d.tenantAt, tenantReading{d.last.at, d.last.tenants})
	d.mu.Unlock()
	return d, nil
}

// Close removes the dashboard's observer from the pipeline. The page
// still answers, with the counters alone.
func (d *Dashboard) Close() { d.remove() }

// assets are the page, its script, its style and its icon.
//
//go:embed assets
var assets embed.FS

// tenantReading is a reading of the tenant tracker's totals.
type tenantReading struct {
	at     time.Time
	totals map[string]tenant.Usage
}

// contentType returns the type of an asset.
func contentType(name string) string {
	switch path.Ext(name) {
	case ".js":
		return "text/javascript; charset=utf-8"
	case ".css":
		return "text/css; charset=utf-8"
	case ".svg":
		return "image/svg+xml"
	}
	return "application/octet-stream"
}

// hostAllowed reports whether the request's Host names this dashboard: an
// IP address (no name to rebind), "localhost", or one of Config.Hosts.
func (d *Dashboard) hostAllowed(hostport string) bool {
	host := hostport
	if h, _, err := net.SplitHostPort(hostport); err == nil {
		host = h
	}
	host = strings.TrimSuffix(strings.TrimPrefix(host, "["), "]")
	if _, err := netip.ParseAddr(host); err == nil {
		return true
	}
	host = strings.TrimSuffix(host, ".")
	if strings.EqualFold(host, "localhost") {
		return true
	}
	for _, h := range d.hosts {
		if strings.EqualFold(host, strings.TrimSuffix(h, ".")) {
			return true
		}
	}
	return false
}

// ServeHTTP serves the page (the mount path itself), its assets, its
// data ("data") and its controls ("control"), whatever the path it is
// mounted at.
func (d *Dashboard) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	h := w.Header()
	h.Set("Content-Security-Policy", "default-src 'self'; img-src 'self'; style-src 'self'; script-src 'self'; connect-src 'self'; frame-ancestors 'none'; base-uri 'none'; form-action 'none'")
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("Referrer-Policy", "no-referrer")
	if !d.hostAllowed(r.Host) {
		http.Error(w, fmt.Sprintf("dashboard: host %q is not one of this dashboard's: list it in dashboard.Config.Hosts", r.Host),
			http.StatusMisdirectedRequest)
		return
	}
	name := r.URL.Path[strings.LastIndexByte(r.URL.Path, '/')+1:]
	switch name {
	case "data":
		d.data(w, r)
		return
	case "control":
		d.controlH.ServeHTTP(w, r)
		return
	}
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		w.Header().Set("Allow", "GET, HEAD")
		http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
		return
	}
	switch name {
	case "":
		h.Set("Content-Type", "text/html; charset=utf-8")
		h.Set("Cache-Control", "no-cache")
		_, _ = w.Write(d.index)
	case "app.js", "style.css", "favicon.svg":
		b, err := assets.ReadFile("assets/" + name)
		if err != nil {
			http.NotFound(w, r)
			return
		}
		h.Set("Content-Type", contentType(name))
		h.Set("Cache-Control", "no-cache")
		_, _ = w.Write(b)
	default:
		http.NotFound(w, r)
	}
}

// Data is what the data endpoint answers: the page's settings, the
// samples taken after the one the page asked from (?after=seq), and the
// state of the controls and tenants.
type Data struct {
	// Title heads the page. Instance changes when the dashboard is made
	// anew (the server restarted): the page then starts its charts over.
	Title    string `json:"title"`
	Instance string `json:"instance"`
	// Interval is the time between samples, in milliseconds.
	Interval float64 `json:"interval_ms"`
	// Samples are the samples after the one asked from, oldest first.
	Samples []Sample `json:"samples"`
	// Controls says whether the page's controls are on; Knobs and Lanes
	// are what they can change.
	Controls bool        `json:"controls"`
	Knobs    []KnobState `json:"knobs,omitempty"`
	Lanes    []LaneState `json:"lanes,omitempty"`
	// Tenants is the tenants' table, nil without a tracker.
	Tenants *Tenants `json:"tenants,omitempty"`
}

// Tenants is the tenants' state.
type Tenants struct {
	// Enforcing says whether the tracker drops requests (the drop table
	// applies); Version is the drop table's version.
	Enforcing bool   `json:"enforcing"`
	Version   uint64 `json:"version"`
	// Window is the span of Rows, in seconds.
	Window float64     `json:"window"`
	Rows   []TenantRow `json:"rows"`
}

// data answers the samples after ?after=, taking a new one if the last is
// at least most of an interval old.
func (d *Dashboard) data(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		w.Header().Set("Allow", "GET, HEAD")
		http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
		return
	}
	after, _ := strconv.ParseUint(r.URL.Query().Get("after"), 10, 64)
	out := Data{Title: d.title, Instance: d.instance, Interval: ms(d.interval), Controls: d.controls, Samples: []Sample{}}

	d.mu.Lock()
	d.sample(time.Now())
	for _, s := range d.samples {
		if s.Seq > after {
			out.Samples = append(out.Samples, s)
		}
	}
	for _, k := range d.knobList {
		out.Knobs = append(out.Knobs, KnobState{Name: k.Name, Unit: k.Unit, Value: k.Get(), Min: k.Min, Max: k.Max, Step: k.Step})
	}
	if set := d.lanes(); set != nil {
		for i := range set.Len() {
			if sp, err := set.Spec(lanes.ID(i)); err == nil {
				out.Lanes = append(out.Lanes, LaneState{Name: sp.Name, Shares: sp.Shares, Priority: sp.Priority})
			}
		}
	}
	if d.tracker != nil {
		st := d.tracker.Stats()
		out.Tenants = &Tenants{Enforcing: st.Enforcing, Version: st.Version, Window: TenantWindow.Seconds(), Rows: d.rows}
	}
	d.mu.Unlock()

	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	_ = json.NewEncoder(w).Encode(out)
}

// sample takes a new sample at now if the last one is old enough; a
// reading too old to make a sample of (nobody watched for a while) only
// becomes the base of the next. Called with mu held.
func (d *Dashboard) sample(now time.Time) {
	age := now.Sub(d.last.at)
	if age < d.interval*3/4 {
		return
	}
	cur := d.read(now)
	if age <= 5*d.interval {
		d.seq++
		d.samples = append(d.samples, delta(d.last, cur, d.seq))
		if over := len(d.samples) - d.history; over > 0 {
			d.samples = append(d.samples[:0], d.samples[over:]...)
		}
	}
	d.last = cur
	if d.tracker != nil {
		i := 0
		for i+1 < len(d.tenantAt) && now.Sub(d.tenantAt[i+1].at) >= TenantWindow {
			i++
		}
		d.tenantAt = append(d.tenantAt[:0], d.tenantAt[i:]...)
		base := d.tenantAt[0]
		drops := d.tracker.Stats().Drops
		d.rows = tenantRows(base.totals, cur.tenants, now.Sub(base.at).Seconds(), drops)
		d.tenantAt = append(d.tenantAt, tenantReading{now, cur.tenants})
	}
}

// read reads every counter now.
func (d *Dashboard) read(now time.Time) *reading {
	r := &reading{at: now, stats: d.p.Stats(), rec: d.rec.Snapshot(), conns: -1}
	if d.ex != nil {
		s := d.ex.Snapshot()
		r.snap = &s
	}
	if d.conns != nil {
		r.conns = d.conns()
	}
	if d.tracker != nil {
		r.tenants = map[string]tenant.Usage{}
		for _, u := range d.tracker.Stats().Totals {
			r.tenants[u.Tenant] = u
		}
	}
	return r
}

// lanes returns the executor's lanes, or nil.
func (d *Dashboard) lanes() *lanes.Set {
	if d.ex == nil {
		return nil
	}
	return d.ex.Lanes()
}
