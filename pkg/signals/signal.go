package signals

import (
	"context"
	"os"
	"os/signal"
	"syscall"
)

// SetupSignalContext returns a context that is cancelled on the first
// SIGINT or SIGTERM. A second signal exits at once with status 1, for when a
// graceful shutdown hangs.
func SetupSignalContext(parent context.Context) context.Context {
	ctx, cancel := context.WithCancel(parent)
	c := make(chan os.Signal, 2)
	signal.Notify(c, os.Interrupt, syscall.SIGTERM)
	go func() {
		<-c
		cancel()
		<-c
		os.Exit(1)
	}()
	return ctx
}
