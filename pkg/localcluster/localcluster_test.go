//go:build integration

package localcluster

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"
)

// TestClusterRunsPods proves the parts work together: a Deployment gets
// Ready Pods on kwok nodes, the version is stamped, and Stop leaves no
// directory behind.
func TestClusterRunsPods(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	cfg := Full()
	cfg.Progress = testWriter{t}
	c, err := Start(ctx, cfg)
	if err != nil {
		t.Fatalf("Start: %v", err)
	}
	dir := c.Dir
	defer func() {
		c.Stop()
		if _, err := os.Stat(dir); !os.IsNotExist(err) {
			t.Errorf("cluster directory %s left behind", dir)
		}
	}()

	dc, err := discovery.NewDiscoveryClientForConfig(c.Config)
	if err != nil {
		t.Fatal(err)
	}
	v, err := dc.ServerVersion()
	if err != nil {
		t.Fatal(err)
	}
	if v.GitVersion != KubernetesVersion {
		t.Errorf("server version = %s, want %s", v.GitVersion, KubernetesVersion)
	}

	client := kubernetes.NewForConfigOrDie(c.Config)
	labels := map[string]string{"app": "smoke"}
	_, err = client.AppsV1().Deployments("default").Create(ctx, &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: "smoke"},
		Spec: appsv1.DeploymentSpec{
			Replicas: ptr.To[int32](2),
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "example"}}},
			},
		},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	err = wait.PollUntilContextTimeout(ctx, 250*time.Millisecond, 2*time.Minute, true, func(ctx context.Context) (bool, error) {
		d, err := client.AppsV1().Deployments("default").Get(ctx, "smoke", metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		return d.Status.AvailableReplicas == 2, nil
	})
	if err != nil {
		t.Fatalf("Deployment did not become available: %v\nkube-controller-manager:\n%s\nkwok:\n%s", err,
			c.LogTail("kube-controller-manager", 20), c.LogTail("kwok", 20))
	}
}

type testWriter struct{ t *testing.T }

func (w testWriter) Write(p []byte) (int, error) {
	w.t.Log(string(p))
	return len(p), nil
}

// TestTwoClustersAtOnce shows that clusters pick their own ports and
// directories, so two can run side by side.
func TestTwoClustersAtOnce(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	var clusters []*Cluster
	for range 2 {
		c, err := Start(ctx, Config{})
		if err != nil {
			t.Fatalf("Start: %v", err)
		}
		defer c.Stop()
		clusters = append(clusters, c)
	}
	if clusters[0].APIServerURL == clusters[1].APIServerURL || clusters[0].Dir == clusters[1].Dir {
		t.Fatalf("clusters share %s / %s", clusters[0].APIServerURL, clusters[0].Dir)
	}
	for i, c := range clusters {
		client := kubernetes.NewForConfigOrDie(c.Config)
		name := "only-in-" + string(rune('a'+i))
		if _, err := client.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		other := kubernetes.NewForConfigOrDie(clusters[1-i].Config)
		if _, err := other.CoreV1().Namespaces().Get(ctx, name, metav1.GetOptions{}); err == nil {
			t.Errorf("namespace %s created in cluster %d is visible in the other", name, i)
		}
	}
}

// TestStartFailureNamesThePart shows that a part that cannot start is
// named, with its log.
func TestStartFailureNamesThePart(t *testing.T) {
	dir := t.TempDir()
	bin, err := resolveBinDir("")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(filepath.Join(bin, "etcd"), filepath.Join(dir, "etcd")); err != nil {
		t.Fatal(err)
	}
	// A kube-apiserver that exits at once with a message.
	if err := os.WriteFile(filepath.Join(dir, "kube-apiserver"), []byte("#!/bin/sh\necho 'broken on purpose' >&2\nexit 3\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	_, err = Start(context.Background(), Config{BinDir: dir})
	if err == nil {
		t.Fatal("Start succeeded with a broken kube-apiserver")
	}
	if !strings.Contains(err.Error(), "kube-apiserver did not start") || !strings.Contains(err.Error(), "broken on purpose") {
		t.Errorf("error does not name the part and show its log: %v", err)
	}
}
