package framework

import (
	"context"
	"fmt"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

// SetUnschedulable cordons or uncordons every node of the package's
// control plane. Every test that schedules Pods sees it, so a test that
// cordons does not run in parallel with others.
func SetUnschedulable(t *testing.T, unschedulable bool) {
	t.Helper()
	ctx := context.Background()
	nodes, err := env.kube.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	patch := fmt.Appendf(nil, `{"spec":{"unschedulable":%t}}`, unschedulable)
	for _, n := range nodes.Items {
		if _, err := env.kube.CoreV1().Nodes().Patch(ctx, n.Name, types.MergePatchType, patch, metav1.PatchOptions{}); err != nil {
			t.Fatalf("setting node %s unschedulable=%t: %v", n.Name, unschedulable, err)
		}
	}
}
