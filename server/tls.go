package server

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net/netip"
	"slices"
	"sync/atomic"
	"syscall"

	"github.com/sluice-go/sluice/lanes"
)

// DefaultMaxHandshakesPerWorker is Config.MaxHandshakes's default, per
// worker.
const DefaultMaxHandshakesPerWorker = 256

// TLSStats counts a TLS server's handshakes since it started.
type TLSStats struct {
	// Completed handshakes.
	Completed uint64
	// Failed handshakes: the client's hello was not TLS, or not one the
	// configuration accepts, or the client went away or ran out of time
	// (Config.ReadHeaderTimeout) before the end, also while its hello was
	// incomplete.
	Failed uint64
	// Waited hellos: they were complete while their client's address held
	// its share of the worker's places (a quarter), and waited unread for
	// one of them.
	Waited uint64
	// Evicted handshakes: the oldest of their worker's share of
	// Config.MaxHandshakes, still waiting for their client, when a newer
	// hello needed a place; they were closed.
	Evicted uint64
	// Late connections: their ClientHello had waited past the admission's
	// age limit (Config.Admission.MaxAge, or its standing target) when the
	// worker came to it, and they were closed unanswered, as the request
	// that would follow would be refused: the handshake's work is not
	// spent on it.
	Late uint64
	// InProgress is the number of handshakes running now.
	InProgress int64
}

// tlsCounters are the server's TLSStats.
type tlsCounters struct {
	completed, failed, waited, evicted, late atomic.Uint64
	inProgress                               atomic.Int64
}

// TLSStats returns the server's handshake counts; all zero on a plain
// HTTP server.
func (srv *Server) TLSStats() TLSStats {
	return TLSStats{
		Completed:  srv.tlsc.completed.Load(),
		Failed:     srv.tlsc.failed.Load(),
		Waited:     srv.tlsc.waited.Load(),
		Evicted:    srv.tlsc.evicted.Load(),
		Late:       srv.tlsc.late.Load(),
		InProgress: srv.tlsc.inProgress.Load(),
	}
}

// serverTLS checks a Config.TLS and returns the copy the server uses: it
// offers HTTP/1.1 by ALPN (net/http adds it too), and "h2" first when the
// server speaks HTTP/2 (h2), never otherwise, so that a client offering
// both gets HTTP/1.1 from a server without HTTP/2.
func serverTLS(cfg *tls.Config, h2 bool) (*tls.Config, error) {
	if cfg == nil {
		return nil, nil
	}
	if len(cfg.Certificates) == 0 && cfg.GetCertificate == nil && cfg.GetConfigForClient == nil {
		return nil, errors.New("server: Config.TLS has no certificate: set Certificates (from tls.LoadX509KeyPair, say) or GetCertificate")
	}
	c := cfg.Clone()
	c.NextProtos = slices.DeleteFunc(slices.Clone(c.NextProtos), func(p string) bool { return p == "h2" })
	if !slices.Contains(c.NextProtos, "http/1.1") {
		c.NextProtos = append(c.NextProtos, "http/1.1")
	}
	if h2 {
		c.NextProtos = append([]string{"h2"}, c.NextProtos...)
	}
	return c, nil
}

// A TLS server's handshakes
//
// A handshake takes one of its worker's places (Config.MaxHandshakes,
// shared out among the workers) from the moment its client's first record,
// the ClientHello, is complete, to the end of the handshake. Until then the
// connection waits as an idle one does, its bytes kept, under the header
// timeout: a client that sends a few bytes of a hello and stalls holds no
// place, and a thousand of them do not keep one other client out.
//
// One client address (an IPv4 address, or an IPv6 /64, which one user
// commonly has whole) holds at most a quarter of a worker's places: a whole
// hello from an address that holds its share waits, unread, for one of its
// places (TLSStats.Waited), under its header timeout. So clients that send
// whole hellos and stall keep a quarter of the places and cost nothing
// more, and the others keep the rest (docs/design.md, "TLS on the
// workers", says why they wait rather than close).
//
// A worker whose places are all taken when a new hello is complete closes
// the oldest of its handshakes to make room (TLSStats.Evicted). That one
// is waiting for its client: the worker computes one handshake at a time,
// and it is computing none while it reads a hello.

// peerShare is the part of a worker's handshake places one client address
// may hold: 1/peerShare of them, at least one.
const peerShare = 4

// peerKey is what a client's address counts as for its share of places:
// an IPv4 address, or the /64 of an IPv6 one.
func peerKey(ap netip.AddrPort) netip.Addr {
	a := ap.Addr().Unmap()
	if a.Is4() {
		return a
	}
	p, err := a.Prefix(64)
	if err != nil {
		return a
	}
	return p.Addr()
}

// maxHelloRecord is the largest first record a hello may be kept waiting
// for: a TLS record's plaintext is at most 2^14 bytes (RFC 8446 section
// 5.1). A header announcing more is handed to crypto/tls, which refuses it.
const maxHelloRecord = 1 << 14

// helloComplete reports whether b, the first bytes of a TLS connection,
// hold the whole first record: the ClientHello, or all crypto/tls needs to
// refuse what is not one.
func helloComplete(b []byte) bool {
	switch {
	case len(b) == 0:
		return false
	case b[0] != tlsHandshakeRecord:
		return true // not a hello: crypto/tls answers it (plain HTTP gets a 400)
	case len(b) < 5:
		return false
	}
	size := int(b[3])<<8 | int(b[4])
	return size > maxHelloRecord || len(b) >= 5+size
}

// readHello reads the first bytes of a TLS connection, in the current task
// (Upstream: a new connection's work), until its first record is complete,
// then starts its handshake, or closes the connection when the hello is
// too old for the age limit.
func (c *conn) readHello() {
	if c.buf == nil {
		c.buf = c.ws.getBuf()
	}
	var n int
	var stamp int64
	var err error
	if c.srv.stamps {
		n, stamp, err = c.nc.ReadStamped(c.buf)
	} else {
		n, err = c.nc.Read(c.buf)
	}
	switch {
	case err != nil && err != syscall.EAGAIN:
		c.close()
		return
	case err == syscall.EAGAIN:
		c.releaseBuf()
		return
	}
	hello := append(c.hello, c.buf[:n]...)
	c.releaseBuf()
	if !helloComplete(hello) {
		c.hello = hello // the rest is on its way: wait, holding no place
		return
	}
	c.hello = nil
	if c.srv.adm.TooOld(stamp) {
		c.srv.tlsc.late.Add(1)
		c.close()
		return
	}
	c.hsPeer = peerKey(c.nc.RemoteAddr())
	if !c.ws.takeHandshake(c) {
		c.waitForPlace(hello)
		return
	}
	c.startHandshake(hello)
}

// startHandshake starts the handshake of c, which holds a place, with its
// whole hello, in a coroutine of its own. Call it from a task, not from a
// coroutine.
func (c *conn) startHandshake(hello []byte) {
	c.srv.tlsc.inProgress.Add(1)
	c.handshaking = true
	if err := c.nc.StartTLS(c.srv.tls, hello); err != nil {
		c.handshakeDone(err)
		return
	}
	_ = c.nc.OnReadable(lanes.Continuation, nil)
	c.w.GoNow(&c.cctx, c.handshake)
}

// peerPlaces are one client address's handshakes on a worker: how many
// places it holds, and its connections waiting for one, the oldest last.
type peerPlaces struct {
	held    int
	waiting connList
}

// peer returns the places of c's address, created if need be.
func (ws *workerState) peer(c *conn) *peerPlaces {
	p := ws.hsPeers[c.hsPeer]
	if p == nil {
		if ws.hsPeers == nil {
			ws.hsPeers = make(map[netip.Addr]*peerPlaces)
		}
		p = &peerPlaces{waiting: connList{which: linkHandshake}}
		ws.hsPeers[c.hsPeer] = p
	}
	return p
}

// takeHandshake gives c one of the worker's places for handshakes, closing
// the oldest handshake to make room when they are all taken; false when
// c's address holds its share of them.
func (ws *workerState) takeHandshake(c *conn) bool {
	per := c.srv.hsPerWorker
	if p := ws.hsPeers[c.hsPeer]; p != nil && p.held >= max(1, per/peerShare) {
		return false
	}
	if ws.nHandshakes >= per {
		if old := ws.handshakes.tail; old != nil {
			ws.release(old)
			ws.tidy(old.hsPeer)
			old.evicted = true
			c.srv.tlsc.evicted.Add(1)
			old.close() // its coroutine wakes, and fails with ErrClosed
		}
	}
	ws.grant(c)
	return true
}

// grant gives c a place.
func (ws *workerState) grant(c *conn) {
	c.hsHeld = true
	ws.peer(c).held++
	ws.nHandshakes++
	ws.handshakes.add(c)
}

// release gives c's place back, if it holds one.
func (ws *workerState) release(c *conn) bool {
	if !c.hsHeld {
		return false
	}
	c.hsHeld = false
	ws.nHandshakes--
	ws.handshakes.remove(c)
	ws.peer(c).held--
	return true
}

// endHandshake gives c's place back, once, to the oldest connection of its
// address waiting for one, if there is one, whose handshake then starts.
func (ws *workerState) endHandshake(c *conn) {
	if !ws.release(c) {
		return
	}
	p := ws.hsPeers[c.hsPeer]
	next := p.waiting.tail
	if next == nil {
		ws.tidy(c.hsPeer)
		return
	}
	p.waiting.remove(next)
	next.waitingPlace = false
	_ = next.nc.OnHangup(nil)
	ws.grant(next)
	hello := next.hello
	next.hello = nil
	next.w.Push(lanes.Upstream, func() {
		if next.state == connClosed {
			return // closed meanwhile: close gave the place back
		}
		next.startHandshake(hello)
	})
}

// waitForPlace leaves c, whose address holds its share of places, unread
// with its whole hello until one of them is free (endHandshake), its
// header timeout passes, or its client leaves.
func (c *conn) waitForPlace(hello []byte) {
	c.hello = hello
	c.waitingPlace = true
	c.srv.tlsc.waited.Add(1)
	c.ws.peer(c).waiting.add(c)
	if c.closeFn == nil {
		c.closeFn = c.close
	}
	if c.nc.OnReadable(lanes.Continuation, nil) != nil || c.nc.OnHangup(c.closeFn) != nil {
		c.close()
	}
}

// unwait takes c off its address's waiting list, if it is on it.
func (ws *workerState) unwait(c *conn) {
	if !c.waitingPlace {
		return
	}
	c.waitingPlace = false
	ws.hsPeers[c.hsPeer].waiting.remove(c)
	ws.tidy(c.hsPeer)
}

// tidy forgets an address that holds no place and has no connection
// waiting for one, so that the map holds only the addresses in play.
func (ws *workerState) tidy(peer netip.Addr) {
	if p := ws.hsPeers[peer]; p != nil && p.held == 0 && p.waiting.head == nil {
		delete(ws.hsPeers, peer)
	}
}

// handshake is the coroutine of a TLS handshake: its computing runs on the
// worker, and its waits for the client release it.
func (c *conn) handshake(ctx context.Context) {
	c.handshakeDone(c.nc.Handshake(ctx))
}

// handshakeDone ends a handshake: the connection waits for its first
// request, or closes.
func (c *conn) handshakeDone(err error) {
	c.handshaking = false
	c.ws.endHandshake(c)
	t := &c.srv.tlsc
	t.inProgress.Add(-1)
	if err != nil {
		if !c.evicted {
			t.failed.Add(1)
		}
		if c.state == connClosed {
			return // timed out, or the server closed it
		}
		var re tls.RecordHeaderError
		if errors.As(err, &re) && re.Conn != nil && looksLikeHTTP(re.RecordHeader) {
			// As net/http answers it, on the socket itself.
			_, _ = io.WriteString(re.Conn, "HTTP/1.0 400 Bad Request\r\n\r\nClient sent an HTTP request to an HTTPS server.\n")
		} else {
			c.srv.log.Debug("sluice server: TLS handshake", "remote", c.nc.RemoteAddr(), "err", err)
		}
		c.close()
		return
	}
	t.completed.Add(1)
	if c.state == connClosed {
		return
	}
	st := c.nc.TLS().ConnectionState()
	c.tlsState = &st
	if st.NegotiatedProtocol == "h2" && c.srv.h2 != nil {
		c.startH2(nil)
		return
	}
	c.began = c.w.Now()
	// The first request is read as Continuation work, not as new work:
	// the handshake has been paid for, and its request (often already in
	// the session, sent with the client's last handshake message) must
	// not wait behind the hellos of connections not yet started. Then the
	// connection is as a plain one after its accept.
	c.awaitFirst(connIdle, lanes.Continuation)
}

// looksLikeHTTP reports whether a TLS record header is the start of an
// HTTP/1 request, as net/http tells them.
func looksLikeHTTP(hdr [5]byte) bool {
	switch string(hdr[:]) {
	case "GET /", "HEAD ", "POST ", "PUT /", "OPTIO":
		return true
	}
	return false
}

// handshakesPerWorker checks Config.MaxHandshakes and returns each
// worker's share of it (at least one), or the default.
func handshakesPerWorker(cfg Config, workers int) (int, error) {
	switch {
	case cfg.MaxHandshakes < 0:
		return 0, fmt.Errorf("server: Config.MaxHandshakes is %d: it must be positive, or zero for %d per worker", cfg.MaxHandshakes, DefaultMaxHandshakesPerWorker)
	case cfg.MaxHandshakes == 0:
		return DefaultMaxHandshakesPerWorker, nil
	}
	return max(1, (cfg.MaxHandshakes+workers-1)/workers), nil
}
