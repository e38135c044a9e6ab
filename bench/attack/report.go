package attack

import (
	"fmt"
	"io"
	"time"
)

// WriteMarkdown writes the results of Run as a Markdown table, a row per
// attack and target, with each attack's verdict against net/http.
func WriteMarkdown(w io.Writer, results []Result) error {
	verdicts := map[string]string{}
	for _, v := range Verdicts(results) {
		verdicts[v.Attack] = "worse than net/http"
		if v.OK {
			verdicts[v.Attack] = "as net/http or better"
		}
	}
	if _, err := fmt.Fprintln(w, "| attack | target | probes ok | p99 | server CPU | peak RSS | found | verdict |\n|---|---|---|---|---|---|---|---|"); err != nil {
		return err
	}
	for _, r := range results {
		cpu, rss := "-", "-"
		if r.CPU > 0 || r.PeakRSS > 0 {
			cpu = r.CPU.Round(10 * time.Millisecond).String()
			rss = fmt.Sprintf("%d MiB", r.PeakRSS>>20)
		}
		found := r.Found
		if found == "" {
			found = "-"
		}
		verdict := ""
		if r.Target == "sluice" {
			verdict = verdicts[r.Attack]
		}
		if _, err := fmt.Fprintf(w, "| %s | %s | %d/%d (%.0f%%) | %v | %s | %s | %s | %s |\n",
			r.Attack, r.Target, r.Probe.OK, r.Probe.Sent, 100*r.Probe.Success(),
			r.Probe.P99.Round(time.Millisecond), cpu, rss, found, verdict); err != nil {
			return err
		}
	}
	return nil
}
