package load

import (
	"context"
	"io"
	"net/http"
	"net/url"
	"sync/atomic"
	"time"

	"github.com/sluice-go/sluice/reject"
)

// sender sends one request and classifies its answer; Run and Calibrate
// share it.
type sender interface {
	// send sends a request with the extra header fields hdr, on a
	// connection of its own when fresh, and reads its answer to the end
	// by deadline (or until ctx ends). It does not look at the time taken.
	send(ctx context.Context, deadline time.Time, fresh bool, hdr http.Header) outcome
	// close releases the connections.
	close()
	// dials returns the connections opened so far.
	dials() int64
}

// newSenders returns the sender of a run: cfg.URL's, or one for each of
// cfg.URLs taken in turn (roundRobin).
func newSenders(ctx context.Context, cfg Config) (sender, error) {
	if len(cfg.URLs) == 0 {
		u, _ := url.Parse(cfg.URL) // checked by newPlan
		s, err := newSender(ctx, u, cfg.Method, cfg.Client, cfg.Conns, cfg.Deadline)
		return withMode(s, cfg.ClientMode), err
	}
	rr := &roundRobin{}
	for _, raw := range cfg.URLs {
		u, _ := url.Parse(raw) // checked by newPlan
		s, err := newSender(ctx, u, cfg.Method, cfg.Client, cfg.Conns, cfg.Deadline)
		if err != nil {
			rr.close()
			return nil, err
		}
		rr.senders = append(rr.senders, withMode(s, cfg.ClientMode))
	}
	return rr, nil
}

// withMode sets the raw client's ClientMode; net/http's client always
// reconnects (newPlan refuses ClientKeep without the raw client).
func withMode(s sender, mode ClientMode) sender {
	if rs, ok := s.(*rawSender); ok {
		rs.keep = mode == ClientKeep
	}
	return s
}

// newClients returns the senders of Config.Clients: a raw client of one
// connection per client, whose requests wait for it until their deadline;
// request i is client i mod the count's (roundRobin.sendTo).
func newClients(ctx context.Context, cfg Config) (*roundRobin, error) {
	u, _ := url.Parse(cfg.URL) // checked by newPlan
	rr := &roundRobin{}
	for range cfg.Clients {
		s, err := newSender(ctx, u, cfg.Method, nil, 1, cfg.Deadline)
		if err != nil {
			rr.close()
			return nil, err
		}
		s.(*rawSender).waitDeadline = true // no Client: newPlan checked
		rr.senders = append(rr.senders, withMode(s, cfg.ClientMode))
	}
	return rr, nil
}

// roundRobin sends each request through the next of its senders, in
// turn.
type roundRobin struct {
	senders []sender
	next    atomic.Uint64
}

func (r *roundRobin) send(ctx context.Context, deadline time.Time, fresh bool, hdr http.Header) outcome {
	i := (r.next.Add(1) - 1) % uint64(len(r.senders))
	return r.senders[i].send(ctx, deadline, fresh, hdr)
}

// sendTo sends through sender k (the client k of Config.Clients).
func (r *roundRobin) sendTo(ctx context.Context, k int, deadline time.Time, hdr http.Header) outcome {
	return r.senders[k].send(ctx, deadline, false, hdr)
}

func (r *roundRobin) close() {
	for _, s := range r.senders {
		s.close()
	}
}

func (r *roundRobin) dials() int64 {
	var n int64
	for _, s := range r.senders {
		n += s.dials()
	}
	return n
}

// newSender returns the built-in raw client for an http or https URL, with
// a pool of conns kept-alive connections, or, when client is set, net/http
// with that client.
func newSender(ctx context.Context, u *url.URL, method string, client *http.Client, conns int, dialTimeout time.Duration) (sender, error) {
	if client != nil {
		return &httpSender{url: u.String(), method: method, client: client}, nil
	}
	rc, err := newRawClient(u, method, conns, dialTimeout)
	if err != nil {
		return nil, err
	}
	// The end of ctx closes every connection: the requests in flight end
	// at once.
	return &rawSender{rawClient: rc, stop: context.AfterFunc(ctx, rc.close)}, nil
}

// httpSender sends through a caller's net/http client, whose connections
// it does not count.
type httpSender struct {
	url, method string
	client      *http.Client
}

func (s *httpSender) dials() int64 { return 0 }

func (s *httpSender) send(ctx context.Context, deadline time.Time, fresh bool, hdr http.Header) outcome {
	ctx, cancel := context.WithDeadline(ctx, deadline)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, s.method, s.url, nil)
	if err != nil {
		return outFailed
	}
	for k, v := range hdr {
		req.Header[k] = v
	}
	resp, err := s.client.Do(req)
	if err != nil {
		return outFailed
	}
	_, err = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	if err != nil {
		return outFailed
	}
	return classify(resp.StatusCode, resp.Header.Get(reject.NotStartedHeader) == "1")
}

// classify turns a complete answer into an outcome: OK for a 2xx, Rejected
// for a 503 marked not started, Failed for anything else.
func classify(status int, notStarted bool) outcome {
	switch {
	case status >= 200 && status < 300:
		return outOK
	case status == http.StatusServiceUnavailable && notStarted:
		return outRejected
	}
	return outFailed
}

func (s *httpSender) close() {}

// rawSender is the raw client as a sender, closed when the run's context
// ends.
type rawSender struct {
	*rawClient
	stop func() bool
}

func (s *rawSender) close() {
	s.stop()
	s.rawClient.close()
}

// send is the raw client's sender method.
func (c *rawClient) send(ctx context.Context, deadline time.Time, fresh bool, hdr http.Header) outcome {
	res, err := c.do(ctx, deadline, fresh, hdr)
	if err != nil {
		return outFailed
	}
	return classify(res.Status, res.NotStarted)
}
