package conversion

import (
	"bytes"
	"context"
	"crypto/x509"
	"encoding/json"
	"fmt"
	"math"
	"net"
	"net/url"
	"slices"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apiextensionsclient "k8s.io/apiextensions-apiserver/pkg/client/clientset/clientset"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/types"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/apiserver/pkg/server/dynamiccertificates"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"
	certutil "k8s.io/client-go/util/cert"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"
)

// recheckInterval bounds how long a CRD whose conversion settings someone
// else changed (a re-applied manifest without the CA bundle, say) stays
// wrong: the settings are read again at least this often.
const recheckInterval = 10 * time.Minute

// trustDelay is how long a serving certificate from a new CA waits after
// the CA joined the bundle and the CRD trusts it: the apiserver rebuilds
// its webhook client from the CRD asynchronously.
const trustDelay = 5 * time.Second

// caSinceAnnotation records on the Secret when the newest CA joined the
// bundle, so that the trust delay holds across syncs and leaders.
const caSinceAnnotation = "cache.kubelite.io/newest-ca-since"

// CertConfig says where the webhook's certificate lives and how the
// apiserver reaches the webhook.
type CertConfig struct {
	// Namespace and SecretName name the Secret that holds the CA and the
	// serving certificate; the operator creates it.
	Namespace, SecretName string
	// CRDName is the CRD whose spec.conversion points at the webhook.
	CRDName string
	// Service is the in-cluster Service, in Namespace, that fronts the
	// webhook on port 443. It is used when URL is empty.
	Service string
	// URL is where the apiserver calls the webhook when the operator runs
	// outside the cluster, for example https://192.0.2.10:9443/convert.
	URL string
	// CAValidity and CertValidity are the lifetimes of the CA and of the
	// serving certificate; each is renewed after two thirds of it.
	CAValidity, CertValidity time.Duration
}

// names are the DNS names and IPs the serving certificate must cover.
func (c CertConfig) names() ([]string, []net.IP, error) {
	if c.URL == "" {
		svc := c.Service + "." + c.Namespace + ".svc"
		return []string{svc, svc + ".cluster.local"}, nil, nil
	}
	u, err := url.Parse(c.URL)
	if err != nil {
		return nil, nil, fmt.Errorf("webhook URL %q: %w", c.URL, err)
	}
	if u.Scheme != "https" || u.Hostname() == "" {
		return nil, nil, fmt.Errorf("webhook URL %q: want https://host[:port]/path", c.URL)
	}
	if ip := net.ParseIP(u.Hostname()); ip != nil {
		return nil, []net.IP{ip}, nil
	}
	return []string{u.Hostname()}, nil, nil
}

// Certificates keeps the conversion webhook's TLS in order. Every replica
// serves the certificate from the Secret (it is a
// dynamiccertificates.CertKeyContentProvider, so a renewed certificate is
// served without a restart), and keeps serving the last one it loaded if
// the Secret goes. Every replica runs Bootstrap, which creates the Secret
// and points the CRD's spec.conversion at the webhook with the CA bundle.
// One replica, the leader, also runs Manage: it renews the serving
// certificate and the CA after two thirds of their lives and keeps the CRD
// right. A new CA joins the bundle before it signs anything, and an old one
// leaves it only when it has expired, so the apiserver trusts every
// certificate a replica may be serving.
//
// Both write the CRD's conversion only while it is this webhook's to
// write (claims): while it names no webhook, or one without a CA bundle
// (the shipped CRD names the Service but cannot carry the bundle), or
// already names this webhook. A CRD that names another webhook with a
// bundle belongs to another install, or to cert-manager: redirecting it
// would send the whole cluster's conversion here, and the other install
// would send it back at its next sync. It is left alone and reported in
// the log.
type Certificates struct {
	cfg   CertConfig
	kube  kubernetes.Interface
	crds  apiextensionsclient.Interface
	clock clock.Clock

	factory informers.SharedInformerFactory
	secrets corelisters.SecretLister
	synced  cache.InformerSynced
	queue   workqueue.TypedRateLimitingInterface[string]

	// bootstrapped is closed once Bootstrap has succeeded; Manage waits for
	// it, so that the two never race on this replica.
	bootstrapped chan struct{}
	// elsewhere is the other webhook the CRD names, as last reported, so
	// that a CRD left alone is reported once and not at every sync. Only
	// sync uses it, which Bootstrap and Manage never run at once.
	elsewhere string

	mu        sync.Mutex
	certPEM   []byte
	keyPEM    []byte
	listeners []dynamiccertificates.Listener
}

var _ dynamiccertificates.CertKeyContentProvider = &Certificates{}

// NewCertificates watches the one Secret cfg names.
func NewCertificates(kube kubernetes.Interface, crds apiextensionsclient.Interface, cfg CertConfig, clk clock.Clock) (*Certificates, error) {
	if _, _, err := cfg.names(); err != nil {
		return nil, err
	}
	factory := informers.NewSharedInformerFactoryWithOptions(kube, 0, informers.WithNamespace(cfg.Namespace),
		informers.WithTweakListOptions(func(o *metav1.ListOptions) {
			o.FieldSelector = fields.OneTermEqualSelector("metadata.name", cfg.SecretName).String()
		}))
	informer := factory.Core().V1().Secrets()
	c := &Certificates{
		cfg: cfg, kube: kube, crds: crds, clock: clk,
		factory:      factory,
		bootstrapped: make(chan struct{}),
		secrets:      informer.Lister(),
		synced:       informer.Informer().HasSynced,
		queue: workqueue.NewTypedRateLimitingQueueWithConfig(workqueue.DefaultTypedControllerRateLimiter[string](),
			workqueue.TypedRateLimitingQueueConfig[string]{Name: "webhook-certificates"}),
	}
	_, err := informer.Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    func(obj any) { c.load(obj) },
		UpdateFunc: func(_, obj any) { c.load(obj) },
		DeleteFunc: func(any) { c.queue.Add(cfg.SecretName) },
	})
	if err != nil {
		return nil, err
	}
	return c, nil
}

// Start watches the Secret until ctx ends; every replica calls it.
func (c *Certificates) Start(ctx context.Context) {
	c.factory.Start(ctx.Done())
	go func() {
		<-ctx.Done()
		c.queue.ShutDown()
		c.factory.Shutdown()
	}()
}

// load serves the pair of the Secret and asks Manage to check it.
func (c *Certificates) load(obj any) {
	secret, ok := obj.(*corev1.Secret)
	if !ok {
		return
	}
	c.queue.Add(c.cfg.SecretName)
	certPEM, keyPEM := secret.Data[corev1.TLSCertKey], secret.Data[corev1.TLSPrivateKeyKey]
	if len(certPEM) == 0 || len(keyPEM) == 0 {
		return
	}
	c.mu.Lock()
	changed := !bytes.Equal(certPEM, c.certPEM) || !bytes.Equal(keyPEM, c.keyPEM)
	c.certPEM, c.keyPEM = certPEM, keyPEM
	listeners := c.listeners
	c.mu.Unlock()
	if changed {
		for _, l := range listeners {
			l.Enqueue()
		}
	}
}

// Name identifies the provider in the serving certificate controller's logs.
func (c *Certificates) Name() string { return c.cfg.Namespace + "/" + c.cfg.SecretName }

// CurrentCertKeyContent is the serving pair of the Secret, or nothing yet.
func (c *Certificates) CurrentCertKeyContent() ([]byte, []byte) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.certPEM, c.keyPEM
}

// AddListener is told when the serving pair changes.
func (c *Certificates) AddListener(l dynamiccertificates.Listener) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.listeners = append(c.listeners, l)
}

// Bootstrap makes sure, on every replica and before any leader exists,
// that the Secret holds a serving certificate and that the CRD, if it is
// this webhook's, trusts it. During an
// upgrade the new release's replicas cannot become ready, and so cannot be
// elected while the old release still leads, until their informers can
// list the stored objects, which needs conversion, which needs a
// certificate. It runs syncs with backoff until one succeeds; replicas
// racing at start meet on the Secret's create and update, which only one
// of them wins, and the others retry against what it wrote.
func (c *Certificates) Bootstrap(ctx context.Context) {
	logger := klog.FromContext(ctx).WithValues("secret", klog.KRef(c.cfg.Namespace, c.cfg.SecretName))
	ctx = klog.NewContext(ctx, logger)
	if !cache.WaitForNamedCacheSync("webhook-certificates", ctx.Done(), c.synced) {
		return
	}
	backoff := wait.Backoff{Duration: 200 * time.Millisecond, Factor: 2, Jitter: 0.1, Steps: math.MaxInt32, Cap: 30 * time.Second}
	_ = wait.ExponentialBackoffWithContext(ctx, backoff, func(ctx context.Context) (bool, error) {
		_, serving, err := c.sync(ctx)
		if err != nil {
			logger.Info("The webhook's certificate is not in place yet; retrying", "err", err)
			return false, nil
		}
		if !serving {
			logger.V(2).Info("Waiting for the CRD to trust the new CA before it signs a serving certificate")
			return false, nil
		}
		close(c.bootstrapped)
		return true, nil
	})
}

// Manage keeps the Secret and the CRD right until ctx ends, renewing what
// falls due, once Bootstrap has succeeded. Only one replica runs it at a
// time: the leader.
func (c *Certificates) Manage(ctx context.Context) {
	logger := klog.FromContext(ctx).WithValues("secret", klog.KRef(c.cfg.Namespace, c.cfg.SecretName))
	ctx = klog.NewContext(ctx, logger)
	select {
	case <-c.bootstrapped:
	case <-ctx.Done():
		return
	}
	c.queue.Add(c.cfg.SecretName)
	go func() {
		<-ctx.Done()
		c.queue.ShutDown()
	}()
	for {
		key, quit := c.queue.Get()
		if quit {
			return
		}
		next, _, err := c.sync(ctx)
		switch {
		case err != nil && ctx.Err() == nil:
			utilruntime.HandleErrorWithContext(ctx, err, "Keeping the conversion webhook's certificate")
			c.queue.AddRateLimited(key)
		default:
			c.queue.Forget(key)
			c.queue.AddAfter(key, next)
		}
		c.queue.Done(key)
	}
}

// sync brings the Secret and, if it is this webhook's, the CRD in line.
// It returns when to look again and whether the Secret holds a usable
// serving certificate.
func (c *Certificates) sync(ctx context.Context) (time.Duration, bool, error) {
	logger := klog.FromContext(ctx)
	now := c.clock.Now()
	crd, err := c.crds.ApiextensionsV1().CustomResourceDefinitions().Get(ctx, c.cfg.CRDName, metav1.GetOptions{})
	if err != nil {
		return 0, false, fmt.Errorf("reading CRD %s: %w", c.cfg.CRDName, err)
	}
	conv := crd.Spec.Conversion
	claimed := c.claims(conv)
	var trusted []byte
	if claimed && conv != nil && conv.Webhook != nil && conv.Webhook.ClientConfig != nil {
		trusted = conv.Webhook.ClientConfig.CABundle
	}
	bundle, due, serving, err := c.syncSecret(ctx, now, claimed, trusted)
	if err != nil {
		return 0, false, err
	}
	next := min(recheckInterval, max(time.Second, due.Sub(now)))
	if !claimed {
		if other := conversionTarget(conv); other != c.elsewhere {
			logger.Info("Leaving the CRD's conversion to another install's webhook", "crd", c.cfg.CRDName, "webhook", other)
			c.elsewhere = other
		}
		return next, serving, nil
	}
	c.elsewhere = ""
	patched, err := c.syncCRD(ctx, crd, bundle)
	if err != nil {
		return 0, false, err
	}
	if patched {
		next = min(next, trustDelay)
	}
	return next, serving, nil
}

// claims reports whether the CRD's conversion is this webhook's to write:
// it names no webhook, names one without a CA bundle, or names this one
// (its URL, or its Service whatever the port and path).
func (c *Certificates) claims(conv *apiextensionsv1.CustomResourceConversion) bool {
	if conv == nil || conv.Strategy != apiextensionsv1.WebhookConverter || conv.Webhook == nil || conv.Webhook.ClientConfig == nil {
		return true
	}
	cc := conv.Webhook.ClientConfig
	switch {
	case len(cc.CABundle) == 0:
		return true
	case c.cfg.URL != "":
		return cc.URL != nil && *cc.URL == c.cfg.URL
	default:
		return cc.Service != nil && cc.Service.Namespace == c.cfg.Namespace && cc.Service.Name == c.cfg.Service
	}
}

// conversionTarget names the webhook a CRD's conversion calls, for the log.
func conversionTarget(conv *apiextensionsv1.CustomResourceConversion) string {
	switch {
	case conv == nil || conv.Webhook == nil || conv.Webhook.ClientConfig == nil:
		return ""
	case conv.Webhook.ClientConfig.URL != nil:
		return *conv.Webhook.ClientConfig.URL
	case conv.Webhook.ClientConfig.Service != nil:
		return "service " + conv.Webhook.ClientConfig.Service.Namespace + "/" + conv.Webhook.ClientConfig.Service.Name
	}
	return ""
}

// syncSecret creates or renews what the Secret holds. claimed says whether
// the CRD's conversion is this webhook's, and trusted is then the CA
// bundle the CRD has now. It returns the CA bundle the CRD must have, when
// something in the Secret falls due, and whether the Secret holds a usable
// serving certificate.
//
// A Secret that is gone, or whose CA cannot be read, takes with it the CA
// that signed what every replica still serves (each keeps serving the
// certificate it loaded last). The CRD's bundle still names that CA, so
// the new bundle keeps it until it expires, and the new CA signs nothing
// until the CRD has trusted it for trustDelay, as after a renewal:
// replicas serve what the apiserver trusts throughout. Only a CRD that
// trusts no certificate at all, as on a first install, gets a serving
// certificate at once: nothing could be served that it trusts.
func (c *Certificates) syncSecret(ctx context.Context, now time.Time, claimed bool, trusted []byte) ([]byte, time.Time, bool, error) {
	logger := klog.FromContext(ctx)
	dnsNames, ips, _ := c.cfg.names()
	secret, err := c.secrets.Secrets(c.cfg.Namespace).Get(c.cfg.SecretName)
	if err != nil && !apierrors.IsNotFound(err) {
		return nil, time.Time{}, false, err
	}
	exists := err == nil
	data, annotations := map[string][]byte{}, map[string]string{}
	if exists {
		for k, v := range secret.Data {
			data[k] = v
		}
		for k, v := range secret.Annotations {
			annotations[k] = v
		}
	}

	// The CA: the newest signs, the older ones stay trusted until they
	// expire. caSince is when the newest joined the bundle.
	bundle := validCerts(data[keyCACert], now)
	caSince, _ := time.Parse(time.RFC3339, annotations[caSinceAnnotation])
	ca, err := parseAuthority(data[keyCACert], data[keyCAKey])
	if err != nil || !now.Before(renewAt(ca.cert)) || !now.Before(ca.cert.NotAfter) {
		if exists {
			logger.Info("Creating a new webhook CA", "reason", caReason(ca, err, now))
		}
		lost := !exists || err != nil
		if ca, err = newAuthority(now, c.cfg.CAValidity); err != nil {
			return nil, time.Time{}, false, err
		}
		bundle = append([]*x509.Certificate{ca.cert}, bundle...)
		if lost {
			bundle = appendMissing(bundle, validCAs(trusted, now))
		}
		keyPEM, err := ca.keyPEM()
		if err != nil {
			return nil, time.Time{}, false, err
		}
		data[keyCAKey] = keyPEM
		caSince = now
		annotations[caSinceAnnotation] = now.UTC().Format(time.RFC3339)
	}
	data[keyCACert] = encodeCerts(bundle)

	// The serving certificate: renewed from the newest CA when it is due,
	// unusable, or for other names. A certificate that is due but still
	// usable, or none while the CRD trusts some other CA, waits until the
	// CRD has trusted the newest CA for trustDelay, so that no replica
	// serves a certificate the apiserver does not yet trust. A CRD that is
	// not this webhook's sends nothing here, and nothing waits for it.
	due := renewAt(ca.cert)
	leaf := usableServingCert(data[corev1.TLSCertKey], data[corev1.TLSPrivateKeyKey], bundle, dnsNames, ips, now)
	trustedLongEnough := !claimed || (bytes.Contains(trusted, pemCert(ca.cert)) && !now.Before(caSince.Add(trustDelay)))
	serving := true
	switch {
	case leaf != nil && now.Before(renewAt(leaf)):
		due = minTime(due, renewAt(leaf))
	case !trustedLongEnough && (leaf != nil || len(validCAs(trusted, now)) > 0):
		serving = leaf != nil
		due = now.Add(trustDelay)
		if until := caSince.Add(trustDelay); until.After(now) {
			due = until
		}
		// A kubernetes.io/tls Secret must have both keys; empty ones are
		// not served, so replicas keep what they serve.
		for _, k := range []string{corev1.TLSCertKey, corev1.TLSPrivateKeyKey} {
			if _, ok := data[k]; !ok {
				data[k] = []byte{}
			}
		}
	default:
		certPEM, keyPEM, err := ca.issue(now, c.cfg.CertValidity, dnsNames, ips)
		if err != nil {
			return nil, time.Time{}, false, err
		}
		data[corev1.TLSCertKey], data[corev1.TLSPrivateKeyKey] = certPEM, keyPEM
		if exists {
			logger.Info("Renewing the webhook's serving certificate")
		}
		if leaf, err := certutil.ParseCertsPEM(certPEM); err == nil {
			due = minTime(due, renewAt(leaf[0]))
		}
	}
	for _, old := range bundle[1:] {
		due = minTime(due, old.NotAfter)
	}

	switch {
	case !exists:
		s := &corev1.Secret{
			ObjectMeta: metav1.ObjectMeta{Name: c.cfg.SecretName, Namespace: c.cfg.Namespace,
				Labels:      map[string]string{"app.kubernetes.io/name": "memcached-operator"},
				Annotations: annotations},
			Type: corev1.SecretTypeTLS,
			Data: data,
		}
		if _, err := c.kube.CoreV1().Secrets(c.cfg.Namespace).Create(ctx, s, metav1.CreateOptions{}); err != nil {
			return nil, time.Time{}, false, fmt.Errorf("creating the webhook certificate Secret: %w", err)
		}
		logger.Info("Created the webhook certificate Secret")
	case !dataEqual(secret.Data, data) || secret.Annotations[caSinceAnnotation] != annotations[caSinceAnnotation]:
		s := secret.DeepCopy()
		s.Data = data
		s.Annotations = annotations
		if _, err := c.kube.CoreV1().Secrets(c.cfg.Namespace).Update(ctx, s, metav1.UpdateOptions{}); err != nil {
			return nil, time.Time{}, false, fmt.Errorf("updating the webhook certificate Secret: %w", err)
		}
	}
	return data[keyCACert], due, serving, nil
}

// syncCRD points the CRD's conversion at the webhook with the bundle and
// reports whether it had to. It replaces spec.conversion as a whole, with
// a merge patch, only when it differs: sync calls it only for a CRD whose
// conversion this webhook claims, and then owns that block.
func (c *Certificates) syncCRD(ctx context.Context, crd *apiextensionsv1.CustomResourceDefinition, bundle []byte) (bool, error) {
	want := c.conversion(bundle)
	if conversionEqual(crd.Spec.Conversion, want) {
		return false, nil
	}
	// Explicit nulls clear what a merge patch would otherwise keep: a
	// service where a URL now goes, or the other way round.
	clientConfig := map[string]any{"caBundle": want.Webhook.ClientConfig.CABundle, "url": nil, "service": nil}
	if want.Webhook.ClientConfig.URL != nil {
		clientConfig["url"] = *want.Webhook.ClientConfig.URL
	} else {
		clientConfig["service"] = want.Webhook.ClientConfig.Service
	}
	// The resourceVersion makes the patch conditional: a patch computed from
	// an old read, by a leader on its way out say, fails with a conflict
	// instead of undoing a newer one.
	patch, err := json.Marshal(map[string]any{"metadata": map[string]any{"resourceVersion": crd.ResourceVersion}, "spec": map[string]any{"conversion": map[string]any{
		"strategy": want.Strategy,
		"webhook": map[string]any{
			"clientConfig":             clientConfig,
			"conversionReviewVersions": want.Webhook.ConversionReviewVersions,
		},
	}}})
	if err != nil {
		return false, err
	}
	if _, err := c.crds.ApiextensionsV1().CustomResourceDefinitions().Patch(ctx, c.cfg.CRDName, types.MergePatchType, patch, metav1.PatchOptions{}); err != nil {
		return false, fmt.Errorf("pointing CRD %s at the conversion webhook: %w", c.cfg.CRDName, err)
	}
	klog.FromContext(ctx).Info("Pointed the CRD at the conversion webhook", "crd", c.cfg.CRDName)
	return true, nil
}

// conversion is the CRD's spec.conversion the webhook needs.
func (c *Certificates) conversion(bundle []byte) *apiextensionsv1.CustomResourceConversion {
	cc := &apiextensionsv1.WebhookClientConfig{CABundle: bundle}
	if c.cfg.URL != "" {
		u := c.cfg.URL
		cc.URL = &u
	} else {
		path, port := Path, int32(443)
		cc.Service = &apiextensionsv1.ServiceReference{Namespace: c.cfg.Namespace, Name: c.cfg.Service, Path: &path, Port: &port}
	}
	return &apiextensionsv1.CustomResourceConversion{
		Strategy: apiextensionsv1.WebhookConverter,
		Webhook:  &apiextensionsv1.WebhookConversion{ClientConfig: cc, ConversionReviewVersions: []string{"v1"}},
	}
}

func conversionEqual(got, want *apiextensionsv1.CustomResourceConversion) bool {
	if got == nil || got.Strategy != want.Strategy || got.Webhook == nil || got.Webhook.ClientConfig == nil {
		return false
	}
	g, w := got.Webhook.ClientConfig, want.Webhook.ClientConfig
	if !bytes.Equal(g.CABundle, w.CABundle) || !equalPtr(g.URL, w.URL) || len(got.Webhook.ConversionReviewVersions) != 1 || got.Webhook.ConversionReviewVersions[0] != "v1" {
		return false
	}
	if (g.Service == nil) != (w.Service == nil) {
		return false
	}
	if g.Service == nil {
		return true
	}
	return g.Service.Namespace == w.Service.Namespace && g.Service.Name == w.Service.Name &&
		equalPtr(g.Service.Path, w.Service.Path) && equalPtr(g.Service.Port, w.Service.Port)
}

func equalPtr[T comparable](a, b *T) bool {
	if a == nil || b == nil {
		return a == b
	}
	return *a == *b
}

// validCerts parses a PEM bundle and keeps the certificates still valid
// at now; anything unreadable is dropped.
func validCerts(bundlePEM []byte, now time.Time) []*x509.Certificate {
	certs, err := certutil.ParseCertsPEM(bundlePEM)
	if err != nil {
		return nil
	}
	var valid []*x509.Certificate
	for _, cert := range certs {
		if now.Before(cert.NotAfter) {
			valid = append(valid, cert)
		}
	}
	return valid
}

// validCAs parses a PEM bundle and keeps the CA certificates still valid
// at now; anything unreadable is dropped.
func validCAs(bundlePEM []byte, now time.Time) []*x509.Certificate {
	var cas []*x509.Certificate
	for _, cert := range validCerts(bundlePEM, now) {
		if cert.IsCA {
			cas = append(cas, cert)
		}
	}
	return cas
}

// appendMissing appends to bundle the certificates of more it lacks.
func appendMissing(bundle, more []*x509.Certificate) []*x509.Certificate {
	for _, cert := range more {
		if !slices.ContainsFunc(bundle, cert.Equal) {
			bundle = append(bundle, cert)
		}
	}
	return bundle
}

func encodeCerts(certs []*x509.Certificate) []byte {
	var buf bytes.Buffer
	for _, cert := range certs {
		buf.Write(pemCert(cert))
	}
	return buf.Bytes()
}

func caReason(ca *authority, err error, now time.Time) string {
	switch {
	case err != nil:
		return err.Error()
	case !now.Before(ca.cert.NotAfter):
		return "expired"
	default:
		return "due for renewal"
	}
}

func dataEqual(a, b map[string][]byte) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if w, ok := b[k]; !ok || !bytes.Equal(v, w) {
			return false
		}
	}
	return true
}
