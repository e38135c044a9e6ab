package load

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"sync"
	"time"

	"github.com/HdrHistogram/hdrhistogram-go"

	"github.com/sluice-go/sluice/bench/internal/loopback"
)

// Defaults of CalibrateConfig's zero fields, and the pause of a calibration
// worker after an answer other than OK.
const (
	DefaultCalibrateConns    = 64
	DefaultCalibrateWarmup   = 500 * time.Millisecond
	DefaultCalibrateDuration = 2 * time.Second
	// CalibrateBackoff is how long a calibration worker waits after a
	// rejection or a failure before its next request, so that a target
	// that answers "no" fast is not hammered by a retry storm that takes
	// its CPU away: the loop is then paced by the pause, not by the
	// target's speed at saying no.
	CalibrateBackoff = time.Millisecond
)

// CalibrateConfig describes a closed-loop capacity measurement.
type CalibrateConfig struct {
	// URL is the target; its host must be a loopback address or
	// "localhost".
	URL string
	// Method is the request method; empty means GET.
	Method string
	// Conns is the number of workers, each with one request at a time
	// (and, with the client Calibrate builds, one connection); zero means
	// DefaultCalibrateConns. Enough of them saturate the target.
	Conns int
	// Warmup is how long the workers run before the measuring window
	// opens; zero means DefaultCalibrateWarmup.
	Warmup time.Duration
	// Duration is the measuring window; zero means
	// DefaultCalibrateDuration.
	Duration time.Duration
	// Deadline is the client deadline per request, from its send; zero
	// means DefaultDeadline. A request not answered by then fails.
	Deadline time.Duration
	// Client sends the requests; nil builds one with a pool of Conns
	// connections, closed at the end.
	Client *http.Client
	// NewConns sends every request on a connection of its own, dialled
	// for it (over https, with a full handshake); it needs the built-in
	// client (no Client).
	NewConns bool
	// Resend sends the next request at once after a rejection or a
	// failure, as wrk and hey do, instead of pausing CalibrateBackoff.
	Resend bool
}

// Calibration is the outcome of Calibrate: the requests completed in the
// measuring window.
type Calibration struct {
	// Goodput is the rate of OK answers per second of Duration: the
	// target's capacity when Conns saturate it.
	Goodput float64
	// OK counts 2xx answers fully read within the deadline, Rejected 503
	// answers with the Sluice-Not-Started header, Failed anything else.
	OK, Rejected, Failed int64
	// Latency holds the latencies of the OK answers in microseconds,
	// from send to the end of the body.
	Latency *hdrhistogram.Histogram
	// Duration is the measuring window: CalibrateConfig.Duration, or less
	// (possibly zero) if the context ended first.
	Duration time.Duration
}

// withDefaults checks cfg and fills in its zero fields.
func (cfg CalibrateConfig) withDefaults() (CalibrateConfig, error) {
	if _, err := loopback.Check(cfg.URL); err != nil {
		return cfg, fmt.Errorf("load: %w", err)
	}
	switch {
	case cfg.Conns < 0:
		return cfg, fmt.Errorf("load: calibrate: negative Conns %d", cfg.Conns)
	case cfg.Warmup < 0:
		return cfg, fmt.Errorf("load: calibrate: negative Warmup %v", cfg.Warmup)
	case cfg.Duration < 0:
		return cfg, fmt.Errorf("load: calibrate: negative Duration %v", cfg.Duration)
	case cfg.Deadline < 0:
		return cfg, fmt.Errorf("load: calibrate: negative Deadline %v", cfg.Deadline)
	}
	if cfg.Conns == 0 {
		cfg.Conns = DefaultCalibrateConns
	}
	if cfg.Warmup == 0 {
		cfg.Warmup = DefaultCalibrateWarmup
	}
	if cfg.Duration == 0 {
		cfg.Duration = DefaultCalibrateDuration
	}
	if cfg.Deadline == 0 {
		cfg.Deadline = DefaultDeadline
	}
	if cfg.Method == "" {
		cfg.Method = http.MethodGet
	}
	if cfg.NewConns && cfg.Client != nil {
		return cfg, errors.New("load: calibrate: NewConns needs the built-in client: no Client")
	}
	if _, err := http.NewRequest(cfg.Method, cfg.URL, nil); err != nil {
		return cfg, fmt.Errorf("load: calibrate: %w", err)
	}
	return cfg, nil
}

// calibrator holds the counts of a calibration.
type calibrator struct {
	cfg  CalibrateConfig
	snd  sender
	from time.Time // the measuring window is [from, to)
	to   time.Time

	mu  sync.Mutex
	res Calibration
}

// worker sends requests one after the other until ctx ends.
func (c *calibrator) worker(ctx context.Context) {
	pause := time.NewTimer(time.Hour)
	pause.Stop()
	defer pause.Stop()
	for ctx.Err() == nil {
		o, lat, end := c.once(ctx)
		if o == outFailed && ctx.Err() != nil {
			// Cut by the end of the run, not by the target.
			return
		}
		if !end.Before(c.from) && end.Before(c.to) {
			c.record(o, lat)
		}
		if o == outOK || c.cfg.Resend {
			continue
		}
		pause.Reset(CalibrateBackoff)
		select {
		case <-ctx.Done():
			return
		case <-pause.C:
		}
	}
}

// once sends one request and returns its outcome, latency and end.
func (c *calibrator) once(ctx context.Context) (outcome, time.Duration, time.Time) {
	start := time.Now()
	o := c.snd.send(ctx, start.Add(c.cfg.Deadline), c.cfg.NewConns, nil)
	end := time.Now()
	lat := end.Sub(start)
	if lat > c.cfg.Deadline {
		o = outFailed
	}
	return o, lat, end
}

func (c *calibrator) record(o outcome, lat time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	switch o {
	case outOK:
		c.res.OK++
		h := c.res.Latency
		_ = h.RecordValue(min(max(lat.Microseconds(), 1), h.HighestTrackableValue()))
	case outRejected:
		c.res.Rejected++
	default:
		c.res.Failed++
	}
}

// Calibrate measures the capacity of the target at cfg.URL closed loop:
// cfg.Conns workers each send a request, read its answer to the end, and
// send the next, for cfg.Warmup and then cfg.Duration; the answers completed
// within the second stretch are counted. A worker pauses CalibrateBackoff
// after a rejection or a failure, unless cfg.Resend. Calibrate returns an error for a bad
// config; if ctx ends early, it cancels the requests in flight, waits for
// the workers and returns the partial Calibration with ctx's error. It
// leaves no goroutine behind.
func Calibrate(ctx context.Context, cfg CalibrateConfig) (Calibration, error) {
	cfg, err := cfg.withDefaults()
	if err != nil {
		return Calibration{}, err
	}
	start := time.Now()
	from := start.Add(cfg.Warmup)
	// The end of the window cancels the requests in flight: they would
	// complete after it and not count anyway.
	run, cancel := context.WithDeadline(ctx, from.Add(cfg.Duration))
	defer cancel()
	u, _ := url.Parse(cfg.URL) // checked by withDefaults
	snd, err := newSender(run, u, cfg.Method, cfg.Client, cfg.Conns, cfg.Deadline)
	if err != nil {
		return Calibration{}, err
	}
	defer snd.close()
	c := &calibrator{cfg: cfg, snd: snd, from: from, to: from.Add(cfg.Duration)}
	c.res.Latency = hdrhistogram.New(1, max(2*cfg.Deadline.Microseconds(), 1), 3)
	var wg sync.WaitGroup
	for range cfg.Conns {
		wg.Go(func() { c.worker(run) })
	}
	wg.Wait()

	res := c.res
	res.Duration = cfg.Duration
	if err = ctx.Err(); err != nil {
		res.Duration = min(max(time.Since(c.from), 0), cfg.Duration)
	}
	if res.Duration > 0 {
		res.Goodput = float64(res.OK) / res.Duration.Seconds()
	}
	if err != nil {
		return res, fmt.Errorf("load: calibrate: %w", err)
	}
	return res, nil
}
