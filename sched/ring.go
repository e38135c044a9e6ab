package sched

// task is one unit of work in a lane queue: a function to run, or a
// suspended coroutine to resume.
type task struct {
	fn  func()
	co  *coro
	enq int64 // clock reading when it was queued, for the waited counter
	// alone, when set, is asked as the task starts whether fn runs on a
	// runner with no unfinished coroutine (GoAlone, GoAloneWhile).
	alone func() bool
}

// ring is a growable FIFO of tasks, owned by one worker.
type ring struct {
	buf  []task
	head int
	n    int
}

func (r *ring) push(t task) {
	if r.n == len(r.buf) {
		r.grow()
	}
	r.buf[(r.head+r.n)&(len(r.buf)-1)] = t
	r.n++
}

// pushFront queues t ahead of every task the ring holds.
func (r *ring) pushFront(t task) {
	if r.n == len(r.buf) {
		r.grow()
	}
	r.head = (r.head - 1) & (len(r.buf) - 1)
	r.buf[r.head] = t
	r.n++
}

func (r *ring) pop() task {
	t := r.buf[r.head]
	r.buf[r.head] = task{} // let the closure be collected
	r.head = (r.head + 1) & (len(r.buf) - 1)
	r.n--
	return t
}

func (r *ring) grow() {
	size := 2 * len(r.buf)
	if size == 0 {
		size = 64
	}
	nb := make([]task, size)
	for i := 0; i < r.n; i++ {
		nb[i] = r.buf[(r.head+i)&(len(r.buf)-1)]
	}
	r.buf, r.head = nb, 0
}

// clear drops every task and returns how many there were.
func (r *ring) clear() int {
	n := r.n
	for r.n > 0 {
		r.pop()
	}
	return n
}
