package main

import (
	"context"
	"fmt"
	"path/filepath"

	corev1 "k8s.io/api/core/v1"
	apiextensionsclient "k8s.io/apiextensions-apiserver/pkg/client/clientset/clientset"
	"k8s.io/apiserver/pkg/server/dynamiccertificates"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/clock"

	cachev1beta1 "github.com/kubelite/memcached-operator/pkg/apis/cache/v1beta1"
	"github.com/kubelite/memcached-operator/pkg/conversion"
	"github.com/kubelite/memcached-operator/pkg/serving"
)

// crdName is the CRD the conversion webhook serves.
const crdName = "memcacheds." + cachev1beta1.GroupName

// maxWebhookConns bounds the webhook's open connections, and
// maxWebhookStreams the reviews in flight on each over HTTP/2. Each
// connection and each review costs what no review budget counts
// (serving.Limits: at most 39 MiB at these two), and anyone who can reach
// the port may open them. The apiserver needs one connection per 4 reviews
// in flight, and opens another when it needs more: 128 connections carry
// 512 reviews at once, more than the review budget admits of any but the
// smallest. Waiting connections queue in the kernel's backlog; an idle one
// is closed after the server's read timeout.
const (
	maxWebhookConns   = 128
	maxWebhookStreams = 4
)

// webhook is this replica's conversion webhook: the listener, which every
// replica runs, and the certificates, which every replica puts in place
// if they are missing (Certificates.Bootstrap) and only the leader renews.
type webhook struct {
	ln *serving.Listener
	// certs is nil with --webhook-cert-dir, where someone else (cert-manager)
	// provides the certificate and the CRD's CA bundle.
	certs *conversion.Certificates
}

// startWebhook serves conversion on --webhook-bind-address. The certificate
// comes from --webhook-cert-dir, or from the Secret the leader keeps; the
// Secret is watched with background, which outlives the drain.
func startWebhook(ctx, background context.Context, opts *options, kube kubernetes.Interface, crds apiextensionsclient.Interface) (*webhook, error) {
	w := &webhook{}
	if opts.webhookBindAddress == "0" || opts.webhookBindAddress == "" {
		return w, nil
	}
	var cert dynamiccertificates.CertKeyContentProvider
	if opts.webhookCertDir != "" {
		var err error
		cert, err = serving.ServingCertFromFiles("webhook",
			filepath.Join(opts.webhookCertDir, corev1.TLSCertKey), filepath.Join(opts.webhookCertDir, corev1.TLSPrivateKeyKey))
		if err != nil {
			return nil, fmt.Errorf("webhook certificate: %w", err)
		}
	} else {
		certs, err := conversion.NewCertificates(kube, crds, conversion.CertConfig{
			Namespace:    opts.webhookNamespace,
			SecretName:   opts.webhookSecret,
			CRDName:      crdName,
			Service:      opts.webhookService,
			URL:          opts.webhookURL,
			CAValidity:   opts.webhookCAValidity,
			CertValidity: opts.webhookCertValidity,
		}, clock.RealClock{})
		if err != nil {
			return nil, err
		}
		certs.Start(background)
		go certs.Bootstrap(background)
		w.certs, cert = certs, certs
	}
	ln, err := serving.ListenTLS(ctx, "webhook", opts.webhookBindAddress, conversion.Handler(), cert,
		serving.Limits{Conns: maxWebhookConns, Streams: maxWebhookStreams})
	if err != nil {
		return nil, err
	}
	w.ln = ln
	return w, nil
}

// manage keeps the certificates and the CRD's conversion settings right
// until ctx ends; the leader calls it.
func (w *webhook) manage(ctx context.Context) {
	if w.certs != nil {
		go w.certs.Manage(ctx)
	}
}

// shutdown stops the listener.
func (w *webhook) shutdown(ctx context.Context) { w.ln.Shutdown(ctx) }
