package gate

import "github.com/sluice-go/sluice/sched"

// schedIdleHook returns a registration function for the idle hook of a
// source that has sched.Scheduler's OnIdle (a *sched.Scheduler, or a
// *runtime.Runtime that embeds one), or nil.
func schedIdleHook(src BusySource) func(fn func()) {
	s, ok := src.(interface {
		OnIdle(fn func(w *sched.Worker))
	})
	if !ok {
		return nil
	}
	return func(fn func()) { s.OnIdle(func(*sched.Worker) { fn() }) }
}
