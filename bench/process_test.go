//go:build linux

package bench

import (
	"context"
	"io"
	"net/http"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestStartProcessServesEachTarget(t *testing.T) {
	for _, tgt := range Targets() {
		t.Run(tgt.Name, func(t *testing.T) {
			p, err := StartProcess(context.Background(), nil, tgt.Name, HandlerSpec{CPU: 100 * time.Microsecond, DB: time.Millisecond})
			require.NoError(t, err)
			tr := &http.Transport{}
			defer tr.CloseIdleConnections()
			resp, err := (&http.Client{Transport: tr, Timeout: 10 * time.Second}).Get(p.URL + "/forecast?city=Lisbon")
			require.NoError(t, err)
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			assert.Equal(t, http.StatusOK, resp.StatusCode)
			assert.Contains(t, string(b), `"city":"Lisbon"`)
			assert.NoError(t, p.Stop())
		})
	}
}

func TestStartProcessErrors(t *testing.T) {
	_, err := StartProcess(context.Background(), nil, "nope", HandlerSpec{})
	assert.ErrorContains(t, err, `unknown target "nope"`)

	// A child that exits without serving is reported with its stderr.
	_, err = StartProcess(context.Background(), func() (*exec.Cmd, error) {
		return exec.Command("sh", "-c", "echo broken >&2; exit 3"), nil
	}, "nethttp", HandlerSpec{})
	require.Error(t, err)
	assert.Contains(t, err.Error(), "did not report its address")
	assert.Contains(t, err.Error(), "broken")

	// A bad spec makes the child fail.
	err = serveChild(context.Background(), "{", strings.NewReader(""), io.Discard, nil)
	assert.ErrorContains(t, err, "bad "+ChildEnv)
	err = serveChild(context.Background(), `{"target":"nope"}`, strings.NewReader(""), io.Discard, nil)
	assert.ErrorContains(t, err, `unknown target "nope"`)
}

func TestServeChildStopsAtEndOfInput(t *testing.T) {
	var out strings.Builder
	err := serveChild(context.Background(), `{"target":"nethttp"}`, strings.NewReader(""), &out, nil)
	assert.NoError(t, err)
	assert.True(t, strings.HasPrefix(out.String(), "listening http://127.0.0.1:"), out.String())
}
