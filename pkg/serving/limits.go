package serving

import (
	"net/http"
	"time"
)

// Limits bound what the callers of one TLS listener can make the operator
// hold that no budget of its handler counts: for each connection, its TLS
// and HTTP/2 buffers and the goroutines that serve it, and for each request
// in flight, its headers, the body it was sent ahead of the handler's reads,
// and the goroutine that runs the handler. Over HTTP/1 a connection carries
// one request at a time; over HTTP/2 it carries up to Streams at once, so
// Conns alone does not bound the requests in flight.
type Limits struct {
	// Conns bounds the connections open at once; more wait to be accepted,
	// in the kernel's backlog. 0 means no bound.
	Conns int
	// Streams bounds the requests in flight on one HTTP/2 connection
	// (SETTINGS_MAX_CONCURRENT_STREAMS). A client that needs more opens
	// another connection, as client-go and the apiserver's webhook client
	// do. 0 means Go's default, 250.
	Streams int
}

// What one connection and one request may hold, whichever listener serves
// them. Go's defaults are far above what the operator's callers send: a
// header block of 1 MiB, HTTP/2 frames of 1 MiB (the connection's read
// buffer grows to the largest it has read), and 1 MiB of body sent ahead
// of the handlers on each connection.
const (
	// maxHeaderBytes bounds a request's header block. The apiserver's
	// ConversionReviews carry a few hundred bytes of headers, and a
	// scrape's bearer token (a ServiceAccount's, about 1 KiB) is the
	// largest header the metrics listener reads.
	maxHeaderBytes = 16 << 10
	// maxFrameBytes is the largest HTTP/2 frame a client may send: 16 KiB,
	// the protocol's own default and least value.
	maxFrameBytes = 16 << 10
	// receiveWindow is how much request body one HTTP/2 connection, and
	// each of its streams, may send ahead of the handlers' reads, which
	// the server buffers: 64 KiB, the protocol's initial window and the
	// least Go accepts for a connection. The handler reads a body as it
	// arrives, so a review of 16 MiB costs 256 window updates; at a round
	// trip of 1 ms inside a cluster it arrives at 64 MiB/s.
	receiveWindow = 64 << 10
)

// Worked example, measured on a listener at these limits flooded by 128
// HTTP/2 connections of 4 streams each: a connection costs about 40 KiB
// (TLS state, the HPACK tables and the goroutines that read and write it),
// and up to 52 KiB of TLS record buffers, a frame of maxFrameBytes and the
// receiveWindow of body besides, so at most about 170 KiB; a stream costs
// about 14 KiB (the handler's goroutine, its 4 KiB response buffer and the
// request) and its header block, which decodes to about 1.4 times
// maxHeaderBytes, so at most about 36 KiB. So a listener holds at most
//
//	Conns × (170 KiB + Streams × 36 KiB)
//
// beside what its handler budgets: the webhook's 128 × (170 + 4 × 36) KiB
// = 39 MiB, and the metrics listener's 512 × (170 + 1 × 36) KiB = 103 MiB.
// With Go's defaults (250 streams, 1 MiB frames and windows) and 1 MiB
// header blocks, the same 128 connections could hold 45 GiB.
// TestFaultWebhookHTTP2StreamFlood measures a flood of 4 connections.
func (l Limits) server(h http.Handler) *http.Server {
	return &http.Server{
		Handler:           h,
		ReadHeaderTimeout: 10 * time.Second,
		// A body that takes longer than the apiserver's 30 s webhook timeout
		// is not the apiserver's. No write timeout: a CPU profile streams
		// for as long as asked.
		ReadTimeout:    30 * time.Second,
		MaxHeaderBytes: maxHeaderBytes,
		HTTP2: &http.HTTP2Config{
			MaxConcurrentStreams:          l.Streams,
			MaxReadFrameSize:              maxFrameBytes,
			MaxReceiveBufferPerConnection: receiveWindow,
			MaxReceiveBufferPerStream:     receiveWindow,
		},
	}
}
