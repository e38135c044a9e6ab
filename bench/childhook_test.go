//go:build linux

package bench

import (
	"bufio"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sluice-go/sluice"
)

// testHook is a hook with every part: its handler answers with the
// setting the parent gave it, and it records what the child called.
func testHook(configured, closed *atomic.Int32) ChildHook {
	return ChildHook{Name: "test", Open: func(cs ChildSpec, weather http.Handler) (*ChildPart, error) {
		cfg, err := DecodeHookConfig[struct{ Word string }](cs)
		if err != nil {
			return nil, err
		}
		mux := http.NewServeMux()
		mux.Handle("/", weather)
		mux.HandleFunc("GET /word", func(w http.ResponseWriter, _ *http.Request) { _, _ = io.WriteString(w, cfg.Word) })
		return &ChildPart{
			Handler:   mux,
			Configure: func(*sluice.Config) error { configured.Add(1); return nil },
			Listening: func(*sluice.Server) (string, func() error, error) {
				return "http://127.0.0.1:1/admin", func() error { return nil }, nil
			},
			Stats:  func(*sluice.Server) any { return map[string]int32{"closed": closed.Load()} },
			Close:  func() error { closed.Add(1); return nil },
			Report: func() any { return cfg.Word + " reported" },
		}, nil
	}}
}

// A child whose spec names a hook serves the hook's handler, lets it
// configure and watch a sluice target, closes it after the target's stop
// and before the stats, and sends its report.
func TestServeChildRunsItsHook(t *testing.T) {
	var configured, closed atomic.Int32
	cs := ChildSpec{Target: "sluice"}
	require.NoError(t, cs.SetHook("test", struct{ Word string }{"hello"}))
	spec, err := jsonString(cs)
	require.NoError(t, err)

	in, stop := io.Pipe()
	outR, outW := io.Pipe()
	done := make(chan error, 1)
	go func() {
		done <- serveChild(context.Background(), spec, in, outW, []ChildHook{testHook(&configured, &closed)})
		_ = outW.Close()
	}()
	sc := bufio.NewScanner(outR)
	require.True(t, sc.Scan())
	url, ok := strings.CutPrefix(sc.Text(), "listening ")
	require.True(t, ok, sc.Text())
	lines := make(chan []string, 1)
	go func() {
		var rest []string
		for sc.Scan() {
			rest = append(rest, sc.Text())
		}
		lines <- rest
	}()

	client := &http.Client{Transport: &http.Transport{DisableKeepAlives: true}, Timeout: 5 * time.Second}
	resp, err := client.Get(url + "/word")
	require.NoError(t, err)
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	assert.Equal(t, "hello", string(body), "the hook's handler, with the parent's setting")
	assert.Equal(t, int32(1), configured.Load())

	require.NoError(t, stop.Close())
	require.NoError(t, <-done)
	p := &Process{}
	for _, l := range <-lines {
		p.readLine(l)
	}
	assert.Equal(t, "http://127.0.0.1:1/admin", p.AdminURL())
	assert.JSONEq(t, `{"closed":1}`, string(p.Stats), "closed before the stats are read")
	assert.JSONEq(t, `"hello reported"`, string(p.Report))
	assert.Equal(t, int32(1), closed.Load())
}

func TestServeChildHookErrors(t *testing.T) {
	var configured, closed atomic.Int32
	hooks := []ChildHook{testHook(&configured, &closed)}
	err := serveChild(context.Background(), `{"target":"nethttp","hook":"nope"}`, strings.NewReader(""), io.Discard, hooks)
	assert.ErrorContains(t, err, `unknown child hook "nope"`)
	err = serveChild(context.Background(), `{"target":"nethttp","hook":"test","hook_config":{"Word":3}}`, strings.NewReader(""), io.Discard, hooks)
	assert.ErrorContains(t, err, "child hook test")

	// On another target than sluice, only the handler and the report
	// apply.
	var out strings.Builder
	err = serveChild(context.Background(), `{"target":"nethttp","hook":"test","hook_config":{"Word":"hi"}}`, strings.NewReader(""), &out, hooks)
	require.NoError(t, err)
	assert.Contains(t, out.String(), "\nreport \"hi reported\"\n")
	assert.Zero(t, configured.Load())
	assert.Equal(t, int32(1), closed.Load(), "closed all the same")
}

// jsonString is cs as ChildEnv's value.
func jsonString(cs ChildSpec) (string, error) {
	js, err := json.Marshal(cs)
	return string(js), err
}
