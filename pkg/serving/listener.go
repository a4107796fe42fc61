package serving

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"time"

	"k8s.io/klog/v2"
)

// shutdownGrace is how long a stopping listener waits for requests in
// flight.
const shutdownGrace = 5 * time.Second

// Listener is one HTTP server the operator runs.
type Listener struct {
	name string
	addr string
	// shutdown stops the server and returns once it has stopped.
	shutdown func(context.Context) error
	// serving says why the listener cannot serve yet, or nil; nil for a
	// listener that always can.
	serving func() error
}

// Serving reports why the listener cannot serve requests yet, or nil.
func (l *Listener) Serving() error {
	if l.serving == nil {
		return nil
	}
	return l.serving()
}

// disabled reports whether a bind address turns its listener off.
func disabled(addr string) bool { return addr == "0" || addr == "" }

// Listen binds addr now, so a port conflict fails startup, and serves h
// over plain HTTP in the background. An address of "0" disables the
// listener.
func Listen(ctx context.Context, name, addr string, h http.Handler) (*Listener, error) {
	if disabled(addr) {
		return nil, nil
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("%s listener on %s: %w", name, addr, err)
	}
	srv := &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second}
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = srv.Serve(ln) // Always http.ErrServerClosed once Shutdown is called.
	}()
	klog.FromContext(ctx).Info("Serving", "listener", name, "address", ln.Addr().String(), "scheme", "http")
	return &Listener{name: name, addr: ln.Addr().String(), shutdown: func(ctx context.Context) error {
		err := srv.Shutdown(ctx)
		<-done
		return err
	}}, nil
}

// Addr is the address the listener is bound to.
func (l *Listener) Addr() string { return l.addr }

// Shutdown stops the listener, waiting up to shutdownGrace for requests.
func (l *Listener) Shutdown(ctx context.Context) {
	if l == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), shutdownGrace)
	defer cancel()
	if err := l.shutdown(ctx); err != nil {
		klog.FromContext(ctx).Error(err, "Stopping listener", "listener", l.name)
	}
}
