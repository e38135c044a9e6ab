package bench

import (
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"
)

// DefaultQuotaPeriod is the period of a Quota that names none: the
// kernel's default CFS period, and Kubernetes'.
const DefaultQuotaPeriod = 100 * time.Millisecond

// Quota is a CPU quota for a target process, as a container's CPU limit
// sets one (a Kubernetes limits.cpu is a CFS quota): the process may use
// CPUs CPU-periods of CPU time in each Period, and is throttled for the
// rest of the period once it has. A target in a quota runs in a cgroup of
// its own (cgroup v1 cpu.cfs_quota_us, or v2 cpu.max), entered before its
// first instruction, so that its Go runtime sizes GOMAXPROCS, and sluice
// its workers, from the quota.
type Quota struct {
	// CPUs is the CPU time allowed per period, in CPUs: 0.5 is a
	// Kubernetes limit of 500m.
	CPUs float64 `json:"cpus"`
	// Period is the quota's period; zero means DefaultQuotaPeriod. The
	// kernel takes 1 ms to 1 s.
	Period time.Duration `json:"period,omitempty"`
}

// Check reports a quota the kernel would refuse, naming the field.
func (q Quota) Check() error {
	if math.IsNaN(q.CPUs) || math.IsInf(q.CPUs, 0) || q.CPUs <= 0 {
		return fmt.Errorf("bench: quota CPUs must be a positive number of CPUs (0.5 for 500m), got %v", q.CPUs)
	}
	p := q.period()
	if p < time.Millisecond || p > time.Second {
		return fmt.Errorf("bench: quota Period must be within 1ms and 1s, got %v", q.Period)
	}
	if q.runtime() < time.Millisecond {
		return fmt.Errorf("bench: quota %v allows under 1ms of CPU a period, which the kernel refuses: raise CPUs or Period", q)
	}
	return nil
}

// period is the quota's period, its default filled in.
func (q Quota) period() time.Duration {
	if q.Period == 0 {
		return DefaultQuotaPeriod
	}
	return q.Period
}

// runtime is the CPU time the quota allows a period.
func (q Quota) runtime() time.Duration {
	return time.Duration(math.Round(q.CPUs * float64(q.period())))
}

// String writes the quota as ParseQuota reads it: "0.5/100ms".
func (q Quota) String() string {
	return strconv.FormatFloat(q.CPUs, 'g', -1, 64) + "/" + q.period().String()
}

// ParseQuota reads a quota as the command's -quota flag takes it: CPUs,
// optionally followed by a slash and the period ("0.5", "1.5/10ms").
func ParseQuota(s string) (Quota, error) {
	cpus, period, hasPeriod := strings.Cut(strings.TrimSpace(s), "/")
	var q Quota
	var err error
	if q.CPUs, err = strconv.ParseFloat(strings.TrimSpace(cpus), 64); err != nil {
		return Quota{}, fmt.Errorf("bench: quota %q: the CPUs must be a number, as 0.5 or 1.5", s)
	}
	if hasPeriod {
		if q.Period, err = time.ParseDuration(strings.TrimSpace(period)); err != nil {
			return Quota{}, fmt.Errorf("bench: quota %q: the period must be a duration, as 100ms", s)
		}
		if q.Period == 0 {
			return Quota{}, errors.New("bench: quota " + strconv.Quote(s) + ": a zero period")
		}
	}
	if err := q.Check(); err != nil {
		return Quota{}, err
	}
	return q, nil
}

// ParseQuotas reads a comma-separated list of quotas (ParseQuota's form).
func ParseQuotas(s string) ([]Quota, error) {
	var qs []Quota
	for f := range strings.SplitSeq(s, ",") {
		q, err := ParseQuota(f)
		if err != nil {
			return nil, err
		}
		qs = append(qs, q)
	}
	return qs, nil
}
