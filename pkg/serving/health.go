package serving

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"sync/atomic"
	"time"

	"k8s.io/client-go/discovery"
	"k8s.io/client-go/tools/leaderelection"
	"k8s.io/klog/v2"
)

// Readiness timing: the apiserver is probed every probeInterval, and the
// operator is not ready once staleAfter has passed since the last answer.
// With a watch broken for that long, the caches can no longer be trusted.
const (
	probeInterval = 5 * time.Second
	staleAfter    = 20 * time.Second
)

// syncGrace is how long readiness waits for the Memcached caches. Listing
// Memcacheds still stored as v1alpha1 needs conversion, which needs a
// ready replica in the webhook Service: when no replica is ready, as
// after all of them restarted, each one's caches wait on the others'
// readiness. A replica that has waited this long is ready without them,
// so that its webhook can be reached and the caches can fill. The other
// caches need no conversion, and readiness always waits for them.
const syncGrace = 30 * time.Second

// Health backs /healthz and /readyz.
type Health struct {
	// synced is set once the informer caches have synced. A follower with
	// synced caches is warm: it can take over without a cold start, so a
	// rollout of the operator waits for it.
	synced atomic.Bool
	// childrenSynced is set once every cache but the Memcacheds' has
	// synced.
	childrenSynced atomic.Bool
	// started is when the replica started waiting for its caches.
	started time.Time
	// lastContact is when the apiserver last answered a probe, in Unix
	// nanoseconds.
	lastContact atomic.Int64
	// serves are the listeners a Service routes to, which must be able to
	// serve before the replica is an endpoint of it.
	serves []*Listener
	// watchdog fails /healthz when this replica leads but has stopped
	// renewing its Lease; nil without leader election.
	watchdog *leaderelection.HealthzAdaptor
	now      func() time.Time
}

// NewHealth returns the health of a replica. watchdog fails /healthz when
// the replica leads but has stopped renewing its Lease; nil without leader
// election.
func NewHealth(watchdog *leaderelection.HealthzAdaptor) *Health {
	return &Health{watchdog: watchdog, now: time.Now, started: time.Now()}
}

// MarkSynced records that every informer cache has synced.
func (h *Health) MarkSynced() { h.synced.Store(true) }

// MarkChildrenSynced records that every cache but the Memcacheds' has
// synced.
func (h *Health) MarkChildrenSynced() { h.childrenSynced.Store(true) }

// Serves makes readiness wait until l can serve: a replica is an endpoint
// of the Services in front of it as soon as it is ready, and a TLS
// listener without its certificate fails every handshake. Call it before
// the health listener answers; a nil l is ignored.
func (h *Health) Serves(l *Listener) {
	if l != nil {
		h.serves = append(h.serves, l)
	}
}

// ready explains why the operator is not ready, or returns nil.
func (h *Health) ready() error {
	for _, l := range h.serves {
		if err := l.Serving(); err != nil {
			return err
		}
	}
	switch {
	case h.synced.Load():
	case !h.childrenSynced.Load():
		return errors.New("informer caches have not synced")
	case h.now().Sub(h.started) < syncGrace:
		return errors.New("the Memcached caches have not synced")
	}
	last := h.lastContact.Load()
	if last == 0 {
		return errors.New("the apiserver has not answered yet")
	}
	if age := h.now().Sub(time.Unix(0, last)); age > staleAfter {
		return fmt.Errorf("the apiserver has not answered for %s; the caches may be stale", age.Round(time.Second))
	}
	return nil
}

// ProbeAPIServer records every successful answer of the apiserver's
// /readyz until ctx is cancelled.
func (h *Health) ProbeAPIServer(ctx context.Context, dc discovery.DiscoveryInterface) {
	probe := func() {
		ctx, cancel := context.WithTimeout(ctx, probeInterval)
		defer cancel()
		if err := dc.RESTClient().Get().AbsPath("/readyz").Do(ctx).Error(); err == nil {
			h.lastContact.Store(h.now().UnixNano())
		} else {
			klog.FromContext(ctx).V(2).Info("The apiserver did not answer the readiness probe", "err", err)
		}
	}
	probe()
	ticker := time.NewTicker(probeInterval)
	defer ticker.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-ticker.C:
			probe()
		}
	}
}

// Handler serves /healthz and /readyz.
func (h *Health) Handler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("/healthz", func(w http.ResponseWriter, r *http.Request) {
		if h.watchdog != nil {
			if err := h.watchdog.Check(r); err != nil {
				http.Error(w, err.Error(), http.StatusServiceUnavailable)
				return
			}
		}
		_, _ = w.Write([]byte("ok"))
	})
	mux.HandleFunc("/readyz", func(w http.ResponseWriter, _ *http.Request) {
		if err := h.ready(); err != nil {
			http.Error(w, err.Error(), http.StatusServiceUnavailable)
			return
		}
		_, _ = w.Write([]byte("ok"))
	})
	return mux
}
