package main

import (
	"net"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestCheckDashboard(t *testing.T) {
	require.NoError(t, checkDashboard("127.0.0.1:0", []string{"sweep"}))
	assert.ErrorContains(t, checkDashboard("8090", nil), "want an address")
	assert.ErrorContains(t, checkDashboard("127.0.0.1:0", []string{"cluster"}), "three at once")
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	defer l.Close()
	assert.ErrorContains(t, checkDashboard(l.Addr().String(), nil), "-dashboard")

	assert.Equal(t, "http://localhost:8090/debug/sluice/", dashboardURL(":8090"))
	assert.Equal(t, "http://localhost:8090/debug/sluice/", dashboardURL("0.0.0.0:8090"))
	assert.Equal(t, "http://127.0.0.1:8090/debug/sluice/", dashboardURL("127.0.0.1:8090"))
	assert.Equal(t, "http://[::1]:8090/debug/sluice/", dashboardURL("[::1]:8090"))
}
