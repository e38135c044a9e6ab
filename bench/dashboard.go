package bench

import (
	"errors"
	"fmt"
	"net"
	"net/http"
	"os/exec"
	"time"

	"github.com/sluice-go/sluice"
	"github.com/sluice-go/sluice/dashboard"
)

// DashboardEnv is the environment variable that makes a sluice target's
// child process serve the live dashboard (package dashboard) on the
// address it holds, at DashboardPath, while the target runs.
const DashboardEnv = "SLUICE_BENCH_DASHBOARD"

// DashboardPath is where a target's child serves the dashboard.
const DashboardPath = "/debug/sluice/"

// DashboardLauncher returns a launcher that starts the children as launch
// does (nil: this executable), with DashboardEnv set to addr: each sluice
// target then serves its dashboard there while it runs, one target after
// the other (the suite runs one child at a time, but for the cluster
// scenario, whose three backends could not share the address).
func DashboardLauncher(launch Launcher, addr string) Launcher {
	if launch == nil {
		launch = selfLauncher
	}
	return func() (*exec.Cmd, error) {
		cmd, err := launch()
		if err != nil {
			return nil, err
		}
		cmd.Env = append(cmd.Env, DashboardEnv+"="+addr)
		return cmd, nil
	}
}

// serveDashboard serves srv's dashboard on addr, read-only, and returns
// the function that stops it. The address may still be held for a moment
// by the previous target's child, which is stopping: the listen is retried
// for up to a second.
func serveDashboard(addr string, srv *sluice.Server) (stop func() error, err error) {
	d, err := dashboard.New(dashboard.Config{Server: srv, Title: "sluice (benchmark target)"})
	if err != nil {
		return nil, err
	}
	var l net.Listener
	for deadline := time.Now().Add(time.Second); ; time.Sleep(50 * time.Millisecond) {
		if l, err = net.Listen("tcp", addr); err == nil || time.Now().After(deadline) {
			break
		}
	}
	if err != nil {
		d.Close()
		return nil, fmt.Errorf("dashboard: %w", err)
	}
	mux := http.NewServeMux()
	mux.Handle(DashboardPath, d)
	hs := &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second}
	done := make(chan error, 1)
	go func() { done <- hs.Serve(l) }()
	return func() error {
		err := hs.Close() // the page polls again, and waits for the next target
		if serr := <-done; !errors.Is(serr, http.ErrServerClosed) {
			err = errors.Join(err, serr)
		}
		d.Close()
		return err
	}, nil
}
