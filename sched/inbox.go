package sched

import (
	"sync/atomic"

	"github.com/sluice-go/sluice/lanes"
)

// inNode is one task in an inbox. Coroutines embed one, so resuming after an
// Await allocates nothing.
type inNode struct {
	next *inNode
	t    task
	lane lanes.ID
}

// inbox is the multi-producer, single-consumer queue through which other
// goroutines hand work to a worker. Producers push with a compare-and-swap
// on the head of a linked stack; the worker takes the whole stack with one
// swap and reverses it, which keeps submission order. Nothing blocks: a
// locked worker goroutine that blocked on a mutex would cost a thread
// hand-off of tens of microseconds, which measurements showed dominating
// Await under load.
type inbox struct {
	head atomic.Pointer[inNode]
	n    atomic.Int64 // tasks pushed and not yet taken, for Snapshot
}

// sealed marks an inbox whose worker has exited: pushes fail.
var sealed = &inNode{}

// push adds nd; it reports false once the inbox is sealed.
func (b *inbox) push(nd *inNode) bool {
	for {
		h := b.head.Load()
		if h == sealed {
			return false
		}
		nd.next = h
		if b.head.CompareAndSwap(h, nd) {
			b.n.Add(1)
			return true
		}
	}
}

// nonEmpty reports whether tasks are waiting.
func (b *inbox) nonEmpty() bool {
	h := b.head.Load()
	return h != nil && h != sealed
}

// take removes every waiting task and returns them oldest first.
func (b *inbox) take() *inNode {
	return b.takeAndSet(nil)
}

// seal takes what is left and makes every later push fail.
func (b *inbox) seal() *inNode {
	return b.takeAndSet(sealed)
}

func (b *inbox) takeAndSet(to *inNode) *inNode {
	h := b.head.Swap(to)
	if h == sealed {
		return nil
	}
	var rev *inNode
	n := int64(0)
	for h != nil {
		next := h.next
		h.next = rev
		rev = h
		h = next
		n++
	}
	b.n.Add(-n)
	return rev
}
