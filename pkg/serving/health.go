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

// Health backs /healthz and /readyz.
type Health struct {
	// synced is set once the informer caches have synced. A follower with
	// synced caches is warm: it can take over without a cold start.
	synced atomic.Bool
	// lastContact is when the apiserver last answered a probe, in Unix
	// nanoseconds.
	lastContact atomic.Int64
	// watchdog fails /healthz when this replica leads but has stopped
	// renewing its Lease; nil without leader election.
	watchdog *leaderelection.HealthzAdaptor
	now      func() time.Time
}

// NewHealth returns the health of a replica. watchdog fails /healthz when
// the replica leads but has stopped renewing its Lease; nil without leader
// election.
func NewHealth(watchdog *leaderelection.HealthzAdaptor) *Health {
	return &Health{watchdog: watchdog, now: time.Now}
}

// MarkSynced records that the informer caches have synced.
func (h *Health) MarkSynced() { h.synced.Store(true) }

// ready explains why the operator is not ready, or returns nil.
func (h *Health) ready() error {
	if !h.synced.Load() {
		return errors.New("informer caches have not synced")
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
