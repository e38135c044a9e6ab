package bench

import (
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"

	srt "github.com/sluice-go/sluice/runtime"
)

// ParseCPUList reads a CPU list as taskset and /proc write them: numbers
// and inclusive ranges separated by commas ("1", "0-3", "0-3,8,10-11"). It
// returns the CPUs ascending, without duplicates; an empty list is an
// error.
func ParseCPUList(s string) ([]int, error) {
	var cpus []int
	for _, part := range strings.Split(s, ",") {
		part = strings.TrimSpace(part)
		lo, hi, isRange := strings.Cut(part, "-")
		a, err := parseCPU(lo)
		if err != nil {
			return nil, fmt.Errorf("bench: CPU list %q: %w", s, err)
		}
		b := a
		if isRange {
			if b, err = parseCPU(hi); err != nil {
				return nil, fmt.Errorf("bench: CPU list %q: %w", s, err)
			}
			if b < a {
				return nil, fmt.Errorf("bench: CPU list %q: range %s ends before it starts", s, part)
			}
		}
		for c := a; c <= b; c++ {
			cpus = append(cpus, c)
		}
	}
	slices.Sort(cpus)
	return slices.Compact(cpus), nil
}

func parseCPU(s string) (int, error) {
	s = strings.TrimSpace(s)
	n, err := strconv.Atoi(s)
	if err != nil || s[0] < '0' || s[0] > '9' || n >= maxCPU {
		return 0, fmt.Errorf("%q is not a CPU number in [0, %d)", s, maxCPU)
	}
	return n, nil
}

// FormatCPUList writes ascending CPUs as a CPU list with ranges ("0-3,8"),
// the form ParseCPUList reads.
func FormatCPUList(cpus []int) string {
	var b strings.Builder
	for i := 0; i < len(cpus); {
		j := i
		for j+1 < len(cpus) && cpus[j+1] == cpus[j]+1 {
			j++
		}
		if b.Len() > 0 {
			b.WriteByte(',')
		}
		b.WriteString(strconv.Itoa(cpus[i]))
		if j > i {
			b.WriteByte('-')
			b.WriteString(strconv.Itoa(cpus[j]))
		}
		i = j + 1
	}
	return b.String()
}

// SplitCPUs divides the CPUs this process may run on between the targets
// and the load generator: the generator gets the first quarter of them (at
// least one), the targets the rest. With fewer than two CPUs there is
// nothing to split, and both are nil.
func SplitCPUs() (target, generator []int, err error) {
	allowed, err := srt.AffinityCPUs()
	if err != nil || len(allowed) < 2 {
		return nil, nil, err
	}
	n := max(1, len(allowed)/4)
	return allowed[n:], allowed[:n], nil
}

// checkSplit checks a split of the CPUs between the targets and the load
// generator: both sets or neither, disjoint, each CPU one this process may
// run on.
func checkSplit(target, generator []int) error {
	if len(target) == 0 && len(generator) == 0 {
		return nil
	}
	if len(target) == 0 || len(generator) == 0 {
		return errors.New("bench: set both TargetCPUs and GeneratorCPUs, or neither")
	}
	allowed, err := srt.AffinityCPUs()
	if err != nil {
		return err
	}
	for _, c := range slices.Concat(target, generator) {
		if c < 0 || c >= maxCPU {
			return fmt.Errorf("bench: CPU %d out of range [0, %d)", c, maxCPU)
		}
		if !slices.Contains(allowed, c) {
			return fmt.Errorf("bench: CPU %d is not one this process may run on (%s)", c, FormatCPUList(allowed))
		}
	}
	for _, c := range target {
		if slices.Contains(generator, c) {
			return fmt.Errorf("bench: CPU %d is in both the target's and the generator's set", c)
		}
	}
	return nil
}
