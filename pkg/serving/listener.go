package serving

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"time"

	"k8s.io/klog/v2"
)

// Listener is one HTTP server the operator runs.
type Listener struct {
	name   string
	server *http.Server
	ln     net.Listener
	done   chan error
}

// Listen binds addr now, so a port conflict fails startup, and serves in
// the background. An address of "0" disables the listener.
func Listen(ctx context.Context, name, addr string, h http.Handler) (*Listener, error) {
	if addr == "0" || addr == "" {
		return nil, nil
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("%s listener on %s: %w", name, addr, err)
	}
	l := &Listener{
		name:   name,
		server: &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second},
		ln:     ln,
		done:   make(chan error, 1),
	}
	klog.FromContext(ctx).Info("Serving", "listener", name, "address", ln.Addr().String())
	go func() { l.done <- l.server.Serve(ln) }()
	return l, nil
}

// Shutdown stops the listener, waiting up to 5 seconds for requests.
func (l *Listener) Shutdown(ctx context.Context) {
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
