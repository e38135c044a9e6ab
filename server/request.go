package server

import (
	"context"
	"crypto/tls"
	"io"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"strings"

	"github.com/sluice-go/sluice/sched"
)

// Handler serves one request: the native handler type. It runs as a
// coroutine on the worker that owns the connection, so sched.Await (and the
// await package) with r.Context() releases the worker while it waits, and
// the handler resumes on the same worker ahead of new requests.
type Handler interface {
	ServeSluice(w *ResponseWriter, r *Request)
}

// HandlerFunc adapts a function to Handler.
type HandlerFunc func(w *ResponseWriter, r *Request)

// ServeSluice calls f(w, r).
func (f HandlerFunc) ServeSluice(w *ResponseWriter, r *Request) { f(w, r) }

// Request is a parsed HTTP/1.x request, valid until its handler returns.
type Request struct {
	// Method, RequestURI (the request-target as sent) and Proto come
	// from the request line; URL is RequestURI parsed.
	Method     string
	RequestURI string
	URL        *url.URL
	Proto      string
	ProtoMajor int
	ProtoMinor int
	// Header holds the header fields with canonical keys, without Host.
	Header http.Header
	// Host is the URL's host if the target named one, else the Host field.
	Host string
	// ContentLength is the body's length: -1 for a chunked body of
	// unknown length, 0 for none.
	ContentLength int64
	// Chunked reports a chunked request body.
	Chunked bool
	// Close reports that the connection closes after this request
	// (Connection: close, or HTTP/1.0 without keep-alive).
	Close bool
	// RemoteAddr is the client's address.
	RemoteAddr netip.AddrPort
	// TLS describes the connection's TLS session (Config.TLS); nil on
	// plain HTTP. Shared by the connection's requests: do not modify it.
	TLS *tls.ConnectionState
	// Body is the request body; it is never nil, and reads at its end
	// return io.EOF. The server closes it.
	Body io.ReadCloser

	ctx context.Context
	c   *conn
}

// Context returns the request's context: cancelled when the client goes
// away, when a body read passes the read deadline, and when the handler
// returns. Await with it releases the worker. As in net/http, its value
// for http.ServerContextKey is an *http.Server that describes this server
// (Server.HTTPServer: descriptive, never started), and its value for
// http.LocalAddrContextKey is the connection's local address (a
// *net.TCPAddr) once LocalAddr or HTTPRequest has been called on one of
// the connection's requests; HTTPHandler's requests always carry it.
func (r *Request) Context() context.Context { return r.ctx }

// LocalAddr returns the address of the server's end of the connection: the
// address the client reached, which on a server listening on every address
// tells which one. The kernel is asked once per connection. Call it from
// the handler.
func (r *Request) LocalAddr() net.Addr {
	if r.c == nil || r.c.nc == nil {
		return nil
	}
	return r.c.localAddr()
}

// Worker returns the worker serving the request; nil for the Request of
// an HTTP/2 stream that the lane rules (Lanes.Func) and the admission
// policies (admit.Attempt.Request) see, whose worker is picked after them.
func (r *Request) Worker() *sched.Worker {
	if r.c == nil {
		return nil
	}
	return r.c.w
}

// HTTPRequest returns the request as a *http.Request, as net/http would
// have built it, sharing Header, URL and Body. Its context is the
// request's, which then carries http.LocalAddrContextKey (see Context).
func (r *Request) HTTPRequest() *http.Request {
	r.LocalAddr() // for http.LocalAddrContextKey
	hr := &http.Request{
		Method:     r.Method,
		URL:        r.URL,
		Proto:      r.Proto,
		ProtoMajor: r.ProtoMajor,
		ProtoMinor: r.ProtoMinor,
		Header:     r.Header,
		Body:       r.Body,
		Close:      r.Close,
		Host:       r.Host,
		RequestURI: r.RequestURI,
		RemoteAddr: r.remoteAddr(),
		TLS:        r.TLS,
	}
	switch {
	case r.Chunked:
		hr.ContentLength = -1
		hr.TransferEncoding = []string{"chunked"}
	case r.ContentLength > 0:
		hr.ContentLength = r.ContentLength
	default:
		hr.Body = http.NoBody
	}
	return hr.WithContext(r.ctx)
}

// remoteAddr returns RemoteAddr as net/http writes it: an IPv4 client of a
// dual-stack listener (":8080") comes as an IPv4-mapped IPv6 address, which
// net/http shows as IPv4. An HTTPHandler server's connection has it written
// once for its requests.
func (r *Request) remoteAddr() string {
	if c := r.c; c != nil && c.remote != "" && c.nc != nil && c.nc.RemoteAddr() == r.RemoteAddr {
		return c.remote
	}
	return formatRemote(r.RemoteAddr)
}

func formatRemote(a netip.AddrPort) string {
	return netip.AddrPortFrom(a.Addr().Unmap(), a.Port()).String()
}

// HTTPHandler adapts a net/http Handler to the server: it gets the request
// from Request.HTTPRequest and the ResponseWriter, which implements
// http.ResponseWriter, http.Flusher and http.Hijacker, and the methods
// http.ResponseController finds (FlushError, SetReadDeadline,
// SetWriteDeadline, EnableFullDuplex). The request's context carries
// http.ServerContextKey and http.LocalAddrContextKey, as net/http's does.
// As net/http's server does, it answers "OPTIONS *" itself (200, empty).
func HTTPHandler(h http.Handler) Handler { return httpHandler{h} }

// httpHandler is the Handler that HTTPHandler returns; the server finds
// the http.Handler in it for the *http.Server it describes itself with.
type httpHandler struct{ h http.Handler }

func (a httpHandler) ServeSluice(w *ResponseWriter, r *Request) {
	if answerOptionsStar(w, r.Method, r.RequestURI, r.ContentLength, r.Body) {
		return
	}
	a.h.ServeHTTP(w, r.HTTPRequest())
}

// answerOptionsStar answers "OPTIONS *" as net/http's server does, and
// reports whether the request was that: it asks about the server, not a
// resource, and is answered without the handler (200, empty; a body of up
// to 256 KiB read and dropped). HTTP/1.1 and HTTP/2 both call it.
func answerOptionsStar(w http.ResponseWriter, method, uri string, contentLength int64, body io.Reader) bool {
	if uri != "*" || method != http.MethodOptions {
		return false
	}
	if contentLength != 0 && body != nil {
		_, _ = io.Copy(io.Discard, io.LimitReader(body, 256<<10))
	}
	w.Header().Set("Content-Length", "0")
	w.WriteHeader(http.StatusOK)
	return true
}

// withOptionsStar is an http.Handler answering "OPTIONS *" itself
// (answerOptionsStar) and passing the rest to h: the HTTP/2 path's, as
// HTTPHandler is HTTP/1.1's.
type withOptionsStar struct{ h http.Handler }

func (o withOptionsStar) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if !answerOptionsStar(w, r.Method, r.RequestURI, r.ContentLength, r.Body) {
		o.h.ServeHTTP(w, r)
	}
}

// parseTarget parses a request-target into u as net/http does: origin-form
// and absolute-form through url.ParseRequestURI, and the authority-form of
// CONNECT. The usual origin-form, a plain path with or without a query, is
// parsed without allocating.
func parseTarget(method, target string, u *url.URL) error {
	if parsePlainPath(target, u) {
		return nil
	}
	if method == "CONNECT" && !strings.HasPrefix(target, "/") {
		p, err := url.ParseRequestURI("http://" + target)
		if err != nil {
			return err
		}
		*u = *p
		u.Scheme = ""
		return nil
	}
	p, err := url.ParseRequestURI(target)
	if err != nil {
		return err
	}
	*u = *p
	return nil
}

// parsePlainPath parses target into u, as url.ParseRequestURI would, when
// it is a path that needs no unescaping followed by an optional non-empty
// query of printable characters, and reports whether it did.
func parsePlainPath(target string, u *url.URL) bool {
	if target == "" || target[0] != '/' {
		return false
	}
	path, query, hasQuery := strings.Cut(target, "?")
	for i := 0; i < len(path); i++ {
		if !plainPathByte(path[i]) {
			return false
		}
	}
	if hasQuery {
		if query == "" {
			return false // "/p?": ForceQuery
		}
		for i := 0; i < len(query); i++ {
			if c := query[i]; c <= ' ' || c >= 0x7f {
				return false
			}
		}
	}
	*u = url.URL{Path: path, RawQuery: query}
	return true
}

// plainPathByte reports whether c stands for itself in a path: url.URL's
// escaping of a path leaves it as it is, so Path is the target's text and
// RawPath is empty.
func plainPathByte(c byte) bool {
	switch {
	case 'a' <= c && c <= 'z', 'A' <= c && c <= 'Z', '0' <= c && c <= '9':
		return true
	}
	switch c {
	case '-', '.', '_', '~', '$', '&', '+', ',', '/', ':', ';', '=', '@':
		return true
	}
	return false
}
