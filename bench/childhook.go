package bench

import (
	"encoding/json"
	"fmt"
	"net/http"

	"github.com/sluice-go/sluice"
)

// A ChildHook is what a scenario adds to its targets' child processes
// beyond the weather service: handlers of its own, a change to a sluice
// target's configuration, machinery that runs beside the target, a report
// to the parent once the target has stopped.
//
// The parent names the hook in the child's spec (ChildSpec.SetHook, with
// the hook's own settings); the child, which runs the same program, finds
// it by that name among the hooks its main passes to ServeChild, and
// calls Open before its target starts. A scenario offers its hook by
// implementing ChildHooker; package bench/scenario gathers them for the
// command's main (scenario.ChildHooks), so that the child core knows no
// scenario.
type ChildHook struct {
	// Name is what ChildSpec.Hook names the hook by: the scenario's name.
	Name string
	// Open runs in the child, before its target starts. It builds the
	// hook's part of the child from the child's spec, whose HookConfig
	// holds the settings the parent gave SetHook (decode them with
	// DecodeHookConfig), and from the weather service the spec shapes.
	Open func(cs ChildSpec, weather http.Handler) (*ChildPart, error)
}

// ChildPart is a hook's part in one child process. Every field is
// optional.
type ChildPart struct {
	// Handler is what the target serves instead of the weather service.
	Handler http.Handler
	// Configure changes a sluice target's configuration before it
	// listens; other targets ignore it.
	Configure func(cfg *sluice.Config) error
	// NetHTTP changes a net/http target's server (nethttp, semaphore,
	// gosched) before it serves: its Protocols, to speak HTTP/2 over
	// plain TCP (h2c) as gRPC clients do; the sluice targets ignore it.
	NetHTTP func(hs *http.Server)
	// Targets are targets the hook serves itself, beside those of
	// package bench, for a server that is not an http.Handler's (grpc-go's
	// own): the child looks the spec's target up among them first. Such a
	// target listens where the spec says (ChildSpec.Addr, or a loopback
	// port). The parent knows their names from the scenario
	// (TargetSupplier).
	Targets []Target
	// Listening is called once a sluice target listens. It may serve an
	// endpoint of its own beside the target (an admin endpoint): it then
	// returns that endpoint's URL, which the parent reads with
	// Process.AdminURL, and what stops it, which the target's stop calls
	// before it stops the server.
	Listening func(srv *sluice.Server) (admin string, stop func() error, err error)
	// Stats is what a sluice target reports when it has stopped
	// (Process.Stats), in place of its own counters.
	Stats func(srv *sluice.Server) any
	// Close releases what the part holds (goroutines, connections): the
	// child calls it once its target has stopped, or failed to start,
	// before it reads the target's Stats.
	Close func() error
	// Report is called once the target has stopped; the child sends what
	// it returns, as JSON, to the parent, which finds it in
	// Process.Report.
	Report func() any
}

// A ChildHooker is a Scenario whose targets need a ChildHook.
type ChildHooker interface {
	ChildHook() ChildHook
}

// SetHook makes the child run the hook named name, with config, encoded as
// JSON, as its settings (HookConfig).
func (cs *ChildSpec) SetHook(name string, config any) error {
	js, err := json.Marshal(config)
	if err != nil {
		return fmt.Errorf("bench: child hook %s: %w", name, err)
	}
	cs.Hook, cs.HookConfig = name, js
	return nil
}

// DecodeHookConfig decodes the settings of cs's hook (HookConfig) as a T.
func DecodeHookConfig[T any](cs ChildSpec) (*T, error) {
	v := new(T)
	if len(cs.HookConfig) == 0 {
		return v, nil
	}
	if err := json.Unmarshal(cs.HookConfig, v); err != nil {
		return nil, fmt.Errorf("bench: child hook %s: %w", cs.Hook, err)
	}
	return v, nil
}

// openHook opens the hook cs names, found among hooks; nil when cs names
// none.
func openHook(cs ChildSpec, weather http.Handler, hooks []ChildHook) (*ChildPart, error) {
	if cs.Hook == "" {
		return nil, nil
	}
	for _, h := range hooks {
		if h.Name == cs.Hook {
			part, err := h.Open(cs, weather)
			if err != nil {
				return nil, fmt.Errorf("child hook %s: %w", cs.Hook, err)
			}
			if part == nil {
				part = &ChildPart{}
			}
			return part, nil
		}
	}
	return nil, fmt.Errorf("unknown child hook %q (this program's main passes ServeChild no such hook)", cs.Hook)
}

// closePart calls part's Close; nil or no Close does nothing.
func closePart(part *ChildPart) error {
	if part == nil || part.Close == nil {
		return nil
	}
	return part.Close()
}

// hookTarget returns the target called name among those part serves
// itself (ChildPart.Targets).
func hookTarget(part *ChildPart, name string) (Target, bool) {
	if part == nil {
		return Target{}, false
	}
	for _, t := range part.Targets {
		if t.Name == name {
			return t, true
		}
	}
	return Target{}, false
}
