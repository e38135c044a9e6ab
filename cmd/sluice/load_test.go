package main

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sluice-go/sluice/reject"
)

func TestLoadRefusesBadFlags(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{nil, "-url is required"},
		{[]string{"-url", "http://127.0.0.1:1/"}, "exactly one of -rate"},
		{[]string{"-url", "http://127.0.0.1:1/", "-rate", "10", "-closed", "2"}, "exactly one of -rate"},
		{[]string{"-url", "http://127.0.0.1:1/", "-rate", "NaN"}, "-rate must be in"},
		{[]string{"-url", "http://127.0.0.1:1/", "-rate", "-5"}, "-rate must be in"},
		{[]string{"-url", "http://127.0.0.1:1/", "-closed", "100000"}, "-closed must be in"},
		{[]string{"-url", "http://127.0.0.1:1/", "-rate", "10", "-duration", "0s"}, "-duration must be in"},
		{[]string{"-url", "http://127.0.0.1:1/", "-rate", "10", "-every", "1ms"}, "-every must be in"},
		{[]string{"-url", "http://example.com/", "-rate", "10", "-duration", "100ms", "-every", "100ms"}, "not a loopback address"},
	} {
		var out, errOut bytes.Buffer
		err := run(context.Background(), append([]string{"load"}, tc.args...), &out, &errOut)
		require.Error(t, err, "%v", tc.args)
		assert.Contains(t, err.Error(), tc.want, "%v", tc.args)
	}
}

// A service that refuses every third request (as sluice refuses, with
// Sluice-Not-Started) and serves the others: the open loop's lines and
// totals say so, and so does the closed loop's summary.
func TestLoadCountsWhatIsAnsweredInTime(t *testing.T) {
	var n atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if n.Add(1)%3 == 0 {
			w.Header().Set(reject.NotStartedHeader, "1")
			w.WriteHeader(http.StatusServiceUnavailable)
			return
		}
		io.WriteString(w, "ok")
	}))
	defer srv.Close()

	var out, errOut bytes.Buffer
	err := run(context.Background(), []string{"load", "-url", srv.URL, "-rate", "300", "-duration", "600ms", "-every", "200ms"}, &out, &errOut)
	require.NoError(t, err, errOut.String())
	s := out.String()
	t.Log(s)
	lines := regexp.MustCompile(`(?m)^ *(0\.2|0\.4|0\.6)s +\d+ +\d+ +\d+ +\d+ *$`).FindAllString(s, -1)
	assert.Len(t, lines, 3, "a line per 200 ms")
	m := regexp.MustCompile(`(\d+) sent, (\d+) in time \(\d+/s\), (\d+) refused \(([\d.]+)%\), (\d+) failed`).FindStringSubmatch(s)
	require.NotNil(t, m, s)
	sent, ok, refused, failed := atoi(m[1]), atoi(m[2]), atoi(m[3]), atoi(m[5])
	assert.Equal(t, sent, ok+refused+failed)
	assert.InDelta(t, float64(sent)/3, float64(refused), 2, "every third refused")
	assert.Contains(t, s, "latency of the answers in time (ms): p50")

	out.Reset()
	err = run(context.Background(), []string{"load", "-url", srv.URL, "-closed", "4", "-duration", "300ms"}, &out, &errOut)
	require.NoError(t, err, errOut.String())
	s = out.String()
	assert.True(t, strings.HasPrefix(s, "closed loop of 4 connections"), s)
	m = regexp.MustCompile(`(\d+) answers, (\d+) in time \(\d+/s\), (\d+) refused`).FindStringSubmatch(s)
	require.NotNil(t, m, s)
	assert.Positive(t, atoi(m[2]))
	assert.Positive(t, atoi(m[3]))
}

func atoi(s string) int {
	n, _ := strconv.Atoi(s)
	return n
}
