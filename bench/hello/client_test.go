//go:build linux

package hello

import (
	"bufio"
	"bytes"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"strconv"
	"strings"
	"time"
)

// helloBody is what every server under test answers.
var helloBody = []byte("Hello, World!")

// request is the request every client sends: a keep-alive GET, as raw
// HTTP/1.1 bytes.
var request = []byte("GET / HTTP/1.1\r\nHost: 127.0.0.1\r\nUser-Agent: sluice-bench\r\n\r\n")

var (
	hdrContentLength    = []byte("Content-Length")
	hdrTransferEncoding = []byte("Transfer-Encoding")
	hdrConnection       = []byte("Connection")
	valClose            = []byte("close")
)

// envNewConns set to 1 makes every request of BenchmarkHello's client go
// on a connection of its own: dialled for it, and closed by the client with
// a reset once the response is read (SO_LINGER 0, so that no port stays in
// TIME_WAIT), which the server then sees.
const envNewConns = "SLUICE_BENCH_NEWCONNS"

// client is one keep-alive connection of the load generator. It allocates
// nothing per request, so that allocations counted by the benchmark are the
// server's; with envNewConns, it dials a connection for each request.
type client struct {
	nc       net.Conn // nil between the requests of a client with addr
	br       *bufio.Reader
	body     []byte // scratch for the response body
	want     expectation
	req      []byte    // the request it sends
	addr     string    // set: a new connection for each request
	deadline time.Time // of every connection
}

// expectation is the response a client checks for: a status and a body.
type expectation struct {
	status string
	body   []byte
	// file, when set, is the file whose bytes body holds: a client in a
	// child process reads it there.
	file string
	// post, when positive, makes the request a POST of that many bytes
	// (postRequest) instead of the GET.
	post int
}

// req returns the request the client sends for want.
func (want expectation) req() []byte {
	if want.post > 0 {
		return postRequest(want.post)
	}
	return request
}

// postRequest is a POST to / with a body of n bytes and its
// Content-Length.
func postRequest(n int) []byte {
	head := fmt.Sprintf("POST / HTTP/1.1\r\nHost: 127.0.0.1\r\nUser-Agent: sluice-bench\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n", n)
	return append([]byte(head), bytes.Repeat([]byte("x"), n)...)
}

// helloExpect is the hello response; rejectExpect the answer of a sluice
// server whose gate refuses everything (see refuseAll).
var (
	helloExpect  = expectation{status: "200", body: helloBody}
	rejectExpect = expectation{status: "503", body: []byte("request not started: refuse-all\n")}
)

// tlsPrefix marks the address of a server that speaks TLS.
const tlsPrefix = "tls://"

// dialClient connects to addr, with a TLS handshake when addr has
// tlsPrefix (the server's certificate is not checked: a throwaway one, on
// this machine).
func dialClient(addr string, want expectation) (*client, error) {
	c := &client{br: bufio.NewReaderSize(nil, 4096), body: make([]byte, max(256, len(want.body))), want: want, req: want.req()}
	if os.Getenv(envNewConns) == "1" {
		if strings.HasPrefix(addr, tlsPrefix) {
			return nil, fmt.Errorf("%s=1 is for plain HTTP (sluice bench -tls -newconns measures TLS)", envNewConns)
		}
		c.addr = addr
		return c, nil
	}
	nc, err := dialConn(addr)
	if err != nil {
		return nil, err
	}
	c.nc = nc
	c.br.Reset(nc)
	return c, nil
}

// dialConn connects to addr as dialClient does.
func dialConn(addr string) (net.Conn, error) {
	host, isTLS := strings.CutPrefix(addr, tlsPrefix)
	nc, err := net.Dial("tcp", host)
	if err != nil {
		return nil, err
	}
	if isTLS {
		tc := tls.Client(nc, &tls.Config{InsecureSkipVerify: true, NextProtos: []string{"http/1.1"}})
		if err := tc.Handshake(); err != nil {
			_ = nc.Close()
			return nil, err
		}
		nc = tc
	}
	return nc, nil
}

// setDeadline sets the deadline of the client's connections.
func (c *client) setDeadline(t time.Time) {
	c.deadline = t
	if c.nc != nil {
		_ = c.nc.SetDeadline(t)
	}
}

// close closes the client's connection.
func (c *client) close() {
	if c.nc != nil {
		_ = c.nc.Close()
		c.nc = nil
	}
}

// roundTrip sends one request and reads its response.
func (c *client) roundTrip() error {
	if c.addr == "" {
		if _, err := c.nc.Write(c.req); err != nil {
			return err
		}
		return readResponse(c.br, c.body, c.want)
	}
	nc, err := dialConn(c.addr)
	if err != nil {
		return err
	}
	c.nc = nc
	c.br.Reset(nc)
	if !c.deadline.IsZero() {
		_ = nc.SetDeadline(c.deadline)
	}
	if _, err = nc.Write(c.req); err == nil {
		err = readResponse(c.br, c.body, c.want)
	}
	if tc, ok := nc.(*net.TCPConn); ok {
		_ = tc.SetLinger(0)
	}
	c.close()
	return err
}

// readResponse reads one response to a GET from br and checks it: status
// 200, a Content-Length (no chunked encoding, no Connection: close) and the
// hello body. scratch holds the body while it is compared. It allocates
// only when it fails.
func readResponse(br *bufio.Reader, scratch []byte, want expectation) error {
	line, err := br.ReadSlice('\n')
	if err != nil {
		return fmt.Errorf("read status line: %w", err)
	}
	// "HTTP/1.1 200 OK\r\n": the reason phrase may be empty.
	if len(line) < 13 || !bytes.HasPrefix(line, []byte("HTTP/1.")) || line[8] != ' ' ||
		string(line[9:12]) != want.status || line[12] != ' ' && line[12] != '\r' {
		return fmt.Errorf("unexpected status line %q", line)
	}
	length := -1
	for {
		line, err = br.ReadSlice('\n')
		if err != nil {
			return fmt.Errorf("read header: %w", err)
		}
		line = bytes.TrimRight(line, "\r\n")
		if len(line) == 0 {
			break
		}
		colon := bytes.IndexByte(line, ':')
		if colon <= 0 {
			return fmt.Errorf("malformed header line %q", line)
		}
		name, value := line[:colon], bytes.TrimSpace(line[colon+1:])
		switch {
		case bytes.EqualFold(name, hdrContentLength):
			n, ok := parseLength(value)
			if !ok || length >= 0 && n != length {
				return fmt.Errorf("bad Content-Length %q", value)
			}
			length = n
		case bytes.EqualFold(name, hdrTransferEncoding):
			return fmt.Errorf("unexpected Transfer-Encoding %q", value)
		case bytes.EqualFold(name, hdrConnection) && bytes.EqualFold(value, valClose):
			return errors.New("the server closes the connection")
		}
	}
	if length < 0 {
		return errors.New("response without Content-Length")
	}
	if length > len(scratch) {
		return fmt.Errorf("response body of %d bytes, want %d", length, len(want.body))
	}
	if _, err := io.ReadFull(br, scratch[:length]); err != nil {
		return fmt.Errorf("read body: %w", err)
	}
	if !bytes.Equal(scratch[:length], want.body) {
		return fmt.Errorf("unexpected body %q", scratch[:length])
	}
	return nil
}

// parseLength parses a Content-Length value: decimal digits only.
func parseLength(b []byte) (int, bool) {
	if len(b) == 0 || len(b) > 9 {
		return 0, false
	}
	n := 0
	for _, d := range b {
		if d < '0' || d > '9' {
			return 0, false
		}
		n = n*10 + int(d-'0')
	}
	return n, true
}

// envInt returns the positive integer in the environment variable name,
// or def when it is unset.
func envInt(name string, def int) (int, error) {
	s := os.Getenv(name)
	if s == "" {
		return def, nil
	}
	n, err := strconv.Atoi(s)
	if err != nil || n <= 0 {
		return 0, fmt.Errorf("%s=%q: want a positive integer", name, s)
	}
	return n, nil
}

// closeAbortive closes a client connection with a reset instead of a FIN,
// so that it leaves no TIME_WAIT entry to hold a local port.
func closeAbortive(nc net.Conn) {
	if tc, ok := nc.(*net.TCPConn); ok {
		_ = tc.SetLinger(0)
	}
	_ = nc.Close()
}

// loadDeadline bounds one benchmark run's connections: a server that stops
// answering fails the run instead of hanging it.
const loadDeadline = 3 * time.Minute
