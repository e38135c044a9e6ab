// Package wire reads HTTP/1.1 responses with just enough parsing to tell
// how a request ended: the status, the not-started marker that sluice puts
// on its refusals (reject.NotStartedHeader), and where the body ends. The
// load generator's client (package bench/load) and the chaos clients
// (package bench/chaos) share it; neither needs net/http's full parser,
// and the generator cannot afford its CPU time.
package wire

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"

	"github.com/sluice-go/sluice/internal/ascii"
	"github.com/sluice-go/sluice/reject"
)

// Response is what a request came back with.
type Response struct {
	// Status is the final response's status code.
	Status int
	// NotStarted reports that the response carried the not-started
	// marker (reject.NotStartedHeader: 1): the server refused the request
	// before its handler ran.
	NotStarted bool
}

// ReadResponse reads the answer to one request from br: its status,
// whether it carries the not-started marker, and its body (discarded; none
// for a HEAD request). Interim 1xx responses before it are skipped. keep is
// false when the connection must close after it.
func ReadResponse(br *bufio.Reader, head bool) (res Response, keep bool, err error) {
	for {
		res, keep, err = readOne(br, head)
		if err != nil || res.Status/100 != 1 || res.Status == http.StatusSwitchingProtocols {
			return res, keep, err
		}
	}
}

// readOne reads one response, final or interim.
func readOne(br *bufio.Reader, head bool) (res Response, keep bool, err error) {
	line, err := readLine(br)
	if err != nil {
		return res, false, err
	}
	// "HTTP/1.1 200 OK"
	if len(line) < 12 || !bytes.HasPrefix(line, []byte("HTTP/1.")) || line[8] != ' ' {
		return res, false, fmt.Errorf("bad status line %q", line)
	}
	res.Status, err = strconv.Atoi(string(line[9:12]))
	if err != nil {
		return res, false, fmt.Errorf("bad status line %q", line)
	}
	keep = line[7] == '1'
	length, chunked := int64(-1), false
	for {
		line, err := readLine(br)
		if err != nil {
			return res, false, err
		}
		if len(line) == 0 {
			break
		}
		k, v, ok := bytes.Cut(line, []byte(":"))
		if !ok {
			return res, false, fmt.Errorf("bad header line %q", line)
		}
		v = bytes.TrimSpace(v)
		switch {
		case ascii.EqualFold(string(k), "Content-Length"):
			n, err := strconv.ParseInt(string(v), 10, 64)
			if err != nil || n < 0 {
				return res, false, fmt.Errorf("bad Content-Length %q", v)
			}
			length = n
		case ascii.EqualFold(string(k), "Transfer-Encoding"):
			chunked = ascii.EqualFold(string(v), "chunked")
		case ascii.EqualFold(string(k), "Connection"):
			if ascii.EqualFold(string(v), "close") {
				keep = false
			}
		case ascii.EqualFold(string(k), reject.NotStartedHeader):
			res.NotStarted = string(v) == "1"
		}
	}
	noBody := head || res.Status == http.StatusNoContent || res.Status == http.StatusNotModified || res.Status/100 == 1
	switch {
	case noBody:
	case chunked:
		err = discardChunked(br)
	case length >= 0:
		_, err = br.Discard(int(length))
	default:
		// Until the server closes.
		_, err = io.Copy(io.Discard, br)
		keep = false
	}
	if err != nil {
		return res, false, err
	}
	return res, keep, nil
}

// readLine reads a CRLF- (or LF-) terminated line without its terminator;
// lines longer than the reader's buffer are an error.
func readLine(br *bufio.Reader) ([]byte, error) {
	line, err := br.ReadSlice('\n')
	if err != nil {
		if err == io.EOF && len(line) > 0 {
			err = io.ErrUnexpectedEOF
		}
		return nil, err
	}
	line = line[:len(line)-1]
	if n := len(line); n > 0 && line[n-1] == '\r' {
		line = line[:n-1]
	}
	return line, nil
}

func discardChunked(br *bufio.Reader) error {
	for {
		line, err := readLine(br)
		if err != nil {
			return err
		}
		if i := bytes.IndexByte(line, ';'); i >= 0 {
			line = line[:i]
		}
		n, err := strconv.ParseInt(string(bytes.TrimSpace(line)), 16, 64)
		if err != nil || n < 0 {
			return fmt.Errorf("bad chunk size %q", line)
		}
		if n == 0 {
			for { // trailer fields, then the empty line
				t, err := readLine(br)
				if err != nil {
					return err
				}
				if len(t) == 0 {
					return nil
				}
			}
		}
		if _, err := br.Discard(int(n)); err != nil {
			return err
		}
		if t, err := readLine(br); err != nil || len(t) != 0 {
			return errors.Join(err, errors.New("chunk not followed by CRLF"))
		}
	}
}
