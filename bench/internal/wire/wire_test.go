package wire

import (
	"bufio"
	"net/http"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestReadResponse(t *testing.T) {
	in := "HTTP/1.1 100 Continue\r\n\r\n" +
		"HTTP/1.1 503 Service Unavailable\r\nSluice-Not-Started: 1\r\nTransfer-Encoding: chunked\r\n\r\n" +
		"4\r\nbusy\r\n0\r\nTrailer: x\r\n\r\n" +
		"HTTP/1.0 200 OK\r\nContent-Length: 2\r\n\r\nok"
	br := bufio.NewReader(strings.NewReader(in))
	res, keep, err := ReadResponse(br, false)
	require.NoError(t, err)
	assert.Equal(t, Response{Status: http.StatusServiceUnavailable, NotStarted: true}, res, "the interim answer is skipped")
	assert.True(t, keep)
	res, keep, err = ReadResponse(br, false)
	require.NoError(t, err)
	assert.Equal(t, Response{Status: http.StatusOK}, res)
	assert.False(t, keep, "HTTP/1.0 closes")
	_, _, err = ReadResponse(bufio.NewReader(strings.NewReader("HTTP/1.1 2x0 OK\r\n\r\n")), false)
	assert.Error(t, err)
}
