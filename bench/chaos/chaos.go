// Package chaos runs misbehaving HTTP/1.1 clients against a loopback
// server, to see that it keeps serving its well-behaved clients and gives
// back what the bad ones took: slowloris heads that never end, clients that
// pipeline requests and never read the answers, requests cut short by a
// reset, random bytes, and floods of pipelined requests.
//
// Run starts the clients of a Mix, each repeating its misbehaviour one
// connection at a time until its context ends, and returns what they did
// and saw (Stats, one Counts per kind):
//
//	ctx, stop := context.WithTimeout(ctx, time.Minute)
//	defer stop()
//	st, err := chaos.Run(ctx, chaos.Config{
//		URL: "http://127.0.0.1:8080/",
//		Mix: chaos.Mix{Slowloris: 16, NoRead: 4, Flood: 4},
//	})
//
// The clients speak plain http and only to loopback addresses; they run
// beside a load (package bench/load) or alone.
package chaos

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/url"
	"os"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/sluice-go/sluice/bench/internal/loopback"
	"github.com/sluice-go/sluice/bench/internal/wire"
)

// Kind is one way a chaos client misbehaves (see Run).
type Kind uint8

const (
	// Slowloris writes a request head a byte at a time, about
	// Config.SlowGap apart, never ending it, until the server cuts
	// the connection or Config.SlowHold passes.
	Slowloris Kind = iota
	// NoRead pipelines requests (for Config.NoReadPath) on a
	// connection with small buffers and never reads the answers, until
	// the server's writes block and it stops reading, holds the
	// connection, then resets it.
	NoRead
	// Reset writes part of a request, a head cut short or a whole
	// head whose body is cut short, and resets the connection (SO_LINGER
	// 0: the kernel sends RST).
	Reset
	// Garbage writes random bytes, alone or after a request line,
	// and reads what the server answers until it closes.
	Garbage
	// Flood writes many requests back to back on one connection,
	// then reads every answer.
	Flood

	numKinds
)

// Kinds returns every kind, in order.
func Kinds() []Kind { return []Kind{Slowloris, NoRead, Reset, Garbage, Flood} }

var kindNames = [numKinds]string{"slowloris", "noread", "reset", "garbage", "flood"}

// String returns the kind's name: slowloris, noread, reset, garbage or
// flood.
func (k Kind) String() string {
	if k < numKinds {
		return kindNames[k]
	}
	return "chaos(" + strconv.Itoa(int(k)) + ")"
}

// Mix is how many clients of each kind run at once; each runs its
// misbehaviour over and over, one connection at a time.
type Mix struct {
	Slowloris int `json:"slowloris"`
	NoRead    int `json:"noread"`
	Reset     int `json:"reset"`
	Garbage   int `json:"garbage"`
	Flood     int `json:"flood"`
}

// Of returns the number of clients of kind k.
func (m Mix) Of(k Kind) int {
	switch k {
	case Slowloris:
		return m.Slowloris
	case NoRead:
		return m.NoRead
	case Reset:
		return m.Reset
	case Garbage:
		return m.Garbage
	case Flood:
		return m.Flood
	}
	return 0
}

// Total returns the number of clients of every kind.
func (m Mix) Total() int {
	n := 0
	for _, k := range Kinds() {
		n += max(m.Of(k), 0)
	}
	return n
}

// Defaults of Config's zero fields.
const (
	DefaultSlowGap       = time.Second
	DefaultSlowHold      = 15 * time.Second
	DefaultNoReadHold    = 3 * time.Second
	DefaultNoReadMax     = 4096
	DefaultFloodRequests = 256
	DefaultTimeout       = 5 * time.Second
)

// Config configures Run. Zero fields take the defaults given.
type Config struct {
	// URL is the target; its path and query are those of the
	// well-formed requests (flood, reset, slowloris), and its host must
	// be a loopback address or "localhost".
	URL string
	// NoReadPath is the request target of the no-read clients; empty
	// means URL's. The larger its answer, the fewer requests fill the
	// server's socket buffer (up to 4 MiB on Linux) and block its writes:
	// a path with an answer of a few hundred KiB is a good choice.
	NoReadPath string
	// Mix is how many clients of each kind run; with the zero value, Run
	// runs none and returns at once.
	Mix Mix
	// Seed seeds the clients' random choices (client i uses Seed+i).
	Seed uint64
	// SlowGap is the mean gap between two bytes of a slowloris client
	// (each gap is drawn between half and one and a half of it); default
	// 1 s.
	SlowGap time.Duration
	// SlowHold is how long a slowloris client keeps writing before it
	// gives up and closes; default 15 s, past the 10 s header timeout of
	// the sluice server.
	SlowHold time.Duration
	// NoReadHold is the longest a no-read client holds its connection
	// (each holds it between half and all of it); default 3 s.
	NoReadHold time.Duration
	// NoReadMax bounds the requests a no-read client writes on one
	// connection; default 4096 (4 MiB).
	NoReadMax int
	// FloodRequests is the most requests a flood writes at once (each
	// writes between a quarter and all of them); default 256.
	FloodRequests int
	// Timeout bounds each wait for the server (dial, a write, the
	// answers of a flood, the end of a garbage exchange); default 5 s.
	Timeout time.Duration
}

// Counts is what the clients of one kind did and saw.
type Counts struct {
	// Conns counts the connections opened, DialErrors the dials that
	// failed, and DialError is the first of their errors.
	Conns      int64  `json:"conns"`
	DialErrors int64  `json:"dial_errors,omitempty"`
	DialError  string `json:"dial_error,omitempty"`
	// Requests counts the complete requests written (flood, no-read).
	Requests int64 `json:"requests,omitempty"`
	// Status counts the answers read, by status code.
	Status map[int]int64 `json:"status,omitempty"`
	// ServerClosed counts the connections the server closed or reset
	// before the client was done with them.
	ServerClosed int64 `json:"server_closed,omitempty"`
	// Stalled counts the no-read connections on which the server stopped
	// reading: its writes were blocked.
	Stalled int64 `json:"stalled,omitempty"`
	// Resets counts the connections the client reset (SO_LINGER 0).
	Resets int64 `json:"resets,omitempty"`
	// GaveUp counts the slowloris connections the server had not cut
	// after SlowHold, and the garbage exchanges it neither answered nor
	// closed within Timeout.
	GaveUp int64 `json:"gave_up,omitempty"`
	// CutMin and CutMax are the shortest and longest time a server let a
	// slowloris head drip before cutting the connection.
	CutMin time.Duration `json:"cut_min,omitempty"`
	CutMax time.Duration `json:"cut_max,omitempty"`
}

// add adds o's counts to c's.
func (c *Counts) add(o *Counts) {
	c.Conns += o.Conns
	c.DialErrors += o.DialErrors
	if c.DialError == "" {
		c.DialError = o.DialError
	}
	c.Requests += o.Requests
	c.ServerClosed += o.ServerClosed
	c.Stalled += o.Stalled
	c.Resets += o.Resets
	c.GaveUp += o.GaveUp
	for code, n := range o.Status {
		c.answer(code, n)
	}
	if o.CutMax > 0 {
		c.cut(o.CutMin)
		c.cut(o.CutMax)
	}
}

func (c *Counts) answer(code int, n int64) {
	if c.Status == nil {
		c.Status = make(map[int]int64)
	}
	c.Status[code] += n
}

func (c *Counts) cut(d time.Duration) {
	if c.CutMax == 0 || d < c.CutMin {
		c.CutMin = d
	}
	c.CutMax = max(c.CutMax, d)
}

// Stats holds the counts of each kind that ran, by its name.
type Stats map[string]*Counts

// runner is a running set of chaos clients.
type runner struct {
	cfg  Config
	addr string // host:port
	host string // the Host field
	path string // the request target
	// unread is the no-read clients' request target.
	unread string
}

// Run runs the chaos clients of cfg.Mix against cfg.URL until ctx ends,
// each repeating its misbehaviour (see the Kind constants) one connection
// at a time, and returns what they did. The end of ctx cuts whatever they
// are doing; Run returns once every client has closed its connection and
// returned, and leaves no goroutine behind. A Mix of no client returns at
// once, with empty Stats. Run returns an error only for a bad config.
func Run(ctx context.Context, cfg Config) (Stats, error) {
	u, err := loopback.Check(cfg.URL)
	if err != nil {
		return nil, fmt.Errorf("chaos: %w", err)
	}
	if u.Scheme != "http" {
		return nil, fmt.Errorf("chaos: the clients speak plain http, not %q", u.Scheme)
	}
	c, err := newRunner(u, cfg)
	if err != nil {
		return nil, err
	}
	var (
		wg   sync.WaitGroup
		mu   sync.Mutex
		seed = c.cfg.Seed
	)
	stats := make(Stats)
	for _, k := range Kinds() {
		n := c.cfg.Mix.Of(k)
		if n <= 0 {
			continue
		}
		total := &Counts{}
		stats[k.String()] = total
		for range n {
			rng := rand.New(rand.NewPCG(seed, seed^0x5851f42d4c957f2d))
			seed++
			wg.Go(func() {
				var own Counts
				c.client(ctx, k, rng, &own)
				mu.Lock()
				total.add(&own)
				mu.Unlock()
			})
		}
	}
	wg.Wait()
	return stats, nil
}

// newRunner checks cfg and fills in its defaults.
func newRunner(u *url.URL, cfg Config) (*runner, error) {
	for _, k := range Kinds() {
		if cfg.Mix.Of(k) < 0 {
			return nil, fmt.Errorf("chaos: negative count of %s clients", k)
		}
	}
	if cfg.SlowGap <= 0 {
		cfg.SlowGap = DefaultSlowGap
	}
	if cfg.SlowHold <= 0 {
		cfg.SlowHold = DefaultSlowHold
	}
	if cfg.NoReadHold <= 0 {
		cfg.NoReadHold = DefaultNoReadHold
	}
	if cfg.NoReadMax <= 0 {
		cfg.NoReadMax = DefaultNoReadMax
	}
	if cfg.FloodRequests <= 0 {
		cfg.FloodRequests = DefaultFloodRequests
	}
	if cfg.Timeout <= 0 {
		cfg.Timeout = DefaultTimeout
	}
	addr := u.Host
	if u.Port() == "" {
		addr = net.JoinHostPort(u.Hostname(), "80")
	}
	c := &runner{cfg: cfg, addr: addr, host: u.Host, path: u.RequestURI(), unread: cfg.NoReadPath}
	if c.unread == "" {
		c.unread = c.path
	}
	return c, nil
}

// client runs episodes of kind k until ctx ends.
func (c *runner) client(ctx context.Context, k Kind, rng *rand.Rand, n *Counts) {
	for ctx.Err() == nil {
		nc, err := c.dial(ctx, k == NoRead)
		if err != nil {
			if ctx.Err() == nil {
				n.DialErrors++
				if n.DialError == "" {
					n.DialError = err.Error()
				}
				// The target may be gone: do not spin.
				sleepCtx(ctx, 100*time.Millisecond)
			}
			continue
		}
		n.Conns++
		// The end of ctx closes the connection, which ends whatever
		// the episode waits for.
		stop := context.AfterFunc(ctx, func() { _ = nc.Close() })
		reset := false
		switch k {
		case Slowloris:
			c.slowloris(ctx, nc, rng, n)
		case NoRead:
			reset = c.noRead(ctx, nc, rng, n)
		case Reset:
			c.reset(ctx, nc, rng, n)
			reset = true
		case Garbage:
			c.garbage(ctx, nc, rng, n)
		case Flood:
			c.flood(ctx, nc, rng, n)
		}
		stop()
		if reset {
			if tc, ok := nc.(*net.TCPConn); ok && tc.SetLinger(0) == nil {
				n.Resets++
			}
		}
		_ = nc.Close()
	}
}

// dial connects to the target; with small, the socket's buffers are made
// small (4 KiB, which the kernel doubles) before connecting, and so kept
// from growing: the window it advertises stays small, and its writes wait
// as soon as the server stops reading.
func (c *runner) dial(ctx context.Context, small bool) (net.Conn, error) {
	d := net.Dialer{Timeout: c.cfg.Timeout}
	if small {
		d.Control = func(_, _ string, rc syscall.RawConn) error {
			var serr error
			err := rc.Control(func(fd uintptr) { serr = smallBuffers(fd) })
			return errors.Join(err, serr)
		}
	}
	return d.DialContext(ctx, "tcp", c.addr)
}

// sleepCtx sleeps for d or until ctx ends.
func sleepCtx(ctx context.Context, d time.Duration) {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
	case <-t.C:
	}
}

// jitter returns a random duration in [lo*d, hi*d).
func jitter(rng *rand.Rand, d time.Duration, lo, hi float64) time.Duration {
	return time.Duration((lo + (hi-lo)*rng.Float64()) * float64(d))
}

// closedByPeer reports whether err means the server closed or reset the
// connection (and not that a deadline passed).
func closedByPeer(err error) bool {
	return errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) ||
		errors.Is(err, syscall.ECONNRESET) || errors.Is(err, syscall.EPIPE)
}

// slowloris drips a request head that never ends: one byte, then a read
// that waits up to the next gap for the server's reaction (an answer or
// the end of the connection), until the server reacts or SlowHold passes.
func (c *runner) slowloris(ctx context.Context, nc net.Conn, rng *rand.Rand, n *Counts) {
	head := []byte(fmt.Sprintf("GET %s HTTP/1.1\r\nHost: %s\r\n", c.path, c.host))
	start := time.Now()
	var one [1]byte
	for i := 0; ; i++ {
		_ = nc.SetWriteDeadline(time.Now().Add(c.cfg.Timeout))
		if _, err := nc.Write([]byte{slowByte(head, i)}); err != nil {
			if ctx.Err() == nil && closedByPeer(err) {
				n.ServerClosed++
				n.cut(time.Since(start))
			}
			return
		}
		gap := jitter(rng, c.cfg.SlowGap, 0.5, 1.5)
		if left := c.cfg.SlowHold - time.Since(start); gap > left {
			gap = max(left, 0)
		}
		_ = nc.SetReadDeadline(time.Now().Add(gap))
		k, err := nc.Read(one[:])
		switch {
		case ctx.Err() != nil:
			return
		case k > 0 || closedByPeer(err):
			// An answer (408, 400) or the end of the connection:
			// either way the server has cut the slow head.
			n.ServerClosed++
			n.cut(time.Since(start))
			return
		case err != nil && !errors.Is(err, os.ErrDeadlineExceeded):
			return
		}
		if time.Since(start) >= c.cfg.SlowHold {
			n.GaveUp++
			return
		}
	}
}

// slowByte returns the i-th byte of a slowloris head: head (the request
// line and Host), then field lines such as "ab:cde\r\n" that never end
// with the empty line.
func slowByte(head []byte, i int) byte {
	if i < len(head) {
		return head[i]
	}
	switch (i - len(head)) % 8 {
	case 2:
		return ':'
	case 6:
		return '\r'
	case 7:
		return '\n'
	}
	return byte('a' + i%26)
}

// Stall detection of the no-read clients: the server has stopped reading
// when less than stallBytes go out in a stallWindow. A server that reads
// takes that much in microseconds on loopback; one that does not still
// lets some through for a while, as its kernel compacts its full receive
// queue, so one write that waits is no sign.
const (
	stallWindow = 200 * time.Millisecond
	stallBytes  = 64 << 10
)

// noReadRequest is the request of the no-read clients: a field pads it to
// about 1 KiB, so that the server's receive buffer, once it stops reading,
// fills after a hundred or so.
func noReadRequest(path, host string) []byte {
	return []byte(fmt.Sprintf("GET %s HTTP/1.1\r\nHost: %s\r\nX-Pad: %s\r\n\r\n", path, host, strings.Repeat("p", 960)))
}

// noRead pipelines requests it never reads the answers of, in batches,
// until the server stops reading them (its own writes are blocked) or
// NoReadMax have gone out, then holds the connection without reading and
// reports that it should be reset.
func (c *runner) noRead(ctx context.Context, nc net.Conn, rng *rand.Rand, n *Counts) bool {
	req := noReadRequest(c.unread, c.host)
	buf := bytes.Repeat(req, 8)
	limit := c.cfg.NoReadMax * len(req)
	// The stream is buf over and over: a write cut short by its deadline
	// is continued from where it stopped, so that every request stays
	// whole.
	total, off := 0, 0
	defer func() { n.Requests += int64(total / len(req)) }()
	window, inWindow := time.Now(), 0
write:
	for total < limit {
		_ = nc.SetWriteDeadline(window.Add(stallWindow))
		k, err := nc.Write(buf[off:min(len(buf), off+limit-total)])
		total += k
		inWindow += k
		off = (off + k) % len(buf)
		switch {
		case ctx.Err() != nil:
			return true
		case err == nil && time.Since(window) < stallWindow:
			continue
		case err == nil || errors.Is(err, os.ErrDeadlineExceeded):
			if inWindow < stallBytes {
				n.Stalled++
				break write
			}
			window, inWindow = time.Now(), 0
		case closedByPeer(err):
			n.ServerClosed++
			return true
		default:
			return true
		}
	}
	// Hold, still not reading; a read would take the answers, so the
	// wait is a sleep, cut short by the end of ctx.
	sleepCtx(ctx, jitter(rng, c.cfg.NoReadHold, 0.5, 1))
	return true
}

// reset writes part of a request, waits a little (the server may be
// reading it, running the handler or draining the body), and returns for
// the connection to be reset.
func (c *runner) reset(ctx context.Context, nc net.Conn, rng *rand.Rand, n *Counts) {
	var part []byte
	if rng.IntN(2) == 0 {
		head := fmt.Sprintf("GET %s HTTP/1.1\r\nHost: %s\r\nUser-Agent: sluice-chaos\r\nAccept: */*\r\n\r\n", c.path, c.host)
		part = []byte(head[:1+rng.IntN(len(head)-1)])
	} else {
		// A whole head, and a body cut short: the handler may run,
		// and the server must drain or drop the rest.
		size := 1024 + rng.IntN(63*1024)
		head := fmt.Sprintf("GET %s HTTP/1.1\r\nHost: %s\r\nContent-Type: application/octet-stream\r\nContent-Length: %d\r\n\r\n", c.path, c.host, size)
		body := make([]byte, rng.IntN(size))
		fillRandom(rng, body)
		part = append([]byte(head), body...)
	}
	_ = nc.SetWriteDeadline(time.Now().Add(c.cfg.Timeout))
	if _, err := nc.Write(part); err != nil && ctx.Err() == nil && closedByPeer(err) {
		n.ServerClosed++
		return
	}
	sleepCtx(ctx, time.Duration(rng.IntN(50))*time.Millisecond)
}

// garbage writes random bytes, half the time after a valid request line,
// then reads until the server closes, noting the status of any answer.
func (c *runner) garbage(ctx context.Context, nc net.Conn, rng *rand.Rand, n *Counts) {
	junk := make([]byte, 1+rng.IntN(4096))
	fillRandom(rng, junk)
	var msg []byte
	if rng.IntN(2) == 0 {
		msg = junk
	} else {
		msg = append([]byte(fmt.Sprintf("GET %s HTTP/1.1\r\nHost: %s\r\n", c.path, c.host)), junk...)
		msg = append(msg, "\r\n\r\n"...)
	}
	_ = nc.SetDeadline(time.Now().Add(c.cfg.Timeout))
	if _, err := nc.Write(msg); err != nil {
		if ctx.Err() == nil && closedByPeer(err) {
			n.ServerClosed++
		}
		return
	}
	br := bufio.NewReaderSize(nc, 4096)
	for {
		res, _, err := wire.ReadResponse(br, false)
		switch {
		case ctx.Err() != nil:
			return
		case err == nil:
			n.answer(res.Status, 1)
			continue
		case closedByPeer(err):
			n.ServerClosed++
		case errors.Is(err, os.ErrDeadlineExceeded):
			n.GaveUp++
		}
		return
	}
}

// flood writes a burst of requests in one write and reads their answers.
func (c *runner) flood(ctx context.Context, nc net.Conn, rng *rand.Rand, n *Counts) {
	req := []byte(fmt.Sprintf("GET %s HTTP/1.1\r\nHost: %s\r\n\r\n", c.path, c.host))
	k := max(c.cfg.FloodRequests/4+rng.IntN(c.cfg.FloodRequests-c.cfg.FloodRequests/4+1), 1)
	_ = nc.SetDeadline(time.Now().Add(c.cfg.Timeout))
	// The requests fit in the socket buffers, so the write does not wait
	// for the answers to be read.
	if _, err := nc.Write(bytes.Repeat(req, k)); err != nil {
		if ctx.Err() == nil && closedByPeer(err) {
			n.ServerClosed++
		}
		return
	}
	n.Requests += int64(k)
	br := bufio.NewReaderSize(nc, 4096)
	for i := range k {
		res, keep, err := wire.ReadResponse(br, false)
		if err != nil {
			if ctx.Err() == nil && closedByPeer(err) {
				n.ServerClosed++
			}
			return
		}
		n.answer(res.Status, 1)
		if !keep {
			if i < k-1 {
				// The server closes after this answer (a
				// panic's 500): the rest goes unanswered.
				n.ServerClosed++
			}
			return
		}
	}
}

// fillRandom fills b with random bytes.
func fillRandom(rng *rand.Rand, b []byte) {
	for i := 0; i < len(b); i += 8 {
		v := rng.Uint64()
		for j := i; j < min(i+8, len(b)); j++ {
			b[j] = byte(v)
			v >>= 8
		}
	}
}
