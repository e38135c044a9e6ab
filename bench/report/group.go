package report

import "github.com/sluice-go/sluice/bench"

// groupSamples groups rep's samples by the key that key gives them,
// skipping those for which it reports false, and returns the keys in the
// order they first appear.
func groupSamples[K comparable](rep *bench.Report, key func(bench.Sample) (K, bool)) ([]K, map[K][]bench.Sample) {
	var order []K
	by := make(map[K][]bench.Sample)
	for _, s := range rep.Samples {
		k, ok := key(s)
		if !ok {
			continue
		}
		if _, seen := by[k]; !seen {
			order = append(order, k)
		}
		by[k] = append(by[k], s)
	}
	return order, by
}

// PlacementOf describes where the samples' sluice workers ran, from the
// first sample that reported it: "pinned 0-1", "floating", or "" for a
// target that reports nothing (net/http).
func PlacementOf(samples []bench.Sample) string {
	for _, s := range samples {
		if p := s.Placement; p != nil {
			if p.Pinned() {
				return "pinned " + bench.FormatCPUList(p.CPUs)
			}
			return "floating"
		}
	}
	return ""
}
