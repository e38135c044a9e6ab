package bench

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestChildInQuota starts a sluice target in a CPU quota of a fifth of a
// CPU, and checks that it runs in the quota from its start (its cgroup's
// files, its one worker), that its throttling is read as it ends, and that
// its cgroup goes with it.
func TestChildInQuota(t *testing.T) {
	q := Quota{CPUs: 0.2, Period: 10 * time.Millisecond}
	if err := CheckQuotas(); err != nil {
		t.Skipf("this machine does not let the test make a CPU quota: %v", err)
	}

	p, err := startChild(context.Background(), nil, ChildSpec{Target: "sluice", Handler: HandlerSpec{CPU: 2 * time.Millisecond}, Quota: &q}, nil)
	require.NoError(t, err)
	dir := p.quota.dir
	stopped := false
	defer func() {
		if !stopped {
			_ = p.Stop()
		}
	}()
	read := func(name string) string {
		b, err := os.ReadFile(filepath.Join(dir, name))
		require.NoError(t, err)
		return strings.TrimSpace(string(b))
	}
	if _, err := os.Stat(filepath.Join(dir, "cpu.cfs_quota_us")); err == nil {
		assert.Equal(t, "2000", read("cpu.cfs_quota_us"))
		assert.Equal(t, "10000", read("cpu.cfs_period_us"))
	} else {
		assert.Equal(t, "2000 10000", read("cpu.max"))
	}
	assert.Contains(t, strings.Fields(read("cgroup.procs")), strconv.Itoa(p.pid()), "the child itself runs in the quota's cgroup")

	// Requests that need more CPU than the quota gives.
	tr := &http.Transport{}
	defer tr.CloseIdleConnections()
	c := &http.Client{Transport: tr, Timeout: 10 * time.Second}
	var wg sync.WaitGroup
	for range 4 {
		wg.Go(func() {
			for range 10 {
				resp, err := c.Get(p.URL + WeatherPath)
				if !assert.NoError(t, err) {
					return
				}
				_, _ = io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
			}
		})
	}
	wg.Wait()
	stopped = true
	require.NoError(t, p.Stop())
	require.NotNil(t, p.Placement)
	assert.Equal(t, 1, p.Placement.Workers, "a fifth of a CPU makes one worker")
	require.NotNil(t, p.Throttled, "the quota's counters are read as the child ends")
	assert.Equal(t, q, p.Throttled.Quota)
	t.Logf("throttled in %d periods, %v", p.Throttled.Periods, p.Throttled.Time)
	_, err = os.Stat(dir)
	assert.ErrorIs(t, err, os.ErrNotExist, fmt.Sprintf("the quota's cgroup %s is removed", dir))
}
