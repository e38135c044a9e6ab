package gate

import (
	"slices"
	"sync"
	"sync/atomic"

	"github.com/sluice-go/sluice/admit"
)

// wakers is the list of Wake functions of the pipelines a gate is attached
// to, copy-on-write: firing it is one atomic load when nobody listens.
type wakers struct {
	mu sync.Mutex
	p  atomic.Pointer[[]*func(int)]
}

// attach registers env.Wake and returns the detach function that removes
// it again (harmless to call more than once).
func (w *wakers) attach(env admit.Env) (detach func(), err error) {
	if env.Wake == nil {
		return func() {}, nil
	}
	fn := &env.Wake
	w.edit(func(fns []*func(int)) []*func(int) { return append(fns, fn) })
	var once sync.Once
	return func() {
		once.Do(func() {
			w.edit(func(fns []*func(int)) []*func(int) {
				return slices.DeleteFunc(fns, func(f *func(int)) bool { return f == fn })
			})
		})
	}, nil
}

func (w *wakers) edit(f func([]*func(int)) []*func(int)) {
	w.mu.Lock()
	defer w.mu.Unlock()
	var fns []*func(int)
	if old := w.p.Load(); old != nil {
		fns = slices.Clone(*old)
	}
	fns = f(fns)
	w.p.Store(&fns)
}

// fire tells every attached pipeline that the gate may have opened for n
// more requests (n <= 0: any number).
func (w *wakers) fire(n int) {
	if p := w.p.Load(); p != nil {
		for _, fn := range *p {
			(*fn)(n)
		}
	}
}
