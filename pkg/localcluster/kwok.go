package localcluster

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
)

// kwokNodeAnnotation marks the nodes kwok manages; kwok is told to manage
// only nodes with it, so nothing else in the cluster is touched.
const kwokNodeAnnotation = "kwok.x-k8s.io/node"

// kwokStages are the stage definitions hack/build-cluster.sh copies next to
// the binary: nodes become Ready at once and keep a heartbeat lease, Pods on
// them become Running and Ready at once, and deleted Pods go away.
var kwokStages = []string{
	"node-initialize.yaml",
	"node-heartbeat-with-lease.yaml",
	"pod-ready.yaml",
	"pod-complete.yaml",
	"pod-delete.yaml",
}

func (c *Cluster) startKwok(ctx context.Context, binDir string) error {
	var configs []string
	for _, s := range kwokStages {
		path := filepath.Join(binDir, "kwok-stages", s)
		if s == "pod-ready.yaml" && c.cfg.PodReadyDelay > 0 {
			var err error
			if path, err = c.delayedStage(path, c.cfg.PodReadyDelay); err != nil {
				return err
			}
		}
		configs = append(configs, path)
	}
	p := &process{
		name:    "kwok",
		path:    filepath.Join(binDir, "kwok"),
		logPath: filepath.Join(c.Dir, "kwok.log"),
		args: []string{
			"--kubeconfig=" + c.KubeconfigPath,
			"--manage-nodes-with-annotation-selector=" + kwokNodeAnnotation + "=fake",
			"--config=" + strings.Join(configs, ","),
			// The heartbeat-with-lease stage renews node status only every
			// 10 minutes and expects liveness to come from a Lease. Without
			// one, the node lifecycle controller marks the nodes Unknown
			// whenever it takes a fresh look (after an apiserver restart, or
			// when a busy control plane delays it), and the Pods on them
			// stop being ready.
			"--node-lease-duration-seconds=40",
			"--cidr=10.244.0.0/16",
			"--node-ip=10.0.0.2",
		},
	}
	c.step("Starting kwok")
	if err := p.start(); err != nil {
		return err
	}
	c.others = append(c.others, p)

	client, err := kubernetes.NewForConfig(c.Config)
	if err != nil {
		return err
	}
	nodes := c.cfg.Nodes
	if nodes == 0 {
		nodes = 2
	}
	for i := range nodes {
		name := fmt.Sprintf("kwok-node-%d", i)
		node := &corev1.Node{
			ObjectMeta: metav1.ObjectMeta{
				Name: name,
				Labels: map[string]string{
					"type":                          "kwok",
					corev1.LabelHostname:            name,
					corev1.LabelOSStable:            "linux",
					corev1.LabelArchStable:          "amd64",
					"node-role.kubernetes.io/agent": "",
				},
				Annotations: map[string]string{kwokNodeAnnotation: "fake"},
			},
			Status: corev1.NodeStatus{Capacity: nodeCapacity, Allocatable: nodeCapacity},
		}
		if len(c.cfg.Zones) > 0 {
			node.Labels[corev1.LabelTopologyZone] = c.cfg.Zones[i%len(c.cfg.Zones)]
		}
		if _, err := client.CoreV1().Nodes().Create(ctx, node, metav1.CreateOptions{}); err != nil {
			return p.failure(fmt.Errorf("registering fake node %s: %w", name, err))
		}
	}

	c.step("Waiting for %d fake nodes to become Ready", nodes)
	err = wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		if exited, exitErr := p.exited(); exited {
			return false, fmt.Errorf("%w: %v", errExited, exitErr)
		}
		list, err := client.CoreV1().Nodes().List(ctx, metav1.ListOptions{LabelSelector: "type=kwok"})
		if err != nil {
			return false, nil
		}
		ready := 0
		for _, n := range list.Items {
			for _, cond := range n.Status.Conditions {
				if cond.Type == corev1.NodeReady && cond.Status == corev1.ConditionTrue {
					ready++
				}
			}
		}
		return ready == nodes, nil
	})
	if err != nil {
		return p.failure(fmt.Errorf("fake nodes did not become Ready: %w", err))
	}
	return nil
}

// stageNext is where a kwok Stage's spec says what the stage does; a delay
// goes just before it.
const stageNext = "\n  next:\n"

// delayedStage writes a copy of the stage at path into the cluster's
// directory with a delay before the stage applies, and returns the copy's
// path.
func (c *Cluster) delayedStage(path string, delay time.Duration) (string, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return "", fmt.Errorf("reading kwok stage: %w", err)
	}
	stage := string(data)
	if strings.Count(stage, stageNext) != 1 {
		return "", fmt.Errorf("kwok stage %s: cannot find where to add a delay", path)
	}
	stage = strings.Replace(stage, stageNext, fmt.Sprintf("\n  delay:\n    durationMilliseconds: %d\n  next:\n", delay.Milliseconds()), 1)
	out := filepath.Join(c.Dir, "delayed-"+filepath.Base(path))
	if err := os.WriteFile(out, []byte(stage), 0o644); err != nil {
		return "", fmt.Errorf("writing kwok stage: %w", err)
	}
	return out, nil
}
