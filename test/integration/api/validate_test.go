//go:build integration

package api

import (
	"context"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"

	cachev1beta1 "github.com/kubelite/memcached-operator/pkg/apis/cache/v1beta1"
	"github.com/kubelite/memcached-operator/pkg/resources"
	"github.com/kubelite/memcached-operator/test/integration/framework"
)

// validateInput mirrors fuzzInput in pkg/resources/fuzz_test.go: the
// arguments of FuzzBuilders. This package cannot import that test file, so
// the input type, its seeds and its mapping to a spec are repeated here;
// repeating them keeps the integration test asking about exactly the specs
// the fuzz test builds.
type validateInput struct {
	replicas                                    int32
	image                                       string
	memoryMB, maxConnections, threads, port     int32
	reqCPU, limCPU, reqMem, limMem              string
	exporter                                    bool
	tolerationKey, nodeLabel                    string
	minReadySeconds, plaintextPort, extstoreMiB int32
}

// validateSeeds is FuzzBuilders' seed corpus (fuzzSeeds). Keep the two
// lists equal.
var validateSeeds = []validateInput{
	{1, "memcached:1.6.39", 64, 1024, 4, 11211, "", "", "", "", false, "", "", 0, 0, 0},
	{0, "", 16, 1, 1, 1, "500m", "2", "64Mi", "1Gi", true, "dedicated", "ssd", 300, 11212, 1024},
	{1000, "r/m:x", 65536, 65536, 64, 65535, "x", "-1", "1e3", "0.5", true, "", "", 301, 9150, 512},
	{3, "memcached:1.6", 1024, 4096, 8, 11211, "2", "1", "1Gi", "2Gi", false, "example.com/gpu", "pool-a", 5, 11212, 65536},
	{1, "", 64, 1024, 4, 9150, "", "50m", "", "", false, "", "", 60, 11211, 0},
}

// memcached mirrors fuzzSpec: a zero number or empty string is a field left
// unset, for the CRD's default to fill.
func (in validateInput) memcached(ns string) *cachev1beta1.Memcached {
	mc := &cachev1beta1.Memcached{
		ObjectMeta: metav1.ObjectMeta{Name: "validate", Namespace: ns},
		Spec: cachev1beta1.MemcachedSpec{
			Replicas:       ptr.To(in.replicas),
			Image:          in.image,
			MaxConnections: in.maxConnections,
			Threads:        in.threads,
			Port:           in.port,
			Monitoring:     &cachev1beta1.Monitoring{Exporter: &cachev1beta1.Exporter{Enabled: in.exporter}},
		},
	}
	if in.memoryMB != 0 {
		mc.Spec.Memory = resource.NewQuantity(int64(in.memoryMB)<<20, resource.BinarySI)
	}
	if in.reqCPU+in.limCPU+in.reqMem+in.limMem != "" {
		mc.Spec.Resources = &cachev1beta1.ResourceOverrides{
			Requests: &cachev1beta1.ResourceAmounts{CPU: in.reqCPU, Memory: in.reqMem},
			Limits:   &cachev1beta1.ResourceAmounts{CPU: in.limCPU, Memory: in.limMem},
		}
	}
	if in.tolerationKey != "" {
		framework.PodOf(&mc.Spec).Tolerations = []corev1.Toleration{{Key: in.tolerationKey, Operator: corev1.TolerationOpExists}}
	}
	if in.nodeLabel != "" {
		framework.PodOf(&mc.Spec).NodeSelector = map[string]string{"pool": in.nodeLabel}
	}
	if in.minReadySeconds != 0 {
		mc.Spec.MinReadySeconds = ptr.To(in.minReadySeconds)
	}
	if in.plaintextPort != 0 {
		mc.Spec.TLS = &cachev1beta1.TLS{SecretName: "tls", PlaintextPort: in.plaintextPort}
	}
	if in.extstoreMiB != 0 {
		mc.Spec.Extstore = &cachev1beta1.Extstore{Size: *resource.NewQuantity(int64(in.extstoreMiB)<<20, resource.BinarySI)}
	}
	return mc
}

// pick returns one of usual, or, one time in ten, one of rare: values at or
// past what the CRD or the apiserver allows. Keeping them rare lets most
// specs through the CRD, to Validate, while every field still gets probed
// at its edges.
func pick[T any](r *rand.Rand, usual []T, rare ...T) T {
	if len(rare) > 0 && r.IntN(10) == 0 {
		return rare[r.IntN(len(rare))]
	}
	return usual[r.IntN(len(usual))]
}

// generatedInputs draws n inputs from a fixed seed, so that every run asks
// the same questions and a failure names an input that fails again.
func generatedInputs(n int) []validateInput {
	r := rand.New(rand.NewPCG(20260801, 1))
	cpu := func() string {
		return pick(r, []string{"", "", "100m", "250m", "1", "2", "0"},
			"-1", "-100m", "0.0000000001", "1e3", "1.5", "one", strings.Repeat("1", 33))
	}
	memory := func() string {
		return pick(r, []string{"", "", "64Mi", "128Mi", "512Mi", "1Gi", "4Gi"},
			"-64Mi", "0", "1e9", "0.5", "100Ei", "1GB", "lots")
	}
	inputs := make([]validateInput, n)
	for i := range inputs {
		in := validateInput{
			replicas:       pick(r, []int32{0, 1, 3, 1000}, -1, 1001),
			image:          pick(r, []string{"", "memcached:1.6.39", "memcached:1.6", "registry.example.com:5000/cache/memcached:1.6"}, "memcached\u00a0", "\u2003memcached", "\vmemcached", "memcached latest", strings.Repeat("m", 513)),
			memoryMB:       pick(r, []int32{0, 16, 64, 256, 1024, 65536}, -64, 15, 65537),
			maxConnections: pick(r, []int32{0, 1, 1024, 4096, 65536}, -1, 65537),
			threads:        pick(r, []int32{0, 1, 4, 64}, -4, 65),
			port:           pick(r, []int32{0, 1, 80, 11211, 65535}, 9150, -1, 65536),
			exporter:       r.IntN(2) == 0,
			tolerationKey:  pick(r, []string{"", "", "dedicated", "example.com/gpu", "node.kubernetes.io/not-ready"}, "bad key", "-dedicated", "example.com/", strings.Repeat("k", 64)),
			nodeLabel:      pick(r, []string{"", "", "ssd", "pool-a", "a.b_c"}, "bad value", "ssd!", strings.Repeat("v", 64), "-ssd"),
			// 0 leaves each of the three unset; 11211, the default
			// port, and 9150, the exporter's, are where the plaintext
			// port may clash; 64Ti is 67108864 MiB.
			minReadySeconds: pick(r, []int32{0, 0, 5, 10, 60, 300}, -1, 301),
			plaintextPort:   pick(r, []int32{0, 0, 0, 11212, 11213, 8080}, 11211, 9150, -1, 65536),
			extstoreMiB:     pick(r, []int32{0, 0, 0, 1024, 10240, 67108864}, 512, 1023, 67108865),
		}
		if r.IntN(2) == 0 {
			in.reqCPU, in.limCPU, in.reqMem, in.limMem = cpu(), cpu(), memory(), memory()
		}
		inputs[i] = in
	}
	return inputs
}

// TestIntegrationValidateAgreesWithAPIServer is FuzzBuilders' oracle asked of
// the real apiserver, for the fuzz seeds and a few hundred generated specs.
// A server-side dry-run create of the Memcached gives the CRD's verdict
// (schema and CEL). For every spec the CRD admits, Validate must agree with
// the apiserver about the children built from the admitted object (as the
// controller builds them from the stored one), each dry-run applied: the
// Deployment, the Service, and the Pod the Deployment's ReplicaSet would
// create, since some checks (image whitespace) only run on Pods. Validate
// accepts ⇒ the apiserver accepts all three; Validate rejects ⇒ the
// apiserver rejects at least one, or Validate is stricter than it.
func TestIntegrationValidateAgreesWithAPIServer(t *testing.T) {
	t.Parallel()
	ns := framework.NewNamespace(t)
	kube, mcs := framework.Unthrottled()
	// The ServiceAccount admission plugin refuses Pods until the
	// namespace's default ServiceAccount exists.
	framework.Eventually(t, framework.WaitLong, "the default ServiceAccount exists", func(ctx context.Context) (bool, string) {
		_, err := kube.CoreV1().ServiceAccounts(ns).Get(ctx, "default", metav1.GetOptions{})
		return err == nil, fmt.Sprint(err)
	})

	type testCase struct {
		name string
		in   validateInput
	}
	var cases []testCase
	for i, in := range validateSeeds {
		cases = append(cases, testCase{fmt.Sprintf("seed-%d", i), in})
	}
	for i, in := range generatedInputs(300) {
		cases = append(cases, testCase{fmt.Sprintf("generated-%03d", i), in})
	}

	var crdRejected, validateRejected, accepted, disagreements int
	ctx := context.Background()
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			admitted, err := mcs.CacheV1beta1().Memcacheds(ns).Create(ctx, tc.in.memcached(ns), metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
			if apierrors.IsInvalid(err) {
				crdRejected++
				return
			}
			if err != nil {
				t.Fatalf("dry-run create of the Memcached: %v", err)
			}
			verdict := resources.Validate(resources.Default(admitted))
			rejections, err := childRejections(ctx, kube, admitted)
			if err != nil {
				t.Fatal(err)
			}
			if len(verdict) > 0 {
				validateRejected++
			} else {
				accepted++
			}
			switch {
			case len(verdict) == 0 && len(rejections) > 0:
				disagreements++
				t.Errorf("Validate accepts a spec the CRD admits, but the apiserver rejects its children:\n  %s\ninput: %#v",
					strings.Join(rejections, "\n  "), tc.in)
			case len(verdict) > 0 && len(rejections) == 0:
				disagreements++
				t.Errorf("Validate rejects a spec the CRD admits (%v), but the apiserver accepts its children: Validate is stricter than the apiserver\ninput: %#v",
					verdict.ToAggregate(), tc.in)
			}
		})
	}
	t.Logf("%d specs: %d rejected by the CRD, %d admitted and rejected by Validate, %d admitted and accepted by Validate; %d disagreements between Validate and the apiserver",
		len(cases), crdRejected, validateRejected, accepted, disagreements)
	// Without all three verdicts the oracle would hold vacuously.
	if crdRejected == 0 || validateRejected == 0 || accepted == 0 {
		t.Errorf("the specs do not exercise every verdict: %d CRD-rejected, %d Validate-rejected, %d accepted", crdRejected, validateRejected, accepted)
	}
}

// childRejections dry-run applies the children of mc, and dry-run creates
// the Pod its Deployment's ReplicaSet would, and returns the apiserver's
// validation errors. Any other error (a refused connection, a conflict) is
// not a verdict about the spec and is returned as the error.
func childRejections(ctx context.Context, kube kubernetes.Interface, mc *cachev1beta1.Memcached) ([]string, error) {
	dep, err := resources.Deployment(resources.Default(mc))
	if err != nil {
		return nil, fmt.Errorf("building the Deployment: %w", err)
	}
	svc, err := resources.Service(resources.Default(mc))
	if err != nil {
		return nil, fmt.Errorf("building the Service: %w", err)
	}
	apply := metav1.ApplyOptions{FieldManager: "test", DryRun: []string{metav1.DryRunAll}}
	var rejections []string
	verdict := func(kind string, err error) error {
		if apierrors.IsInvalid(err) {
			rejections = append(rejections, kind+": "+err.Error())
			return nil
		}
		if err != nil {
			return fmt.Errorf("dry-run %s: %w", kind, err)
		}
		return nil
	}
	applied, depErr := kube.AppsV1().Deployments(mc.Namespace).Apply(ctx, dep, apply)
	if err := verdict("Deployment", depErr); err != nil {
		return nil, err
	}
	_, svcErr := kube.CoreV1().Services(mc.Namespace).Apply(ctx, svc, apply)
	if err := verdict("Service", svcErr); err != nil {
		return nil, err
	}
	if depErr == nil {
		pod := &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Name: mc.Name + "-pod", Namespace: mc.Namespace, Labels: applied.Spec.Template.Labels},
			Spec:       applied.Spec.Template.Spec,
		}
		_, podErr := kube.CoreV1().Pods(mc.Namespace).Create(ctx, pod, metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
		if err := verdict("Pod", podErr); err != nil {
			return nil, err
		}
	}
	return rejections, nil
}
