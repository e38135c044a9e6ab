package admit

import "strconv"

// LoadHeader is the header field in which a sluice server tells its
// clients how loaded it is, when configured to (server.Config.LoadHint):
// the requests it holds (running and waiting in its queue) per worker, as
// a decimal number with two decimals, measured as the response's head is
// written. "0.50" is half as many requests as workers, "3.00" three
// requests per worker. Package client reads it to balance its requests.
const LoadHeader = "Sluice-Load"

// FormatLoad returns LoadHeader's value for inFlight requests running and
// queued waiting on workers workers.
func FormatLoad(inFlight, queued, workers int) string {
	return strconv.FormatFloat(float64(inFlight+queued)/float64(max(workers, 1)), 'f', 2, 64)
}

// Load returns the requests the pipeline holds now: those admitted and not
// ended, and those waiting in its queue. It reads one counter per shard and
// the queue's length, and takes no lock.
func (p *Pipeline) Load() (inFlight, queued int) {
	var n int64
	for i := range p.shards {
		n += p.shards[i].inFlight.count()
	}
	if p.q != nil {
		queued = p.q.Len()
	}
	return int(max(n, 0)), queued
}
