package server

import (
	"bytes"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"slices"
	"sync/atomic"

	"golang.org/x/sys/unix"

	"github.com/sluice-go/sluice/lanes"
)

// DefaultMaxHandshakesPerWorker is Config.MaxHandshakes's default, per
// worker.
const DefaultMaxHandshakesPerWorker = 64

// TLSStats counts a TLS server's handshakes since it started.
type TLSStats struct {
	// Completed handshakes.
	Completed uint64
	// Failed handshakes: the client's hello was not TLS, or not one the
	// configuration accepts, or the client went away or ran out of time
	// (Config.ReadHeaderTimeout) before the end.
	Failed uint64
	// Refused connections: their ClientHello came while
	// Config.MaxHandshakes handshakes were in progress, and they were
	// closed at once, unanswered.
	Refused uint64
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
	completed, failed, refused, late atomic.Uint64
	inProgress                       atomic.Int64
}

// TLSStats returns the server's handshake counts; all zero on a plain
// HTTP server.
func (srv *Server) TLSStats() TLSStats {
	return TLSStats{
		Completed:  srv.tlsc.completed.Load(),
		Failed:     srv.tlsc.failed.Load(),
		Refused:    srv.tlsc.refused.Load(),
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

// helloBytes is how much of a ClientHello the worker reads before it
// starts the handshake; crypto/tls reads the rest.
const helloBytes = 2048

// readHello reads the first bytes of a TLS connection and starts its
// handshake, in the current task (Upstream: a new connection's work), or
// closes the connection when the hello is too old for the age limit or
// Config.MaxHandshakes are in progress.
func (c *conn) readHello() {
	if c.buf == nil {
		c.buf = c.ws.getBuf()
	}
	var n int
	var stamp int64
	var err error
	if c.srv.stamps {
		n, stamp, err = c.nc.ReadStamped(c.buf[:min(len(c.buf), helloBytes)])
	} else {
		n, err = c.nc.Read(c.buf[:min(len(c.buf), helloBytes)])
	}
	switch {
	case err != nil && err != unix.EAGAIN:
		c.close()
		return
	case err == unix.EAGAIN:
		c.releaseBuf()
		return
	}
	hello := bytes.Clone(c.buf[:n])
	c.releaseBuf()
	t := &c.srv.tlsc
	if c.srv.adm.TooOld(stamp) {
		t.late.Add(1)
		c.close()
		return
	}
	if t.inProgress.Add(1) > int64(c.srv.maxHandshakes) {
		t.inProgress.Add(-1)
		t.refused.Add(1)
		c.close()
		return
	}
	c.handshaking = true
	if err := c.nc.StartTLS(c.srv.tls, hello); err != nil {
		c.handshakeDone(err)
		return
	}
	_ = c.nc.OnReadable(lanes.Continuation, nil)
	c.w.GoNow(&c.cctx, c.handshake)
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
	t := &c.srv.tlsc
	t.inProgress.Add(-1)
	if err != nil {
		t.failed.Add(1)
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

// maxHandshakes checks Config.MaxHandshakes and applies its default.
func maxHandshakes(cfg Config, workers int) (int, error) {
	switch {
	case cfg.MaxHandshakes < 0:
		return 0, fmt.Errorf("server: Config.MaxHandshakes is %d: it must be positive, or zero for %d per worker", cfg.MaxHandshakes, DefaultMaxHandshakesPerWorker)
	case cfg.MaxHandshakes == 0:
		return DefaultMaxHandshakesPerWorker * workers, nil
	}
	return cfg.MaxHandshakes, nil
}
