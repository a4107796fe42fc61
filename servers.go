package main

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/http/pprof"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/tools/leaderelection"
	"k8s.io/component-base/metrics/legacyregistry"
	"k8s.io/klog/v2"
)

// Readiness timing: the apiserver is probed every probeInterval, and the
// operator is not ready once staleAfter has passed since the last answer.
// With a watch broken for that long, the caches can no longer be trusted.
const (
	probeInterval = 5 * time.Second
	staleAfter    = 20 * time.Second
)

// health backs /healthz and /readyz.
type health struct {
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

func newHealth(watchdog *leaderelection.HealthzAdaptor) *health {
	return &health{watchdog: watchdog, now: time.Now}
}

// ready explains why the operator is not ready, or returns nil.
func (h *health) ready() error {
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

// probeAPIServer records every successful answer of the apiserver's
// /readyz until ctx is cancelled.
func (h *health) probeAPIServer(ctx context.Context, dc discovery.DiscoveryInterface) {
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

func (h *health) handler() http.Handler {
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

// metricsHandler serves the operator's own registry together with the
// component-base legacy registry, which holds the workqueue, client-go
// REST, leader-election, Go and process metrics.
func metricsHandler(reg *prometheus.Registry, profiling bool) http.Handler {
	mux := http.NewServeMux()
	mux.Handle("/metrics", promhttp.HandlerFor(prometheus.Gatherers{legacyregistry.DefaultGatherer, reg}, promhttp.HandlerOpts{}))
	if profiling {
		mux.HandleFunc("/debug/pprof/", pprof.Index)
		mux.HandleFunc("/debug/pprof/cmdline", pprof.Cmdline)
		mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
		mux.HandleFunc("/debug/pprof/symbol", pprof.Symbol)
		mux.HandleFunc("/debug/pprof/trace", pprof.Trace)
	}
	return mux
}

// listener is one HTTP server the operator runs.
type listener struct {
	name   string
	server *http.Server
	ln     net.Listener
	done   chan error
}

// listen binds addr now, so a port conflict fails startup, and serves in
// the background. An address of "0" disables the listener.
func listen(ctx context.Context, name, addr string, h http.Handler) (*listener, error) {
	if addr == "0" || addr == "" {
		return nil, nil
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("%s listener on %s: %w", name, addr, err)
	}
	l := &listener{
		name:   name,
		server: &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second},
		ln:     ln,
		done:   make(chan error, 1),
	}
	klog.FromContext(ctx).Info("Serving", "listener", name, "address", ln.Addr().String())
	go func() { l.done <- l.server.Serve(ln) }()
	return l, nil
}

// shutdown stops the listener, waiting up to 5 seconds for requests.
func (l *listener) shutdown(ctx context.Context) {
	if l == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer cancel()
	if err := l.server.Shutdown(ctx); err != nil {
		klog.FromContext(ctx).Error(err, "Stopping listener", "listener", l.name)
	}
	<-l.done
}
