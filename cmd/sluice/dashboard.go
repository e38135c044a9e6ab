package main

import (
	"fmt"
	"net"
	"slices"

	"github.com/sluice-go/sluice/bench"
	"github.com/sluice-go/sluice/bench/scenario"
)

// checkDashboard checks the address of -dashboard: one to listen on, free
// now, and a suite that runs one sluice target at a time (the cluster
// scenario's three backends could not share it).
func checkDashboard(addr string, scenarios []string) error {
	if _, _, err := net.SplitHostPort(addr); err != nil {
		return fmt.Errorf("-dashboard %q: want an address to listen on, such as localhost:8090: %w", addr, err)
	}
	if cluster := (&scenario.Cluster{}).Name(); slices.Contains(scenarios, cluster) {
		return fmt.Errorf("-dashboard serves one target at a time, and the %s scenario runs three at once: drop one", cluster)
	}
	l, err := net.Listen("tcp", addr)
	if err != nil {
		return fmt.Errorf("-dashboard: %w", err)
	}
	return l.Close()
}

// dashboardURL is where the dashboard served on addr is seen.
func dashboardURL(addr string) string {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return addr
	}
	if ip := net.ParseIP(host); host == "" || ip != nil && ip.IsUnspecified() {
		host = "localhost"
	}
	return "http://" + net.JoinHostPort(host, port) + bench.DashboardPath
}
