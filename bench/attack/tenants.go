package attack

import (
	"context"
	"fmt"
	"net"
	"strings"
	"sync/atomic"
)

// tenantNames: requests whose X-Tenant name is not valid UTF-8
// (\xff\xfe), or one of 130 names of 64 KB: the first, a Prometheus label
// as it was, once failed every scrape, and the long ones swelled each to
// 50 MB. The probes scrape /metrics.
func tenantNames() Attack {
	long := strings.Repeat("t", 64<<10)
	return Attack{
		Name:      "tenant-names",
		About:     "4 connections sending requests of the tenant \\xff\\xfe (invalid UTF-8) and of 130 tenants named by 64 KB each; the probes scrape /metrics",
		ProbePath: "/metrics",
		Run: func(ctx context.Context, env Env) error {
			var n atomic.Int64
			return flood(ctx, env, 4, func(ctx context.Context, nc net.Conn) error {
				for range 100 {
					i := n.Add(1)
					name := "\xff\xfe"
					if i%2 == 0 {
						name = fmt.Sprintf("%s%d", long, i%130)
					}
					if _, err := fmt.Fprintf(nc, "GET / HTTP/1.1\r\nHost: attack\r\nX-Tenant: %s\r\n\r\n", name); err != nil {
						return nil
					}
					if resp, _ := readAnswer(nc, ProbeTimeout); resp == nil || ctx.Err() != nil {
						return nil
					}
				}
				return nil
			})
		},
	}
}
