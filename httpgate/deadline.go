package httpgate

import (
	"context"
	"net/http"

	"github.com/sluice-go/sluice/admit"
)

// withDeadline returns r with a context that ends when the time its
// caller left (admit.TimeoutHeader, read by the admission) runs out, so
// that the handler's calls made with it forward what is left; stop
// releases the context. r is returned as is when it sent no time.
func withDeadline(r *http.Request, t *admit.Ticket) (*http.Request, context.CancelFunc) {
	dl, ok := t.Deadline()
	if !ok {
		return r, func() {}
	}
	ctx, stop := context.WithDeadline(r.Context(), dl)
	return r.WithContext(ctx), stop
}
