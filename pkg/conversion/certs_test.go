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
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	f := &certsFixture{
		t: t, ctx: ctx,
		kube: fake.NewClientset(),
		crds: apiextensionsfake.NewClientset(&apiextensionsv1.CustomResourceDefinition{
			ObjectMeta: metav1.ObjectMeta{Name: "memcacheds.cache.kubelite.io"},
		}),
		clock: clocktesting.NewFakeClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)),
	}
	var err error
	f.certs, err = NewCertificates(f.kube, f.crds, CertConfig{
		Namespace: "memcached-operator", SecretName: "webhook-cert", CRDName: "memcacheds.cache.kubelite.io",
		URL: testURL, CAValidity: 90 * 24 * time.Hour, CertValidity: 30 * 24 * time.Hour,
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
	next, err := f.certs.sync(f.ctx)
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
	served, _ := f.certs.CurrentCertKeyContent()
	if !bytes.Equal(served, secret.Data[corev1.TLSCertKey]) {
		t.Errorf("the provider does not serve the Secret's certificate")
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
