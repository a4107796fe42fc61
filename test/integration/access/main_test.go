//go:build integration

// Package access tests who may reach a cache and how the operator waits
// for what access needs: the auth file of spec.auth, the serving
// certificate of spec.tls, the client CA bundle of spec.tls.clientCA and
// the NetworkPolicy of spec.networkPolicy. Each of them names or makes an
// object the Deployment must not run without, so the tests follow a
// Memcached whose Secret, ConfigMap or NetworkPolicy is missing, broken,
// fixed, renewed and taken away, and check that the Pods carry what the
// apiserver admitted.
//
// Whether memcached or a network plugin enforces any of it is not tested:
// under kwok no container runs, and the local control plane has no network
// plugin.
package access

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	cachev1beta1 "github.com/kubelite/memcached-operator/pkg/apis/cache/v1beta1"
	"github.com/kubelite/memcached-operator/pkg/resources"
	"github.com/kubelite/memcached-operator/test/integration/framework"
)

func TestMain(m *testing.M) {
	framework.Main(m, framework.Config{})
}

// waitBlockedBy waits until Degraded and Progressing both carry reason,
// with messagePart in the message, and a Warning Event with that reason
// was sent: how a Memcached whose Deployment is held shows it.
func waitBlockedBy(t *testing.T, ns, name, reason, messagePart string) {
	t.Helper()
	framework.Eventually(t, framework.WaitLong, "Degraded="+reason, func(ctx context.Context) (bool, string) {
		mc, err := framework.GetMemcached(ctx, ns, name)
		if err != nil {
			return false, err.Error()
		}
		events, err := framework.Kube().CoreV1().Events(ns).List(ctx, metav1.ListOptions{
			FieldSelector: "involvedObject.kind=Memcached,involvedObject.name=" + name + ",reason=" + reason + ",type=Warning",
		})
		if err != nil {
			return false, err.Error()
		}
		d, p := framework.Condition(mc, cachev1beta1.ConditionDegraded), framework.Condition(mc, cachev1beta1.ConditionProgressing)
		return d.Status == metav1.ConditionTrue && d.Reason == reason && strings.Contains(d.Message, messagePart) &&
				p.Status == metav1.ConditionFalse && p.Reason == reason && mc.Status.ObservedGeneration == mc.Generation &&
				len(events.Items) > 0,
			fmt.Sprintf("Degraded %+v, Progressing %+v, %d Events", d, p, len(events.Items))
	})
}

// cachePods lists the Pods of Memcached name that are not being deleted.
func cachePods(ctx context.Context, ns, name string) ([]corev1.Pod, error) {
	mc := &cachev1beta1.Memcached{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns}}
	list, err := framework.Kube().CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: resources.Selector(mc)})
	if err != nil {
		return nil, err
	}
	return slices.DeleteFunc(list.Items, func(p corev1.Pod) bool { return p.DeletionTimestamp != nil }), nil
}

// syncs is how many syncs op has finished; it fails the test if /metrics
// does not answer.
func syncs(t *testing.T, op *framework.Operator) float64 {
	t.Helper()
	n, err := op.Syncs()
	if err != nil {
		t.Fatalf("reading the operator's metrics: %v", err)
	}
	return n
}
