//go:build integration

package access

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/util/retry"
	"k8s.io/utils/ptr"

	cachev1beta1 "github.com/kubelite/memcached-operator/pkg/apis/cache/v1beta1"
	"github.com/kubelite/memcached-operator/pkg/resources"
	"github.com/kubelite/memcached-operator/test/integration/framework"
)

// restrictedNamespace is a namespace whose Pods the apiserver's Pod
// Security admission holds to the restricted profile.
func restrictedNamespace(t *testing.T) string {
	t.Helper()
	ctx := context.Background()
	ns := framework.NewNamespace(t)
	namespaces := framework.Kube().CoreV1().Namespaces()
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		n, err := namespaces.Get(ctx, ns, metav1.GetOptions{})
		if err != nil {
			return err
		}
		if n.Labels == nil {
			n.Labels = map[string]string{}
		}
		n.Labels["pod-security.kubernetes.io/enforce"] = "restricted"
		_, err = namespaces.Update(ctx, n, metav1.UpdateOptions{})
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	// The profile is enforced: a Pod without a security context is refused.
	_, err = framework.Kube().CoreV1().Pods(ns).Create(ctx, &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "unrestricted"},
		Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "memcached"}}},
	}, metav1.CreateOptions{})
	if !apierrors.IsForbidden(err) || !strings.Contains(err.Error(), "restricted") {
		t.Fatalf("a Pod without a security context in %s: %v, want the restricted profile's refusal", ns, err)
	}
	return ns
}

// TestIntegrationAuth follows a Memcached with spec.auth in a namespace
// that enforces the restricted Pod Security profile: the Deployment waits
// for the Secret with a condition that says why, a malformed auth file
// keeps it waiting with the line at fault, the fixed Secret releases it
// without an edit to the Memcached, and its Pods, which share their
// process namespace, are admitted. A rotation costs the operator nothing
// and rolls no Pod; a Secret broken later holds the running Deployment.
func TestIntegrationAuth(t *testing.T) {
	t.Parallel()
	ns := restrictedNamespace(t)
	op := framework.StartOperator(t, ns)
	ctx := context.Background()
	created := framework.CreateMemcached(t, ns, "cache", func(s *cachev1beta1.MemcachedSpec) {
		s.Replicas = ptr.To[int32](2)
		s.Auth = &cachev1beta1.Auth{SecretName: "cache-auth"}
	})

	waitBlockedBy(t, ns, "cache", cachev1beta1.ReasonAuthSecretNotFound, `Secret "cache-auth" named by spec.auth.secretName does not exist`)
	if _, err := framework.GetDeployment(ctx, ns, "cache"); !apierrors.IsNotFound(err) {
		t.Errorf("Deployment while the Secret is missing: %v, want none", err)
	}
	if _, err := framework.Kube().CoreV1().Services(ns).Get(ctx, "cache", metav1.GetOptions{}); err != nil {
		t.Errorf("the Service is not held back by the Secret: %v", err)
	}
	framework.WaitEvent(t, ns, "Memcached", "cache", corev1.EventTypeWarning, cachev1beta1.ReasonAuthSecretNotFound)

	// A malformed file, then fixed.
	secrets := framework.Kube().CoreV1().Secrets(ns)
	secret, err := secrets.Create(ctx, &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: "cache-auth"},
		StringData: map[string]string{resources.AuthSecretKey: "# the app\napp secret\n"},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	waitBlockedBy(t, ns, "cache", cachev1beta1.ReasonAuthSecretInvalid, "memcached cannot use: no ':' on line 2")
	secret.StringData = map[string]string{resources.AuthSecretKey: "# the app\napp:secret\n"}
	if _, err := secrets.Update(ctx, secret, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	mc := framework.WaitConverged(t, ns, "cache", metav1.ConditionTrue)
	if mc.Generation != created.Generation {
		t.Errorf("generation %d -> %d: the Secret alone must release the Deployment", created.Generation, mc.Generation)
	}

	// What the apiserver, restricted Pod Security included, admitted.
	pods, err := cachePods(ctx, ns, "cache")
	if err != nil {
		t.Fatal(err)
	}
	if len(pods) != 2 {
		t.Fatalf("%d Pods, want 2", len(pods))
	}
	for _, pod := range pods {
		var names, volumes []string
		for _, c := range pod.Spec.Containers {
			names = append(names, c.Name)
		}
		for _, v := range pod.Spec.Volumes {
			volumes = append(volumes, v.Name)
		}
		if !slices.Equal(names, []string{resources.MemcachedContainerName, resources.ReloaderContainerName}) {
			t.Errorf("Pod %s containers %v", pod.Name, names)
		}
		if !slices.Equal(volumes, []string{resources.AuthSecretVolumeName, resources.AuthVolumeName}) ||
			pod.Spec.Volumes[0].Secret == nil || pod.Spec.Volumes[0].Secret.SecretName != "cache-auth" ||
			pod.Spec.Volumes[1].EmptyDir == nil || pod.Spec.Volumes[1].EmptyDir.Medium != corev1.StorageMediumMemory {
			t.Errorf("Pod %s volumes %+v, want the Secret cache-auth and an in-memory emptyDir", pod.Name, pod.Spec.Volumes)
		}
		if !ptr.Deref(pod.Spec.ShareProcessNamespace, false) {
			t.Errorf("Pod %s does not share its process namespace: the reloader could not signal memcached", pod.Name)
		}
		mcd := pod.Spec.Containers[0]
		if i := slices.Index(mcd.Args, "-Y"); i < 0 || i+1 >= len(mcd.Args) || mcd.Args[i+1] != resources.AuthFilePath {
			t.Errorf("Pod %s memcached args %v, want -Y %s", pod.Name, mcd.Args, resources.AuthFilePath)
		}
		if len(mcd.Command) == 0 || mcd.Command[0] != "bash" {
			t.Errorf("Pod %s memcached command %q, want the bash wrapper", pod.Name, mcd.Command)
		}
	}

	// A rotation: new credentials, still valid. memcached reloads them in
	// the Pods; the operator has nothing to do.
	op.WaitQuiet(t)
	dep, err := framework.GetDeployment(ctx, ns, "cache")
	if err != nil {
		t.Fatal(err)
	}
	mark := len(op.Writes(t))
	secret, err = secrets.Get(ctx, "cache-auth", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	secret.StringData = map[string]string{resources.AuthSecretKey: "app:secret\napp2:other\n"}
	if secret, err = secrets.Update(ctx, secret, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	// The verdict does not change, so no event syncs the Memcached
	// (SecretKeysChanged); its resyncs do.
	op.WaitTwoResyncs(t, 1)
	if writes := op.Writes(t)[mark:]; len(writes) > 0 {
		t.Errorf("a rotation cost %d writes: %v", len(writes), writes)
	}
	if after, err := framework.GetDeployment(ctx, ns, "cache"); err != nil || after.Generation != dep.Generation {
		t.Errorf("the rotation changed the Deployment (generation %d -> %v, %v): it would roll the Pods and empty the cache", dep.Generation, after.Generation, err)
	}

	// Broken while running: the Deployment is held as it is.
	secret.StringData = map[string]string{resources.AuthSecretKey: strings.Repeat("u:p\n", 9)}
	if _, err := secrets.Update(ctx, secret, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	waitBlockedBy(t, ns, "cache", cachev1beta1.ReasonAuthSecretInvalid, "more than 8 entries")
	if after, err := framework.GetDeployment(ctx, ns, "cache"); err != nil || after.Generation != dep.Generation {
		t.Errorf("with the Secret broken the Deployment is %v (error %v), want it kept at generation %d", after, err, dep.Generation)
	}
	if err := secrets.Delete(ctx, "cache-auth", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	waitBlockedBy(t, ns, "cache", cachev1beta1.ReasonAuthSecretNotFound, "cache-auth")
	if _, err := secrets.Create(ctx, &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: "cache-auth"},
		StringData: map[string]string{resources.AuthSecretKey: "app:secret"},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	framework.WaitConverged(t, ns, "cache", metav1.ConditionTrue)

	// v1alpha1 has no words for spec.auth: an edit through it, converted
	// by the package's webhook, keeps it.
	alphas := framework.Memcacheds().CacheV1alpha1().Memcacheds(ns)
	err = retry.RetryOnConflict(retry.DefaultRetry, func() error {
		alpha, err := alphas.Get(ctx, "cache", metav1.GetOptions{})
		if err != nil {
			return err
		}
		alpha.Spec.Replicas = ptr.To[int32](3)
		_, err = alphas.Update(ctx, alpha, metav1.UpdateOptions{})
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	beta, err := framework.GetMemcached(ctx, ns, "cache")
	if err != nil {
		t.Fatal(err)
	}
	if beta.Spec.Auth == nil || beta.Spec.Auth.SecretName != "cache-auth" || ptr.Deref(beta.Spec.Replicas, 0) != 3 {
		t.Errorf("after an edit through v1alpha1, spec.auth %+v, replicas %v; want cache-auth kept and 3", beta.Spec.Auth, beta.Spec.Replicas)
	}
}

// TestIntegrationAuthSecretBeforeTheOperator starts the operator after the
// auth Secret and the Memcached exist, as after every restart or failover:
// its Secret informer then fills from a streaming list, which runs the
// cache's transform twice on each Secret, and the second run must not judge
// the verdict of the first as an auth file.
func TestIntegrationAuthSecretBeforeTheOperator(t *testing.T) {
	t.Parallel()
	ns := framework.NewNamespace(t)
	ctx := context.Background()
	if _, err := framework.Kube().CoreV1().Secrets(ns).Create(ctx, &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: "cache-auth"},
		StringData: map[string]string{resources.AuthSecretKey: "app:secret\n"},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	framework.CreateMemcached(t, ns, "cache", func(s *cachev1beta1.MemcachedSpec) {
		s.Auth = &cachev1beta1.Auth{SecretName: "cache-auth"}
	})
	framework.StartOperator(t, ns)
	mc := framework.WaitConverged(t, ns, "cache", metav1.ConditionTrue)
	if d := framework.Condition(mc, cachev1beta1.ConditionDegraded); d.Status != metav1.ConditionFalse {
		t.Errorf("Degraded %+v, want False: the operator misjudged a usable auth file it found at start", d)
	}
}

// TestIntegrationAuthRefused covers what the CRD refuses with spec.auth:
// the exporter, which cannot authenticate, and the memcached flags that
// would fight it.
func TestIntegrationAuthRefused(t *testing.T) {
	t.Parallel()
	ns := framework.NewNamespace(t)
	tests := []struct {
		name, spec, wantText string
	}{
		{name: "auth with the exporter", spec: `{"auth":{"secretName":"cache-auth"},"monitoring":{"exporter":{"enabled":true}}}`,
			wantText: "spec.auth: Forbidden: auth cannot be combined with monitoring.exporter.enabled: the memcached exporter cannot authenticate"},
		{name: "auth with -B", spec: `{"auth":{"secretName":"cache-auth"},"extraArgs":["-B","binary"]}`,
			wantText: "spec.extraArgs: Forbidden: extraArgs must not set -B or --protocol with auth"},
		{name: "auth with --protocol=", spec: `{"auth":{"secretName":"cache-auth"},"extraArgs":["--protocol=auto"]}`,
			wantText: "must not set -B or --protocol with auth"},
		{name: "extra -Y", spec: `{"extraArgs":["-Y","/tmp/auth"]}`, wantText: "must not set -Y or --auth-file; use spec.auth"},
		{name: "extra --auth-file=", spec: `{"extraArgs":["--auth-file=/tmp/auth"]}`, wantText: "use spec.auth"},
		{name: "Secret name with capitals", spec: `{"auth":{"secretName":"Cache_Auth"}}`, wantText: "spec.auth.secretName"},
		{name: "no Secret name", spec: `{"auth":{}}`, wantText: "spec.auth.secretName"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			body := fmt.Sprintf(`{"apiVersion":"cache.kubelite.io/v1beta1","kind":"Memcached","metadata":{"name":"bad"},"spec":%s}`, tt.spec)
			err := framework.Memcacheds().CacheV1beta1().RESTClient().Post().Namespace(ns).Resource("memcacheds").
				SetHeader("Content-Type", "application/json").Body([]byte(body)).Do(context.Background()).Error()
			if !apierrors.IsInvalid(err) {
				t.Fatalf("create error = %v, want Invalid", err)
			}
			if !strings.Contains(err.Error(), tt.wantText) {
				t.Errorf("error %q does not say %q", err, tt.wantText)
			}
		})
	}
	// Without the exporter, or with -B and no auth, the same specs pass.
	framework.CreateMemcached(t, ns, "with-auth", func(s *cachev1beta1.MemcachedSpec) {
		s.Auth = &cachev1beta1.Auth{SecretName: "cache-auth"}
		s.Monitoring = &cachev1beta1.Monitoring{Exporter: &cachev1beta1.Exporter{Enabled: false}}
	})
	framework.CreateMemcached(t, ns, "binary", func(s *cachev1beta1.MemcachedSpec) { s.ExtraArgs = []string{"-B", "binary"} })
}
