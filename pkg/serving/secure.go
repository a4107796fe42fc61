package serving

import (
	"context"
	"crypto/tls"
	"fmt"
	"net"
	"net/http"
	"sync"

	"k8s.io/apiserver/pkg/server/dynamiccertificates"
	"k8s.io/client-go/kubernetes"
	certutil "k8s.io/client-go/util/cert"
	"k8s.io/klog/v2"
)

// SecureConfig says how a secure listener proves who it is and decides who
// may read it.
type SecureConfig struct {
	// CertFile and KeyFile hold the serving certificate in PEM. They are
	// watched and reloaded when they change, without a restart. Empty
	// means a self-signed certificate generated in memory at start, which
	// a scraper must either skip verifying or pin.
	CertFile, KeyFile string
	// Kube sends the TokenReviews and SubjectAccessReviews that
	// authenticate and authorize each request. Build it from
	// ReviewConfig, so that its rate limit bounds what a flood of tokens
	// costs the apiserver.
	Kube kubernetes.Interface
}

// ListenSecure binds addr now and serves h over HTTPS in the background,
// guarded as kube-controller-manager and kube-scheduler guard their
// /metrics: every request must carry a bearer token that the apiserver
// accepts and whose user may get the path (see DelegatedAuth). An address
// of "0" disables the listener.
func ListenSecure(ctx context.Context, name, addr string, h http.Handler, cfg SecureConfig) (*Listener, error) {
	if disabled(addr) {
		return nil, nil
	}
	cert, err := servingCertificate(name, cfg.CertFile, cfg.KeyFile)
	if err != nil {
		return nil, fmt.Errorf("%s listener: %w", name, err)
	}
	return ListenTLS(ctx, name, addr, NewDelegatedAuth(cfg.Kube).Wrap(h), cert, Limits{Conns: maxSecureConns, Streams: maxSecureStreams})
}

// maxSecureConns bounds the secure metrics listener's open connections.
// They wait for nothing but a review, which the lanes bound, so a scraper
// gets through a flood of them as long as the flood leaves it a
// connection: 512 is above the few hundred clients of
// TestIntegrationMetricsTokenFlood. A scrape is one request, so each
// connection carries one stream (maxSecureStreams): at most 103 MiB
// (Limits).
const (
	maxSecureConns   = 512
	maxSecureStreams = 1
)

// ListenTLS binds addr now and serves h over HTTPS in the background with
// the certificate cert provides, swapped whenever cert reports a change.
// A provider that is also a dynamiccertificates.ControllerRunner (files
// on disk) is run until the listener stops. limits bound the connections
// and what each may hold. An address of "0" disables the listener.
func ListenTLS(ctx context.Context, name, addr string, h http.Handler, cert dynamiccertificates.CertKeyContentProvider, limits Limits) (*Listener, error) {
	if disabled(addr) {
		return nil, nil
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("%s listener on %s: %w", name, addr, err)
	}
	boundAddr := ln.Addr().String()
	if limits.Conns > 0 {
		ln = limitConnections(ln, limits.Conns)
	}

	// The certificate controller swaps the served certificate whenever the
	// content provider reports a change, as the generic apiserver does. A
	// provider with no certificate yet fails handshakes until it has one.
	// The controller's worker starts with the first certificate: started
	// before, it would report each empty read as an error, and a start in
	// which the certificate is still being issued has nothing wrong.
	certCtx, stopCerts := context.WithCancel(context.WithoutCancel(ctx))
	certs := dynamiccertificates.NewDynamicServingCertificateController(
		&tls.Config{MinVersion: tls.VersionTLS12, NextProtos: []string{"h2", "http/1.1"}},
		nil, cert, nil, nil)
	cert.AddListener(certs)
	first := &onFirstChange{start: func() { go certs.Run(1, certCtx.Done()) }}
	cert.AddListener(first)
	if err := certs.RunOnce(); err != nil {
		klog.FromContext(ctx).Info("Waiting for the serving certificate", "listener", name, "reason", err.Error())
	} else {
		first.Enqueue()
	}
	if runner, ok := cert.(dynamiccertificates.ControllerRunner); ok {
		go runner.Run(certCtx, 1)
	}

	srv := limits.server(h)
	srv.TLSConfig = &tls.Config{MinVersion: tls.VersionTLS12, GetConfigForClient: certs.GetConfigForClient}
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = srv.ServeTLS(ln, "", "") // Always http.ErrServerClosed once Shutdown is called.
	}()
	klog.FromContext(ctx).Info("Serving", "listener", name, "address", boundAddr, "scheme", "https")
	return &Listener{name: name, addr: boundAddr,
		shutdown: func(ctx context.Context) error {
			defer stopCerts()
			err := srv.Shutdown(ctx)
			<-done
			return err
		},
		// What a handshake is answered with: a certificate once the
		// controller has loaded one. A server name keeps the controller
		// from looking at the connection, which there is none of here.
		serving: func() error {
			if cfg, err := certs.GetConfigForClient(&tls.ClientHelloInfo{ServerName: name}); err != nil || cfg == nil || len(cfg.Certificates) == 0 {
				return fmt.Errorf("the %s listener has no serving certificate yet", name)
			}
			return nil
		},
	}, nil
}

// ServingCertFromFiles loads a certificate and key in PEM, reloaded when
// the files change.
func ServingCertFromFiles(name, certFile, keyFile string) (dynamiccertificates.CertKeyContentProvider, error) {
	return dynamiccertificates.NewDynamicServingContentFromFiles(name+"-serving-cert", certFile, keyFile)
}

// servingCertificate loads the certificate and key files, primed and
// reloadable, or generates a self-signed pair in memory when both are
// empty.
func servingCertificate(name, certFile, keyFile string) (dynamiccertificates.CertKeyContentProvider, error) {
	switch {
	case certFile != "" && keyFile != "":
		return ServingCertFromFiles(name, certFile, keyFile)
	case certFile != "" || keyFile != "":
		return nil, fmt.Errorf("a serving certificate needs both a certificate file and a key file")
	}
	certPEM, keyPEM, err := certutil.GenerateSelfSignedCertKey("memcached-operator", nil, []string{"localhost"})
	if err != nil {
		return nil, fmt.Errorf("generating a self-signed certificate: %w", err)
	}
	return dynamiccertificates.NewStaticCertKeyContent(name+"-self-signed", certPEM, keyPEM)
}

// onFirstChange runs start the first time a certificate provider reports
// a change, and never again.
type onFirstChange struct {
	once  sync.Once
	start func()
}

func (o *onFirstChange) Enqueue() { o.once.Do(o.start) }
