//go:build !linux

package bench

import "time"

// renice does nothing where threads' nice values are not per thread.
func renice(int) error { return nil }

// selfCPU is unknown here.
func selfCPU() time.Duration { return 0 }

// processCPU is unknown here.
func processCPU(int) time.Duration { return 0 }
