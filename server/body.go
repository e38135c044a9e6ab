package server

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net/http"
	"strings"

	"github.com/sluice-go/sluice/lanes"
	"github.com/sluice-go/sluice/sched"
)

// States of a chunked body.
const (
	chunkSize    uint8 = iota // before a chunk-size line
	chunkData                 // in a chunk's data
	chunkCRLF                 // after a chunk's data, before its CRLF
	chunkTrailer              // after the last chunk, in the trailer section
)

// maxChunkLine bounds a chunk-size line with its extensions, and each
// trailer line.
const maxChunkLine = 4096

// maxTrailer bounds the whole trailer section, which is read and dropped.
const maxTrailer = 64 << 10

// maxChunkOverhead bounds the framing bytes of a chunked body (size lines,
// extensions, CRLFs) beyond an allowance of 16 bytes and twice the data per
// chunk, as net/http does: tiny chunks with long extensions must not make
// the server read without end for little data.
const maxChunkOverhead = 16 << 10

var (
	errChunkLine     = errors.New("server: malformed chunked encoding")
	errChunkTooLarge = errors.New("server: chunk length too large")
	errTrailer       = errors.New("server: trailer section too large")
	errChunkOverhead = errors.New("server: chunked encoding contains too much non-data")
)

// body reads a request body from its connection's buffer and socket. It is
// the handler's: its Read may be called from the handler's coroutine (waits
// release the worker) or from any one goroutine the handler hands it to
// (waits block that goroutine); the worker leaves the socket's input to it
// until the body ends.
type body struct {
	c   *conn
	r   *Request
	ctx context.Context

	remaining int64 // Content-Length bytes left, or bytes left in the current chunk
	chunked   bool
	state     uint8
	trailer   int
	excess    int64 // framing overhead beyond its allowance, see maxChunkOverhead
	limit     int64 // most bytes of a chunked body; <= 0: none
	total     int64

	done   bool
	err    error // sticky: the body is unusable
	closed bool

	continueWanted bool // Expect: 100-continue on a request with a body
	continueSent   bool
}

// Read reads the body. It returns io.EOF at its end, io.ErrUnexpectedEOF if
// the client closes the connection first, *http.MaxBytesError beyond the
// server's body limit, and an error for malformed chunked encoding.
func (b *body) Read(p []byte) (int, error) {
	defer b.c.leave(b.c.enter())
	if b.closed {
		return 0, http.ErrBodyReadAfterClose
	}
	return b.read(p)
}

// Close makes later reads fail. What is left of the body is read and
// discarded by the server after the handler, up to a limit.
func (b *body) Close() error {
	defer b.c.leave(b.c.enter())
	b.closed = true
	return nil
}

func (b *body) failed() bool { return b.err != nil && b.err != io.EOF }

// leftover reads what the handler left of the body, for the server to
// discard after the handler: also when the handler closed the body, which
// only ends the handler's reads.
type leftover struct{ b *body }

func (l leftover) Read(p []byte) (int, error) {
	defer l.b.c.leave(l.b.c.enter())
	return l.b.read(p)
}

func (b *body) read(p []byte) (int, error) {
	if b.err != nil {
		return 0, b.err
	}
	if b.done {
		return 0, io.EOF
	}
	if len(p) == 0 {
		return 0, nil
	}
	n, err := b.readFraming(p)
	if err != nil {
		b.err = err
		if err != io.EOF {
			b.c.closeAfter.Store(true)
		}
	}
	if b.done {
		b.ended()
	}
	return n, err
}

func (b *body) readFraming(p []byte) (int, error) {
	if !b.chunked {
		n, err := b.readData(p)
		if b.remaining == 0 {
			b.done = true
		}
		return n, err
	}
	for {
		switch b.state {
		case chunkSize:
			line, err := b.line(true)
			if err != nil {
				return 0, err
			}
			size, err := parseChunkSize(line)
			if err != nil {
				return 0, err
			}
			b.excess += int64(len(line)) + 2 // and the CRLF after the data
			if size >= maxChunkOverhead {
				b.excess = 0 // without computing 2*size, which may overflow
			} else {
				b.excess = max(b.excess-16-2*size, 0)
			}
			if b.excess > maxChunkOverhead {
				return 0, errChunkOverhead
			}
			// Not total+size > limit: the sum of a huge size and what came
			// before can overflow and pass.
			if b.limit > 0 && size > b.limit-b.total {
				return 0, &http.MaxBytesError{Limit: b.limit}
			}
			b.total += size
			if size == 0 {
				b.state = chunkTrailer
				continue
			}
			b.remaining, b.state = size, chunkData
		case chunkData:
			n, err := b.readData(p)
			if b.remaining == 0 {
				b.state = chunkCRLF
			}
			return n, err
		case chunkCRLF:
			line, err := b.line(true)
			if err != nil {
				return 0, err
			}
			if len(line) != 0 {
				return 0, errChunkLine
			}
			b.state = chunkSize
		case chunkTrailer:
			line, err := b.line(false)
			if err != nil {
				return 0, err
			}
			if len(line) == 0 {
				b.done = true
				return 0, io.EOF
			}
			if !validTrailerLine(line, b.trailer == 0) {
				return 0, errChunkLine
			}
			if b.trailer += len(line); b.trailer > maxTrailer {
				return 0, errTrailer
			}
		}
	}
}

// readData reads up to b.remaining bytes: from the buffer if it has any,
// else straight from the socket into p.
func (b *body) readData(p []byte) (int, error) {
	c := b.c
	if int64(len(p)) > b.remaining {
		p = p[:b.remaining]
	}
	var n int
	if c.r < c.n {
		n = copy(p, c.buf[c.r:c.n])
		c.r += n
	} else {
		if err := b.sendContinue(); err != nil {
			return 0, err
		}
		var err error
		if n, err = c.readSome(b.ctx, p); err != nil {
			return 0, err
		}
	}
	b.remaining -= int64(n)
	return n, nil
}

// line returns the next line of the chunked framing, without its line end,
// reading more as needed. Chunk lines must end in CRLF and hold no other CR
// (strict, as net/http since Go 1.24.2: a bare LF or CR there is a
// smuggling vector); trailer lines may end in a bare LF.
func (b *body) line(strict bool) ([]byte, error) {
	c := b.c
	for {
		data := c.buf[c.r:c.n]
		if i := bytes.IndexByte(data, '\n'); i >= 0 {
			line := data[:i]
			if len(line) > 0 && line[len(line)-1] == '\r' {
				line = line[:len(line)-1]
			} else if strict {
				return nil, errChunkLine
			}
			if strict && bytes.IndexByte(line, '\r') >= 0 {
				return nil, errChunkLine
			}
			c.r += i + 1
			return line, nil
		}
		if len(data) >= maxChunkLine {
			return nil, errChunkLine
		}
		if err := b.fill(); err != nil {
			return nil, err
		}
	}
}

// fill reads more bytes into the connection's buffer.
func (b *body) fill() error {
	c := b.c
	if c.buf == nil {
		c.buf = c.ws.getBuf()
	}
	if !c.makeRoom(len(c.buf)) {
		return errChunkLine
	}
	if err := b.sendContinue(); err != nil {
		return err
	}
	n, err := c.readSome(b.ctx, c.buf[c.n:])
	c.n += n
	return err
}

// sendContinue answers Expect: 100-continue before the first read that
// needs the client's body, unless the response has begun.
func (b *body) sendContinue() error {
	if !b.continueWanted || b.continueSent || b.c.respStarted {
		return nil
	}
	b.continueSent = true
	return b.c.send(b.ctx, []byte("HTTP/1.1 100 Continue\r\n\r\n"))
}

// ended is called once the body has been read to its end: from then on the
// worker reads the socket again, to see the client leave (and keep
// pipelined requests), when that can be arranged from here.
func (b *body) ended() {
	if sched.InCoroutine(b.ctx) && b.c.state == connActive && !b.c.peerGone {
		_ = b.c.nc.OnReadable(lanes.Continuation, b.c.onData)
	}
}

// validTrailerLine reports whether line is a field line of a trailer
// section, or after the first line an obs-fold continuation, with a token
// for name and no control bytes: trailers are dropped, but a malformed one
// means the framing is not what the client thinks (net/http refuses them
// too).
func validTrailerLine(line []byte, first bool) bool {
	s := bytesToString(line)
	if s[0] == ' ' || s[0] == '\t' {
		return !first && validValue(s)
	}
	name, value, ok := strings.Cut(s, ":")
	return ok && validToken(name) && validValue(value)
}

// parseChunkSize parses a chunk-size line: hexadecimal digits (at most 16),
// optionally followed by blanks and ";" extensions, which are ignored.
func parseChunkSize(line []byte) (int64, error) {
	if i := bytes.IndexByte(line, ';'); i >= 0 {
		line = line[:i]
	}
	for len(line) > 0 && (line[len(line)-1] == ' ' || line[len(line)-1] == '\t') {
		line = line[:len(line)-1]
	}
	if len(line) == 0 {
		return 0, errChunkLine
	}
	if len(line) > 16 {
		return 0, errChunkTooLarge
	}
	var n uint64
	for _, c := range line {
		var d byte
		switch {
		case '0' <= c && c <= '9':
			d = c - '0'
		case 'a' <= c && c <= 'f':
			d = c - 'a' + 10
		case 'A' <= c && c <= 'F':
			d = c - 'A' + 10
		default:
			return 0, errChunkLine
		}
		n = n<<4 | uint64(d)
	}
	if n > 1<<63-1 {
		return 0, errChunkTooLarge
	}
	return int64(n), nil
}
