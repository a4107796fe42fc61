package conversion

import (
	"bytes"
	"context"
	"crypto/x509"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apiextensionsfake "k8s.io/apiextensions-apiserver/pkg/client/clientset/clientset/fake"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes/fake"
	certutil "k8s.io/client-go/util/cert"
	clocktesting "k8s.io/utils/clock/testing"
)

const testURL = "https://127.0.0.1:9443/convert"

type certsFixture struct {
	t     *testing.T
	ctx   context.Context
	kube  *fake.Clientset
	crds  *apiextensionsfake.Clientset
	clock *clocktesting.FakeClock
	certs *Certificates
}

func newCertsFixture(t *testing.T) *certsFixture {
	t.Helper()
	return newCertsFixtureWith(t, testURL, nil)
}

// newCertsFixtureWith serves the webhook at url, or behind the Service
// memcached-operator/memcached-operator-webhook if url is empty, and
// starts from a CRD with conversion conv.
func newCertsFixtureWith(t *testing.T, url string, conv *apiextensionsv1.CustomResourceConversion) *certsFixture {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	f := &certsFixture{
		t: t, ctx: ctx,
		kube: fake.NewClientset(),
		crds: apiextensionsfake.NewClientset(&apiextensionsv1.CustomResourceDefinition{
			ObjectMeta: metav1.ObjectMeta{Name: "memcacheds.cache.kubelite.io"},
			Spec:       apiextensionsv1.CustomResourceDefinitionSpec{Conversion: conv},
		}),
		clock: clocktesting.NewFakeClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)),
	}
	var err error
	f.certs, err = NewCertificates(f.kube, f.crds, CertConfig{
		Namespace: "memcached-operator", SecretName: "webhook-cert", CRDName: "memcacheds.cache.kubelite.io",
		Service: "memcached-operator-webhook", URL: url, CAValidity: 90 * 24 * time.Hour, CertValidity: 30 * 24 * time.Hour,
	}, f.clock)
	if err != nil {
		t.Fatal(err)
	}
	f.certs.Start(ctx)
	return f
}

// sync runs one sync once the informer has seen the Secret as it is now,
// and returns the writes it sent and when it wants to run again. It
// compares the cached Secret with the stored one as a whole: the fake
// clientset leaves resourceVersion empty, so equal resourceVersions would
// not mean the informer caught up, and a sync from a stale cache would
// redo the previous sync's work (a second CA, say) where the apiserver
// would refuse its update with a conflict but the fake takes it.
func (f *certsFixture) sync() (int, time.Duration) {
	f.t.Helper()
	secret, err := f.kube.CoreV1().Secrets("memcached-operator").Get(f.ctx, "webhook-cert", metav1.GetOptions{})
	if err == nil {
		err = wait.PollUntilContextTimeout(f.ctx, time.Millisecond, 5*time.Second, true, func(context.Context) (bool, error) {
			cached, err := f.certs.secrets.Secrets("memcached-operator").Get("webhook-cert")
			return err == nil && apiequality.Semantic.DeepEqual(cached, secret), nil
		})
		if err != nil {
			f.t.Fatal("the informer did not catch up")
		}
	}
	before := writes(f.kube.Actions()) + writes(f.crds.Actions())
	next, _, err := f.certs.sync(f.ctx)
	if err != nil {
		f.t.Fatal(err)
	}
	return writes(f.kube.Actions()) + writes(f.crds.Actions()) - before, next
}

func writes[T interface{ GetVerb() string }](actions []T) int {
	n := 0
	for _, a := range actions {
		if v := a.GetVerb(); v != "get" && v != "list" && v != "watch" {
			n++
		}
	}
	return n
}

// state returns the serving leaf and the bundle the CRD trusts.
func (f *certsFixture) state() (*x509.Certificate, []byte, *corev1.Secret) {
	f.t.Helper()
	secret, err := f.kube.CoreV1().Secrets("memcached-operator").Get(f.ctx, "webhook-cert", metav1.GetOptions{})
	if err != nil {
		f.t.Fatal(err)
	}
	crd, err := f.crds.ApiextensionsV1().CustomResourceDefinitions().Get(f.ctx, "memcacheds.cache.kubelite.io", metav1.GetOptions{})
	if err != nil {
		f.t.Fatal(err)
	}
	conv := crd.Spec.Conversion
	if conv == nil || conv.Strategy != apiextensionsv1.WebhookConverter || conv.Webhook.ClientConfig.URL == nil || *conv.Webhook.ClientConfig.URL != testURL {
		f.t.Fatalf("CRD conversion = %+v", conv)
	}
	leaf, err := certutil.ParseCertsPEM(secret.Data[corev1.TLSCertKey])
	if err != nil {
		f.t.Fatal(err)
	}
	return leaf[0], conv.Webhook.ClientConfig.CABundle, secret
}

// trustedNow fails unless the served certificate verifies against the
// CRD's bundle at the fake clock's time.
func (f *certsFixture) trustedNow(when string) {
	f.t.Helper()
	_, bundle, _ := f.state()
	f.trustedBy(bundle, when)
}

// trustedBy fails unless the served certificate verifies against bundle at
// the fake clock's time.
func (f *certsFixture) trustedBy(bundle []byte, when string) {
	f.t.Helper()
	leaf, _, _ := f.state()
	roots, err := certutil.ParseCertsPEM(bundle)
	if err != nil {
		f.t.Fatal(err)
	}
	pool := x509.NewCertPool()
	for _, r := range roots {
		pool.AddCert(r)
	}
	if _, err := leaf.Verify(x509.VerifyOptions{Roots: pool, CurrentTime: f.clock.Now(), DNSName: "127.0.0.1"}); err != nil {
		f.t.Fatalf("%s: the served certificate is not trusted by the CRD: %v", when, err)
	}
}

func TestCertificatesCreateThenStayQuiet(t *testing.T) {
	f := newCertsFixture(t)
	if n, _ := f.sync(); n != 2 {
		t.Errorf("first sync: %d writes, want 2 (create the Secret, patch the CRD)", n)
	}
	f.trustedNow("after creation")
	leaf, _, secret := f.state()
	if secret.Type != corev1.SecretTypeTLS || len(leaf.IPAddresses) != 1 || leaf.IPAddresses[0].String() != "127.0.0.1" {
		t.Errorf("secret type %s, certificate IPs %v", secret.Type, leaf.IPAddresses)
	}
	if n, next := f.sync(); n != 0 || next != recheckInterval {
		t.Errorf("steady state: %d writes, next check in %s; want 0 and %s", n, next, recheckInterval)
	}
	f.waitServing(secret.Data[corev1.TLSCertKey], "the provider serves the Secret's certificate")
}

// waitServing waits until the replica serves cert. The informer fills its
// cache before it runs the handler that loads the certificate, so a cache
// that has caught up (sync) does not mean the replica serves it yet.
func (f *certsFixture) waitServing(cert []byte, what string) {
	f.t.Helper()
	err := wait.PollUntilContextTimeout(f.ctx, time.Millisecond, 5*time.Second, true, func(context.Context) (bool, error) {
		served, _ := f.certs.CurrentCertKeyContent()
		return bytes.Equal(served, cert), nil
	})
	if err != nil {
		f.t.Fatalf("%s: not within 5s", what)
	}
}

// TestCertificatesRotateWithoutAGap walks the fake clock through three CA
// lifetimes in uneven steps, syncing when asked, and checks after every
// sync that the served certificate is trusted by the bundle the CRD had
// before the sync (the apiserver takes the CRD's new bundle into use only
// some time after the patch, while replicas serve a new certificate at
// once), that
// the serving certificate and the CA were both renewed, and that the
// bundle never grows beyond the CAs still valid.
func TestCertificatesRotateWithoutAGap(t *testing.T) {
	f := newCertsFixture(t)
	f.sync()
	firstLeaf, firstBundle, _ := f.state()
	end := f.clock.Now().Add(3 * 90 * 24 * time.Hour)
	leaves, cas := map[string]bool{}, map[string]bool{}
	for step := 0; f.clock.Now().Before(end); step++ {
		_, before, _ := f.state()
		_, next := f.sync()
		// The Secret's own update event syncs again at once.
		f.sync()
		f.trustedBy(before, f.clock.Now().Format(time.RFC3339))
		leaf, bundle, _ := f.state()
		leaves[leaf.SerialNumber.String()] = true
		roots, _ := certutil.ParseCertsPEM(bundle)
		for _, r := range roots {
			cas[r.SerialNumber.String()] = true
			if !f.clock.Now().Before(r.NotAfter) {
				t.Fatalf("expired CA %s still in the bundle at %s", r.Subject.CommonName, f.clock.Now())
			}
		}
		if len(roots) > 2 {
			t.Fatalf("%d CAs in the bundle", len(roots))
		}
		// Sometimes wake when asked, sometimes late, as a busy leader would,
		// and sometimes very late, as after an outage of every replica, so
		// that the CA and the serving certificate fall due together.
		switch step % 5 {
		case 2:
			next += 7 * time.Hour
		case 4:
			next += 12 * 24 * time.Hour
		}
		f.clock.Step(next)
	}
	if len(leaves) < 6 || len(cas) < 3 {
		t.Errorf("over three CA lifetimes: %d serving certificates, %d CAs; want at least 6 and 3", len(leaves), len(cas))
	}
	if leaf, bundle, _ := f.state(); leaf.SerialNumber.Cmp(firstLeaf.SerialNumber) == 0 || bytes.Equal(bundle, firstBundle) {
		t.Errorf("nothing rotated")
	}
}

// TestCertificatesRepairTheCRD re-applies a CRD without the bundle, as a
// user re-applying the manifest would, and expects it back on the next
// sync.
func TestCertificatesRepairTheCRD(t *testing.T) {
	f := newCertsFixture(t)
	f.sync()
	crd, _ := f.crds.ApiextensionsV1().CustomResourceDefinitions().Get(f.ctx, "memcacheds.cache.kubelite.io", metav1.GetOptions{})
	crd.Spec.Conversion.Webhook.ClientConfig.CABundle = nil
	if _, err := f.crds.ApiextensionsV1().CustomResourceDefinitions().Update(f.ctx, crd, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	if n, _ := f.sync(); n != 1 {
		t.Errorf("repair: %d writes, want 1", n)
	}
	f.trustedNow("after the repair")
}

// TestCertificatesBootstrapByEveryReplica starts two replicas against an
// empty cluster at once, as a rollout does before anyone leads: both
// bootstrap, one Secret results, both serve its certificate, and the CRD
// trusts it.
func TestCertificatesBootstrapByEveryReplica(t *testing.T) {
	f := newCertsFixture(t)
	second, err := NewCertificates(f.kube, f.crds, f.certs.cfg, f.clock)
	if err != nil {
		t.Fatal(err)
	}
	second.Start(f.ctx)
	ctx, cancel := context.WithTimeout(f.ctx, 30*time.Second)
	defer cancel()
	done := make(chan struct{}, 2)
	for _, c := range []*Certificates{f.certs, second} {
		go func() {
			c.Bootstrap(ctx)
			done <- struct{}{}
		}()
	}
	<-done
	<-done
	if ctx.Err() != nil {
		t.Fatal("bootstrap did not finish")
	}
	f.trustedNow("after both replicas bootstrapped")
	_, _, secret := f.state()
	for i, c := range []*Certificates{f.certs, second} {
		err := wait.PollUntilContextTimeout(ctx, 10*time.Millisecond, 5*time.Second, true, func(context.Context) (bool, error) {
			served, _ := c.CurrentCertKeyContent()
			return bytes.Equal(served, secret.Data[corev1.TLSCertKey]), nil
		})
		if err != nil {
			t.Errorf("replica %d does not serve the Secret's certificate", i)
		}
	}
}

// verifies fails unless leaf verifies against bundle at the fake clock's
// time.
func (f *certsFixture) verifies(leaf *x509.Certificate, bundle []byte, when string) {
	f.t.Helper()
	roots, err := certutil.ParseCertsPEM(bundle)
	if err != nil {
		f.t.Fatalf("%s: %v", when, err)
	}
	pool := x509.NewCertPool()
	for _, r := range roots {
		pool.AddCert(r)
	}
	if _, err := leaf.Verify(x509.VerifyOptions{Roots: pool, CurrentTime: f.clock.Now(), DNSName: "127.0.0.1"}); err != nil {
		f.t.Fatalf("%s: the certificate is not trusted by the bundle: %v", when, err)
	}
}

// TestCertificatesSecretDeleted deletes the Secret, CA key and all: the
// replicas keep serving the certificate they loaded, so the new bundle
// keeps trusting its CA, and the new CA signs a serving certificate only
// once the CRD has trusted it for trustDelay.
func TestCertificatesSecretDeleted(t *testing.T) {
	f := newCertsFixture(t)
	f.sync()
	served, _, _ := f.state()
	// What the replica keeps serving below is what it served before.
	f.waitServing(pemCert(served), "the replica serves the first certificate")
	if err := f.kube.CoreV1().Secrets("memcached-operator").Delete(f.ctx, "webhook-cert", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	err := wait.PollUntilContextTimeout(f.ctx, time.Millisecond, 5*time.Second, true, func(context.Context) (bool, error) {
		_, err := f.certs.secrets.Secrets("memcached-operator").Get("webhook-cert")
		return apierrors.IsNotFound(err), nil
	})
	if err != nil {
		t.Fatal("the informer did not see the deletion")
	}

	if n, next := f.sync(); n != 2 || next != trustDelay {
		t.Errorf("after the deletion: %d writes, next check in %s; want 2 (create the Secret, patch the CRD) and %s", n, next, trustDelay)
	}
	secret, err := f.kube.CoreV1().Secrets("memcached-operator").Get(f.ctx, "webhook-cert", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if len(secret.Data[corev1.TLSCertKey]) != 0 {
		t.Errorf("a serving certificate from the new CA before the CRD trusts it")
	}
	crd, err := f.crds.ApiextensionsV1().CustomResourceDefinitions().Get(f.ctx, "memcacheds.cache.kubelite.io", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	f.verifies(served, crd.Spec.Conversion.Webhook.ClientConfig.CABundle, "while the new CA waits")
	if roots, _ := certutil.ParseCertsPEM(crd.Spec.Conversion.Webhook.ClientConfig.CABundle); len(roots) != 2 {
		t.Errorf("%d CAs in the bundle, want the new one and the one that signed what is served", len(roots))
	}
	if cert, _ := f.certs.CurrentCertKeyContent(); !bytes.Equal(cert, pemCert(served)) {
		t.Errorf("the replica stopped serving the certificate it had")
	}

	f.clock.Step(trustDelay)
	before := crd.Spec.Conversion.Webhook.ClientConfig.CABundle
	if n, _ := f.sync(); n != 1 {
		t.Errorf("once the CRD trusts the new CA: %d writes, want 1 (the serving certificate)", n)
	}
	f.trustedBy(before, "the serving certificate of the new CA")
	if leaf, _, _ := f.state(); leaf.Equal(served) {
		t.Errorf("no new serving certificate")
	}
}

// TestCertificatesClaimOnlyWhatIsTheirs starts from CRDs whose conversion
// is missing, unclaimed, this webhook's or another install's: the webhook
// writes the first three, and leaves another install's alone while it
// still creates its own Secret and serving certificate. It syncs twice,
// trustDelay apart: a CRD of this webhook's that trusts some other CA
// gets a serving certificate only once it has trusted the new one.
func TestCertificatesClaimOnlyWhatIsTheirs(t *testing.T) {
	otherBundle, _, err := certutil.GenerateSelfSignedCertKey("other-ca", nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	service := func(ns, name string, port int32, bundle []byte) *apiextensionsv1.CustomResourceConversion {
		path := "/convert"
		return &apiextensionsv1.CustomResourceConversion{Strategy: apiextensionsv1.WebhookConverter, Webhook: &apiextensionsv1.WebhookConversion{
			ClientConfig:             &apiextensionsv1.WebhookClientConfig{CABundle: bundle, Service: &apiextensionsv1.ServiceReference{Namespace: ns, Name: name, Port: &port, Path: &path}},
			ConversionReviewVersions: []string{"v1"},
		}}
	}
	url := func(u string, bundle []byte) *apiextensionsv1.CustomResourceConversion {
		return &apiextensionsv1.CustomResourceConversion{Strategy: apiextensionsv1.WebhookConverter, Webhook: &apiextensionsv1.WebhookConversion{
			ClientConfig:             &apiextensionsv1.WebhookClientConfig{CABundle: bundle, URL: &u},
			ConversionReviewVersions: []string{"v1"},
		}}
	}
	for _, tc := range []struct {
		name  string
		url   string // Empty: the webhook is behind its Service.
		conv  *apiextensionsv1.CustomResourceConversion
		claim bool
	}{
		{name: "no conversion", url: testURL, claim: true},
		{name: "strategy None", conv: &apiextensionsv1.CustomResourceConversion{Strategy: apiextensionsv1.NoneConverter}, claim: true},
		{name: "the shipped CRD: the Service without a bundle", conv: service("memcached-operator", "memcached-operator-webhook", 443, nil), claim: true},
		{name: "another Service without a bundle", url: testURL, conv: service("memcached", "memcached-operator-webhook", 443, nil), claim: true},
		{name: "this Service on another port, with a bundle", conv: service("memcached-operator", "memcached-operator-webhook", 8443, otherBundle), claim: true},
		{name: "this URL with a bundle", url: testURL, conv: url(testURL, otherBundle), claim: true},
		{name: "another install's Service", conv: service("memcached", "memcached-operator-webhook", 443, otherBundle)},
		{name: "another install's URL", url: testURL, conv: url("https://192.0.2.10:9443/convert", otherBundle)},
		{name: "a URL while this webhook is behind its Service", conv: url(testURL, otherBundle)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newCertsFixtureWith(t, tc.url, tc.conv)
			f.sync()
			f.clock.Step(trustDelay)
			f.sync()
			secret, err := f.kube.CoreV1().Secrets("memcached-operator").Get(f.ctx, "webhook-cert", metav1.GetOptions{})
			if err != nil || len(secret.Data[corev1.TLSCertKey]) == 0 {
				t.Fatalf("no serving certificate in the Secret: %v", err)
			}
			crd, err := f.crds.ApiextensionsV1().CustomResourceDefinitions().Get(f.ctx, "memcacheds.cache.kubelite.io", metav1.GetOptions{})
			if err != nil {
				t.Fatal(err)
			}
			got := crd.Spec.Conversion
			if want := f.certs.conversion(secret.Data[keyCACert]); tc.claim && !conversionEqual(got, want) {
				t.Errorf("conversion points at %s, want this webhook's %s with its bundle", conversionTarget(got), conversionTarget(want))
			}
			if !tc.claim && !apiequality.Semantic.DeepEqual(got, tc.conv) {
				t.Errorf("another install's conversion (%s) was changed to point at %s", conversionTarget(tc.conv), conversionTarget(got))
			}
			if n, _ := f.sync(); n != 0 {
				t.Errorf("third sync: %d writes, want 0", n)
			}
		})
	}
}
