package bench

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"net/http"
	"runtime"
	"time"

	"github.com/sluice-go/sluice"
	"github.com/sluice-go/sluice/admit"
	"github.com/sluice-go/sluice/gate"
	"github.com/sluice-go/sluice/httpgate"
	"github.com/sluice-go/sluice/queue"
	srt "github.com/sluice-go/sluice/runtime"
	"github.com/sluice-go/sluice/server"
)

// Target is a server under test, started on 127.0.0.1 with a handler: the
// weather service (examples/weather), or what a scenario's child hook
// serves instead (ChildPart.Handler).
type Target struct {
	// Name identifies the target in reports: "sluice", "nethttp",
	// "semaphore", "sluice-half", "gosched", "sluice-pinned",
	// "sluice-half-pinned", "sluice-nohold".
	Name string
	// Serve starts the target serving h, behind the target's own
	// protection (its admission, its semaphore): the weather service
	// (weather.Handler), or a child hook's handler.
	Serve func(h http.Handler) (*Running, error)
}

// Running is a started target.
type Running struct {
	// URL is the target's base URL.
	URL string
	// Admin, when set, is the URL of an endpoint the target serves for
	// the benchmark on a listener of its own (ChildPart.Listening: an
	// admin endpoint).
	Admin string
	// Stop stops the target and releases everything it holds.
	Stop func() error
	// Stats, when set, returns the target's own counters (the sluice
	// server's admission Stats), for the report.
	Stats func() any
	// Placement, when set, says where the target's workers run (the
	// sluice targets).
	Placement func() Placement
}

// Placement is where a sluice target's workers run: pinned to CPUs of
// their own or floating, and why (package runtime decides by default from
// the process's cpuset).
type Placement struct {
	Workers int `json:"workers"`
	// CPUs is the CPU of each pinned worker; empty when they float.
	CPUs []int `json:"cpus,omitempty"`
	// Exclusive and Reason are what the runtime detected about the
	// process's cpuset (runtime.CPUInfo).
	Exclusive bool   `json:"exclusive"`
	Reason    string `json:"reason,omitempty"`
}

// Pinned reports whether the workers were pinned.
func (p Placement) Pinned() bool { return len(p.CPUs) > 0 }

// SemaphoreTimeout is how long the naive semaphore target lets a request
// wait for a slot before answering 503: the common fix, measured in the
// design to collapse at 5x.
const SemaphoreTimeout = 100 * time.Millisecond

// SluiceConfig is the configuration of the "sluice" target, the one the
// README shows: the default runtime (one worker per CPU, pinned only where
// the process's cpuset is exclusive) and the age limit, which rejects
// unstarted a request that has waited 100 ms since the kernel received it
// (5 ms while an overload's line stands: see admit.Config).
func SluiceConfig() sluice.Config {
	return sluice.Config{Admission: admit.Config{MaxAge: 100 * time.Millisecond}}
}

// SluiceHalfConfig is the configuration of the "sluice-half" target: the
// age limit, the busy-worker gate at its default (admit while at most half
// the workers are busy, for I/O-bound handlers) and the timed queue in CoDel
// order.
func SluiceHalfConfig() sluice.Config {
	return sluice.Config{Admission: admit.Config{
		MaxAge: 100 * time.Millisecond,
		Gates:  []admit.Policy{mustGate(gate.NewBusy(gate.BusyConfig{}))},
		Queue:  &admit.QueueConfig{Order: queue.CoDel},
	}}
}

// SluiceNoHoldConfig is the configuration of the "sluice-nohold" target:
// SluiceConfig with holds off (server.Config.HoldRefused negative), so
// that connections beyond what the server serves in time, whose clients
// resend the moment they are refused, are refused again and again rather
// than left unread until their Retry-After, as the default does.
func SluiceNoHoldConfig() sluice.Config {
	cfg := SluiceConfig()
	cfg.HoldRefused = -1
	return cfg
}

// Targets returns the targets of the overload benchmark:
//
//   - sluice: SluiceConfig, what the README shows;
//   - nethttp: plain net/http;
//   - semaphore: net/http behind a semaphore of GOMAXPROCS slots with a
//     100 ms wait, the common fix;
//   - sluice-half: SluiceHalfConfig, to measure what the busy gate's
//     default for I/O-bound handlers costs and buys (with one worker it
//     never refuses a request on its worker, and the target is the same as
//     sluice);
//   - gosched: net/http behind package httpgate with the GoSched gate
//     (running plus runnable goroutines at most twice GOMAXPROCS) and the
//     timed queue, for users who stay on net/http;
//   - sluice-pinned and sluice-half-pinned: sluice and sluice-half with
//     every worker pinned to a CPU whatever the cpuset (the default before
//     the runtime pinned only on exclusive cpusets), to compare the two
//     placements side by side (the noisy scenario);
//   - sluice-nohold: SluiceNoHoldConfig, to measure what holding the
//     clients that resend at once does (the closed and soak scenarios).
//
// The handler is the weather service in every one.
func Targets() []Target { return targets(serveOptions{}) }

// serveOptions say how a child serves its target beyond the handler: on a
// given address (to come back on it after being killed), with the load
// hint, over TLS, with the child hook's part.
type serveOptions struct {
	// addr is the address to listen on; empty means 127.0.0.1 on a port
	// the kernel picks.
	addr string
	// loadHint sets server.Config.LoadHint on the sluice targets.
	loadHint bool
	// dashboard, when set, is the address a sluice target serves its
	// dashboard on (DashboardEnv).
	dashboard string
	// part, when set, is the child's hook's part, which a sluice target
	// lets change its configuration, serve beside it and report its
	// stats.
	part *ChildPart
	// tls, when set, makes the target serve HTTPS with it.
	tls *tls.Config
}

// listenAddr returns the address to listen on.
func (o serveOptions) listenAddr() string {
	if o.addr == "" {
		return "127.0.0.1:0"
	}
	return o.addr
}

// targets returns Targets, serving as o says.
func targets(o serveOptions) []Target {
	pinned := func(cfg sluice.Config) sluice.Config { cfg.Runtime.Pinning = srt.PinOn; return cfg }
	netHTTP := func(h http.Handler) (*Running, error) { return running(listenNetHTTP(o, h)) }
	return []Target{
		{Name: "sluice", Serve: func(h http.Handler) (*Running, error) { return startSluice(o, h, SluiceConfig()) }},
		{Name: "nethttp", Serve: netHTTP},
		{Name: "semaphore", Serve: func(h http.Handler) (*Running, error) {
			return netHTTP(semaphore(runtime.GOMAXPROCS(0), SemaphoreTimeout, h))
		}},
		{Name: "sluice-half", Serve: func(h http.Handler) (*Running, error) { return startSluice(o, h, SluiceHalfConfig()) }},
		{Name: "gosched", Serve: func(h http.Handler) (*Running, error) { return startGoSched(o, h) }},
		{Name: "sluice-pinned", Serve: func(h http.Handler) (*Running, error) { return startSluice(o, h, pinned(SluiceConfig())) }},
		{Name: "sluice-half-pinned", Serve: func(h http.Handler) (*Running, error) {
			return startSluice(o, h, pinned(SluiceHalfConfig()))
		}},
		{Name: "sluice-nohold", Serve: func(h http.Handler) (*Running, error) { return startSluice(o, h, SluiceNoHoldConfig()) }},
	}
}

// GoSchedFraction is the gosched target's gate setting
// (gate.GoSchedConfig.Fraction): admit while the running and runnable
// goroutines are at most twice GOMAXPROCS. docs/benchmarks.md, "GoSched
// on net/http", says why twice.
const GoSchedFraction = 2.0

// startGoSched serves h on net/http behind package httpgate with the
// GoSched gate and the 100 ms timed queue: the nearest thing to the
// executor's busy count that plain net/http can have.
func startGoSched(o serveOptions, h http.Handler) (*Running, error) {
	gs, err := gate.NewGoSched(gate.GoSchedConfig{Fraction: GoSchedFraction})
	if err != nil {
		return nil, err
	}
	adm, err := httpgate.New(admit.Config{
		Gates: []admit.Policy{gs},
		Queue: &admit.QueueConfig{},
	})
	if err != nil {
		return nil, err
	}
	url, stop, err := listenNetHTTP(o, adm.Wrap(h))
	if err != nil {
		adm.Close()
		return nil, err
	}
	return &Running{
		URL:   url,
		Stop:  func() error { err := stop(); adm.Close(); return err },
		Stats: func() any { return adm.Stats() },
	}, nil
}

// The shed scenario's targets, beside Targets: a sluice server protected
// by one signal alone, without the age limit and without a queue, so that
// what the load generator sees is that signal's doing.
const (
	// TargetSluiceBusy is the busy-worker gate alone (SluiceBusyConfig).
	TargetSluiceBusy = "sluice-busy"
	// TargetSluiceCPU is loadshed's CPU shedding alone (SluiceCPUConfig).
	TargetSluiceCPU = "sluice-cpu"
)

// SluiceBusyConfig is the configuration of the "sluice-busy" target: the
// busy-worker gate at its default (admit while at most half the workers
// are busy, the deciding one included), no queue (a refusal is answered at
// once) and no age limit. On one worker the gate always admits (see
// package gate): the target needs two CPUs or more to be protected.
func SluiceBusyConfig() sluice.Config {
	return sluice.Config{Admission: admit.Config{
		MaxAge: -1,
		Gates:  []admit.Policy{mustGate(gate.NewBusy(gate.BusyConfig{}))},
	}}
}

// mustGate returns g, built by its constructor from a constant
// configuration that the constructor accepts: an error is a bug here.
func mustGate[G admit.Policy](g G, err error) G {
	if err != nil {
		panic(err)
	}
	return g
}

// SluiceCPUConfig is the configuration of the "sluice-cpu" target, with
// the CPU gate it returns, which the caller must Close: loadshed's CPU
// option with its README's settings (the machine's CPU utilisation
// averaged over 10 readings 1 s apart, a request refused with a
// probability rising from 0 at 60% to 1 at 80%), as a policy, no queue and
// no age limit. It reads the whole machine, as loadshed does: the load
// generator's work counts, and so does any other program's (run the
// scenario on a machine otherwise idle).
func SluiceCPUConfig() (sluice.Config, *gate.CPU) {
	cpu := mustGate(gate.NewCPU(gate.CPUConfig{})) // loadshed's example: 0.6, 0.8, 1 s, 10
	return sluice.Config{Admission: admit.Config{
		MaxAge:   -1,
		Policies: []admit.Policy{cpu},
	}}, cpu
}

// shedTargets returns the shed scenario's targets (package bench/scenario's
// Shed), serving as o says. They are not in Targets (the default set of
// the other scenarios), but TargetByName knows them, so that -targets
// names them and a child process serves them.
func shedTargets(o serveOptions) []Target {
	return []Target{
		{Name: TargetSluiceBusy, Serve: func(h http.Handler) (*Running, error) { return startSluice(o, h, SluiceBusyConfig()) }},
		{Name: TargetSluiceCPU, Serve: func(h http.Handler) (*Running, error) {
			cfg, cpu := SluiceCPUConfig()
			rn, err := startSluice(o, h, cfg)
			if err != nil {
				_ = cpu.Close()
				return nil, err
			}
			stop := rn.Stop
			rn.Stop = func() error { return errors.Join(stop(), cpu.Close()) }
			return rn, nil
		}},
	}
}

// TargetByName returns the target of Targets, or of the shed scenario's
// (TargetSluiceBusy, TargetSluiceCPU), with that name.
func TargetByName(name string) (Target, bool) { return targetByName(name, serveOptions{}) }

// targetByName is TargetByName serving as o says.
func targetByName(name string, o serveOptions) (Target, bool) {
	for _, t := range append(targets(o), shedTargets(o)...) {
		if t.Name == name {
			return t, true
		}
	}
	return Target{}, false
}

func running(url string, stop func() error, err error) (*Running, error) {
	if err != nil {
		return nil, err
	}
	return &Running{URL: url, Stop: stop}, nil
}

func startSluice(o serveOptions, h http.Handler, cfg sluice.Config) (*Running, error) {
	cfg.LoadHint = cfg.LoadHint || o.loadHint
	cfg.TLS = o.tls
	part := o.part
	if part == nil {
		part = &ChildPart{}
	}
	if part.Configure != nil {
		if err := part.Configure(&cfg); err != nil {
			return nil, err
		}
	}
	srv, err := sluice.Listen(o.listenAddr(), h, cfg)
	if err != nil {
		return nil, err
	}
	rt := srv.Runtime()
	info := rt.CPUInfo()
	place := Placement{Workers: rt.NumWorkers(), CPUs: rt.CPUs(), Exclusive: info.Exclusive, Reason: info.ExclusiveReason}
	stop := func() error {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		return srv.Stop(ctx)
	}
	var admin string
	if part.Listening != nil {
		url, stopAdmin, err := part.Listening(srv)
		if err != nil {
			return nil, errors.Join(err, stop())
		}
		admin = url
		stopServer := stop
		stop = func() error { return errors.Join(stopAdmin(), stopServer()) }
	}
	if o.dashboard != "" {
		stopDashboard, err := serveDashboard(o.dashboard, srv)
		if err != nil {
			return nil, errors.Join(err, stop())
		}
		stopServer := stop
		stop = func() error { return errors.Join(stopDashboard(), stopServer()) }
	}
	stats := func() any { return srv.Stats() }
	switch {
	case part.Stats != nil:
		stats = func() any { return part.Stats(srv) }
	case srv.Server() != nil:
		stats = func() any {
			snap := rt.Snapshot()
			return SluiceServer{Stats: srv.Stats(), Holds: srv.Server().Holds(), Blocked: snap.Blocked, Handovers: snap.Handovers}
		}
	}
	if o.tls != nil {
		stats = func() any { return TLSServer{Stats: srv.Stats(), TLS: srv.Server().TLSStats()} }
	}
	return &Running{
		URL:       o.scheme() + srv.Addr().String(),
		Admin:     admin,
		Stop:      stop,
		Stats:     stats,
		Placement: func() Placement { return place },
	}, nil
}

// SluiceServer is what a sluice target reports: its admission's counters,
// how many times it left a connection unread after a refusal
// (server.Server.Holds), and how often its executor's watchdog found a
// handler blocking its worker's thread and handed the worker to a spare
// thread (sched.Snapshot's Blocked and Handovers).
type SluiceServer struct {
	admit.Stats
	Holds     int64 `json:",omitempty"`
	Blocked   int64 `json:",omitempty"`
	Handovers int64 `json:",omitempty"`
}

// TLSServer is what an HTTPS sluice target reports: its admission's
// counters and its handshakes'.
type TLSServer struct {
	admit.Stats
	TLS server.TLSStats
}

// ServeNetHTTP serves h with net/http on a loopback port of its own, for
// a service beside a target (a slow dependency), and returns its URL and
// the function that stops it.
func ServeNetHTTP(h http.Handler) (url string, stop func() error, err error) {
	return listenNetHTTP(serveOptions{}, h)
}

// scheme is the scheme of the target's URL.
func (o serveOptions) scheme() string {
	if o.tls != nil {
		return "https://"
	}
	return "http://"
}

// listenNetHTTP serves h with net/http where o says, over TLS if o says.
func listenNetHTTP(o serveOptions, h http.Handler) (string, func() error, error) {
	l, err := net.Listen("tcp", o.listenAddr())
	if err != nil {
		return "", nil, err
	}
	addr := l.Addr().String()
	if o.tls != nil {
		l = tls.NewListener(l, o.tls)
	}
	hs := &http.Server{Handler: h}
	if o.part != nil && o.part.NetHTTP != nil {
		o.part.NetHTTP(hs)
	}
	done := make(chan error, 1)
	go func() { done <- hs.Serve(l) }()
	stop := func() error {
		err := hs.Close()
		if serr := <-done; !errors.Is(serr, http.ErrServerClosed) {
			err = errors.Join(err, serr)
		}
		return err
	}
	return o.scheme() + addr, stop, nil
}

// semaphore is the naive gate: n requests at once; the others wait up to
// wait for a slot, then get a plain 503.
func semaphore(n int, wait time.Duration, next http.Handler) http.Handler {
	slots := make(chan struct{}, n)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		t := time.NewTimer(wait)
		defer t.Stop()
		select {
		case slots <- struct{}{}:
		case <-t.C:
			http.Error(w, fmt.Sprintf("busy: no slot within %v", wait), http.StatusServiceUnavailable)
			return
		case <-r.Context().Done():
			return
		}
		defer func() { <-slots }()
		next.ServeHTTP(w, r)
	})
}
