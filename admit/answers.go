package admit

import (
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"github.com/sluice-go/sluice/queue"
	"github.com/sluice-go/sluice/reject"
)

// The pipeline's own refusals. They are never modified.
var (
	refusedTooOld   = &Refusal{Reason: reject.QueueTimeout}
	refusedCanceled = &Refusal{Reason: reject.QueueCanceled}
	queueRefusals   = [...]*Refusal{
		queue.Timeout: {Reason: reject.QueueTimeout},
		queue.Full:    {Reason: reject.QueueFull},
		queue.Evicted: {Reason: reject.QueueEvicted},
		queue.Closed:  {Reason: reject.QueueClosed},
	}
)

// queueRefusal returns the refusal for a queue's reason.
func queueRefusal(r queue.Reason) *Refusal {
	if int(r) < len(queueRefusals) {
		return queueRefusals[r]
	}
	return &Refusal{Reason: "queue-" + r.String()}
}

// answers builds each answer once per reason, status and Retry-After, and
// counts rejections by reason.
type answers struct {
	status int
	retry  time.Duration
	header http.Header
	total  atomic.Int64
	byWhy  sync.Map // reason → *reasonAnswers
}

// maxVariants bounds the answers kept per reason: a policy whose
// Retry-After takes many values (a quota's time to its next window) gets
// the first ones prebuilt, and the others built for each rejection.
const maxVariants = 16

// reasonAnswers is one reason's count and the answers built for it (one,
// unless policies give it several statuses or Retry-After values).
type reasonAnswers struct {
	n        atomic.Int64
	mu       sync.Mutex
	variants atomic.Pointer[[]*reject.Answer]
}

// count counts a rejection for r and returns its answer.
func (as *answers) count(r *Refusal) *reject.Answer { return as.answer(r, true) }

// answer returns r's answer, counting it as a rejection when count is set
// (a cancellation has an answer, for a client still there to read it, but
// is not the server's refusal).
func (as *answers) answer(r *Refusal, count bool) *reject.Answer {
	status := r.Status
	if status == 0 {
		status = as.status
	}
	retry := r.RetryAfter
	if retry == 0 {
		retry = as.retry
	}
	secs := int64(-1)
	if retry >= 0 {
		secs = int64((retry + time.Second - 1) / time.Second)
	}
	v, ok := as.byWhy.Load(r.Reason)
	if !ok {
		v, _ = as.byWhy.LoadOrStore(r.Reason, &reasonAnswers{})
	}
	ra := v.(*reasonAnswers)
	if count {
		ra.n.Add(1)
		as.total.Add(1)
	}
	if a := ra.find(status, secs); a != nil {
		return a
	}
	ra.mu.Lock()
	defer ra.mu.Unlock()
	if a := ra.find(status, secs); a != nil {
		return a // built meanwhile
	}
	var vs []*reject.Answer
	if old := ra.variants.Load(); old != nil {
		vs = append(vs, *old...)
	}
	a := reject.NewAnswer(r.Reason, status, retry, as.header)
	if len(vs) < maxVariants {
		vs = append(vs, a)
		ra.variants.Store(&vs)
	}
	return a
}

// find returns the answer built for status and secs, or nil.
func (ra *reasonAnswers) find(status int, secs int64) *reject.Answer {
	if vs := ra.variants.Load(); vs != nil {
		for _, a := range *vs {
			if a.Status == status && a.RetryAfter == secs {
				return a
			}
		}
	}
	return nil
}

// counts returns the rejections counted, in all and by reason.
func (as *answers) counts() (total int64, by map[string]int64) {
	by = map[string]int64{}
	as.byWhy.Range(func(k, v any) bool {
		if n := v.(*reasonAnswers).n.Load(); n > 0 {
			by[k.(string)] = n
		}
		return true
	})
	return as.total.Load(), by
}
