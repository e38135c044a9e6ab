package server

import (
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestHelloThroughNetHTTPClient(t *testing.T) {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /hello/{name}", func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprintf(w, "hello, %s", r.PathValue("name"))
	})
	mux.HandleFunc("POST /echo", func(w http.ResponseWriter, r *http.Request) {
		b, err := io.ReadAll(r.Body)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		w.Header().Set("X-Len", fmt.Sprint(len(b)))
		w.Write(b)
	})
	_, addr := serveHTTP(t, mux, Config{})
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 4}}
	defer client.CloseIdleConnections()
	for i := range 20 {
		resp, err := client.Get("http://" + addr + fmt.Sprintf("/hello/n%d", i))
		require.NoError(t, err)
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		assert.Equal(t, 200, resp.StatusCode)
		assert.Equal(t, fmt.Sprintf("hello, n%d", i), string(b))
		assert.Equal(t, "text/plain; charset=utf-8", resp.Header.Get("Content-Type"))
	}
	big := strings.Repeat("0123456789", 100_000)
	resp, err := client.Post("http://"+addr+"/echo", "text/plain", strings.NewReader(big))
	require.NoError(t, err)
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	assert.Equal(t, 200, resp.StatusCode)
	assert.Equal(t, fmt.Sprint(len(big)), resp.Header.Get("X-Len"))
	assert.Equal(t, big, string(b))
	resp, err = client.Get("http://" + addr + "/nope")
	require.NoError(t, err)
	resp.Body.Close()
	assert.Equal(t, 404, resp.StatusCode)
}
