package framework

import (
	"context"
	"fmt"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// WaitEvent waits for an Event of the type and reason about the object of
// kind and name in ns, and returns it.
func WaitEvent(t *testing.T, ns, kind, name, eventType, reason string) corev1.Event {
	t.Helper()
	var found corev1.Event
	Eventually(t, WaitLong, fmt.Sprintf("a %s Event %s about %s %s/%s", eventType, reason, kind, ns, name), func(ctx context.Context) (bool, string) {
		events, err := env.kube.CoreV1().Events(ns).List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, err.Error()
		}
		var seen []string
		for _, e := range events.Items {
			if e.InvolvedObject.Kind == kind && e.InvolvedObject.Name == name && e.Type == eventType && e.Reason == reason {
				found = e
				return true, ""
			}
			seen = append(seen, e.Type+" "+e.Reason)
		}
		return false, fmt.Sprintf("events: %v", seen)
	})
	return found
}

// NormalEvents returns the messages of the Normal Events with reason about
// the Memcached.
func NormalEvents(t *testing.T, ns, name, reason string) []string {
	t.Helper()
	list, err := env.kube.CoreV1().Events(ns).List(context.Background(), metav1.ListOptions{
		FieldSelector: "involvedObject.kind=Memcached,involvedObject.name=" + name + ",reason=" + reason + ",type=Normal",
	})
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, e := range list.Items {
		out = append(out, e.Message)
	}
	return out
}
