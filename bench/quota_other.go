//go:build !linux

package bench

import (
	"errors"
	"fmt"
	"os/exec"
	"runtime"

	"github.com/sluice-go/sluice/internal/cgroup"
)

// quotaGroup stands in for the cgroup of a Quota, which needs Linux.
type quotaGroup struct{ quota Quota }

// newQuotaGroup fails: CPU quotas are Linux cgroups.
func newQuotaGroup(Quota) (*quotaGroup, error) {
	return nil, fmt.Errorf("bench: a CPU quota needs Linux cgroups, not %s (%w)", runtime.GOOS, errors.ErrUnsupported)
}

func (*quotaGroup) wrap(*exec.Cmd) error { return errors.ErrUnsupported }
func (*quotaGroup) throttling() (cgroup.Throttling, error) {
	return cgroup.Throttling{}, errors.ErrUnsupported
}
func (*quotaGroup) remove() error { return nil }

// CheckQuotas fails: CPU quotas are Linux cgroups.
func CheckQuotas() error {
	_, err := newQuotaGroup(Quota{})
	return err
}
