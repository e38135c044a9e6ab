//go:build linux

package hello

import (
	"fmt"
	"net"
	"net/http"
	"testing"
	"time"

	"github.com/sluice-go/sluice/admit"
	"github.com/sluice-go/sluice/gate"
	"github.com/sluice-go/sluice/httpgate"
	"github.com/sluice-go/sluice/internal/gatetest"
)

// BenchmarkIOSlowdownNetHTTP is BenchmarkIOSlowdown's case for plain
// net/http with the GoSched gate (httpgate; running + runnable
// goroutines from runtime/metrics against 0.5, 1 and 2 x GOMAXPROCS), the
// nearest thing
// to the executor's busy-worker gate that net/http can have: the same
// handler (with a plain client: net/http's goroutines may block), the same
// paced load and latencies, so that its rejections compare with the busy
// gate's.
func BenchmarkIOSlowdownNetHTTP(b *testing.B) {
	rate, err := envInt(envSlowRate, slowRate)
	if err != nil {
		b.Fatal(err)
	}
	for _, f := range []float64{0.5, 1, 2} {
		for _, l := range []struct {
			name string
			d    time.Duration
		}{{"normal", slowNormal}, {"slow", slowSlow}} {
			b.Run(fmt.Sprintf("gosched-%g/%s", f, l.name), func(b *testing.B) { runSlowdownNetHTTP(b, rate, l.d, f) })
		}
	}
}

func runSlowdownNetHTTP(b *testing.B, rate int, d time.Duration, fraction float64) {
	down, stopDown, err := startDelayed(d)
	if err != nil {
		b.Fatal(err)
	}
	defer stopDown()
	downTr := &http.Transport{MaxIdleConnsPerHost: 1024}
	defer downTr.CloseIdleConnections()
	adm, err := httpgate.New(admit.Config{Gates: []admit.Policy{gatetest.GoSched(b, gate.GoSchedConfig{Fraction: fraction})}})
	if err != nil {
		b.Fatal(err)
	}
	defer adm.Close()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	hs := &http.Server{Handler: adm.Wrap(slowdownHandler(down, &http.Client{Transport: downTr}))}
	go hs.Serve(ln)
	defer hs.Close()

	tr := &http.Transport{MaxIdleConnsPerHost: 1024}
	defer tr.CloseIdleConnections()
	client := &http.Client{Transport: tr, Timeout: slowTimeout}
	url := "http://" + ln.Addr().String() + "/"
	warm := int(float64(rate) * slowWarmUp.Seconds())
	if _, err := pacedLoad(client, url, rate, warm, nil); err != nil {
		b.Fatalf("warm-up: %v", err)
	}
	st0 := adm.Stats()
	b.ResetTimer()
	res, err := pacedLoad(client, url, rate, b.N, nil)
	b.StopTimer()
	if err != nil {
		b.Fatal(err)
	}
	if got := adm.Stats().Rejected - st0.Rejected; got != int64(res.rejected) {
		b.Errorf("the middleware counted %d rejections, the client %d", got, res.rejected)
	}
	res.report(b)
}
