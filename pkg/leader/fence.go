package leader

import (
	"errors"
	"net/http"
	"sync/atomic"
)

// ErrFenced is what a write request gets once the Fence has tripped.
var ErrFenced = errors.New("not sending a write: this replica lost leadership")

// Fence refuses every write request of a client once leadership is lost.
// Cancelling the syncs stops the controller from starting more, but a
// write already on its way through client-go (an Event, a retry) would
// still go out; behind the fence, from the moment the loss is seen, this
// process sends no write at all, while reads go on until it exits. Wrap
// the rest.Config of every client with it, innermost
// (transport.Wrappers(fence.Wrap, cfg.WrapTransport)), so that no other
// wrapper can send past it. (When renewing fails, client-go
// tries to release the Lease before it reports the loss; that attempt is
// not fenced, and fails on the apiserver if someone else holds the Lease.)
type Fence struct {
	tripped atomic.Bool
}

// Wrap is a transport wrapper for rest.Config.Wrap.
func (f *Fence) Wrap(rt http.RoundTripper) http.RoundTripper {
	return &fencedTransport{fence: f, next: rt}
}

// Trip closes the fence for good.
func (f *Fence) Trip() { f.tripped.Store(true) }

// Tripped reports whether the fence has been closed.
func (f *Fence) Tripped() bool { return f.tripped.Load() }

type fencedTransport struct {
	fence *Fence
	next  http.RoundTripper
}

func (t *fencedTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	if t.fence.Tripped() && req.Method != http.MethodGet && req.Method != http.MethodHead {
		if req.Body != nil {
			_ = req.Body.Close()
		}
		return nil, ErrFenced
	}
	return t.next.RoundTrip(req)
}
