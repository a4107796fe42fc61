//go:build integration

package install

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"maps"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"

	cachev1beta1 "github.com/kubelite/memcached-operator/pkg/apis/cache/v1beta1"
	"github.com/kubelite/memcached-operator/pkg/metrics/scrape"

	"github.com/kubelite/memcached-operator/test/integration/framework"
)

// operatorMetricList holds the operator metric names that the rules and
// the dashboard of artifacts/monitoring use (make update-monitoring).
const operatorMetricList = "hack/monitoring/operator-metrics.txt"

// podMonitor is the part of a Prometheus Operator PodMonitor these tests
// read; the CRD is not installed here.
type podMonitor struct {
	Spec struct {
		Selector            metav1.LabelSelector `json:"selector"`
		PodMetricsEndpoints []podMetricsEndpoint `json:"podMetricsEndpoints"`
	} `json:"spec"`
}

type podMetricsEndpoint struct {
	Port          string `json:"port"`
	Scheme        string `json:"scheme"`
	Authorization *struct {
		Credentials corev1.SecretKeySelector `json:"credentials"`
	} `json:"authorization"`
}

// TestIntegrationMonitoring checks artifacts/monitoring against a running
// operator and its caches: the caches PodMonitor selects every Pod of a
// Memcached with the exporter and finds its port; the operator PodMonitor
// selects the shipped operator Pods and port; the token it sends, that of
// the shipped scraper ServiceAccount, may read the operator's /metrics;
// and that /metrics serves every operator metric the rules and the
// dashboard use, once the operator has reconciled a Memcached.
func TestIntegrationMonitoring(t *testing.T) {
	ctx := context.Background()
	caches := readPodMonitor(t, "artifacts/monitoring/podmonitor_caches.yaml")
	operatorMonitor := readPodMonitor(t, "artifacts/monitoring/podmonitor_operator.yaml")
	wantNames := readNameList(t, operatorMetricList)

	t.Parallel()
	ns := framework.NewNamespace(t)
	lease := leaseFor(t, ns)
	op := framework.StartOperator(t, ns, "--leader-elect=true", "--leader-election-namespace="+framework.OperatorNamespace, "--leader-election-id="+lease, "--metrics-secure=true")
	waitLeader(t, op, lease, "the operator leads")
	framework.CreateMemcached(t, ns, "cache", func(s *cachev1beta1.MemcachedSpec) {
		s.Monitoring = &cachev1beta1.Monitoring{Exporter: &cachev1beta1.Exporter{Enabled: true}}
	})
	framework.WaitConverged(t, ns, "cache", metav1.ConditionTrue)

	t.Run("the caches PodMonitor selects the exporter of every cache Pod", func(t *testing.T) {
		sel, err := metav1.LabelSelectorAsSelector(&caches.Spec.Selector)
		if err != nil {
			t.Fatal(err)
		}
		port := onlyEndpoint(t, caches).Port
		d, err := framework.GetDeployment(ctx, ns, "cache")
		if err != nil {
			t.Fatal(err)
		}
		pods, err := framework.Kube().CoreV1().Pods(ns).List(ctx, metav1.ListOptions{})
		if err != nil {
			t.Fatal(err)
		}
		var selected int
		for _, pod := range pods.Items {
			if !sel.Matches(labels.Set(pod.Labels)) {
				t.Errorf("Pod %s of the Memcached is not selected: labels %v, selector %s", pod.Name, pod.Labels, sel)
				continue
			}
			selected++
			if !hasContainerPort(pod.Spec.Containers, port) {
				t.Errorf("Pod %s has no container port named %q", pod.Name, port)
			}
		}
		if want := int(*d.Spec.Replicas); selected != want {
			t.Errorf("%d Pods selected, want the Deployment's %d", selected, want)
		}
	})

	t.Run("the operator PodMonitor selects the shipped operator Pods", func(t *testing.T) {
		d := readDeployment(t, "artifacts/deploy/deployment.yaml")
		sel, err := metav1.LabelSelectorAsSelector(&operatorMonitor.Spec.Selector)
		if err != nil {
			t.Fatal(err)
		}
		if !sel.Matches(labels.Set(d.Spec.Template.Labels)) {
			t.Errorf("selector %s does not match the operator's Pod labels %v", sel, d.Spec.Template.Labels)
		}
		ep := onlyEndpoint(t, operatorMonitor)
		if !hasContainerPort(d.Spec.Template.Spec.Containers, ep.Port) {
			t.Errorf("the operator has no container port named %q", ep.Port)
		}
		if ep.Scheme != "https" {
			t.Errorf("scheme %q, want https: the operator serves /metrics over TLS", ep.Scheme)
		}
	})

	t.Run("the operator serves every metric the rules and the dashboard use", func(t *testing.T) {
		source := scrape.Source{
			URL:    "https://" + op.MetricsAddr + "/metrics",
			Token:  scraperToken(t, operatorMonitor),
			Client: framework.InsecureClient,
		}
		framework.Eventually(t, framework.WaitLong, "every listed metric is served", func(ctx context.Context) (bool, string) {
			m, err := source.Get(ctx)
			if err != nil {
				return false, err.Error()
			}
			served := m.SeriesNames()
			var missing []string
			for _, name := range wantNames {
				if !served[name] {
					missing = append(missing, name)
				}
			}
			return len(missing) == 0, fmt.Sprintf("not served: %v", missing)
		})
	})
}

// scraperToken installs the shipped scraper identity
// (artifacts/monitoring/scraper_rbac.yaml) and returns the token that the
// token controller puts into the Secret the operator PodMonitor names.
func scraperToken(t *testing.T, pm podMonitor) string {
	t.Helper()
	auth := onlyEndpoint(t, pm).Authorization
	if auth == nil {
		t.Fatal("the operator PodMonitor sends no authorization")
	}
	ctx := context.Background()
	if err := framework.Cluster().ApplyFiles(ctx, framework.Path("artifacts/monitoring/scraper_rbac.yaml")); err != nil {
		t.Fatalf("installing the scraper identity: %v", err)
	}
	t.Cleanup(func() {
		ctx := context.Background()
		for _, err := range []error{
			framework.Kube().RbacV1().ClusterRoleBindings().Delete(ctx, "memcached-operator-metrics-scraper", metav1.DeleteOptions{}),
			framework.Kube().CoreV1().Secrets("memcached-operator").Delete(ctx, auth.Credentials.Name, metav1.DeleteOptions{}),
			framework.Kube().CoreV1().ServiceAccounts("memcached-operator").Delete(ctx, "memcached-operator-metrics-scraper", metav1.DeleteOptions{}),
		} {
			if err != nil && !apierrors.IsNotFound(err) {
				t.Errorf("removing the scraper identity: %v", err)
			}
		}
	})
	var token string
	framework.Eventually(t, 30*time.Second, "the token controller fills in "+auth.Credentials.Name, func(ctx context.Context) (bool, string) {
		s, err := framework.Kube().CoreV1().Secrets("memcached-operator").Get(ctx, auth.Credentials.Name, metav1.GetOptions{})
		if err != nil {
			return false, err.Error()
		}
		token = string(s.Data[auth.Credentials.Key])
		return token != "", fmt.Sprintf("keys %v", slices.Sorted(maps.Keys(s.Data)))
	})
	return token
}

// onlyEndpoint returns the one scrape endpoint of pm.
func onlyEndpoint(t *testing.T, pm podMonitor) podMetricsEndpoint {
	t.Helper()
	if n := len(pm.Spec.PodMetricsEndpoints); n != 1 {
		t.Fatalf("%d podMetricsEndpoints, want 1", n)
	}
	return pm.Spec.PodMetricsEndpoints[0]
}

// hasContainerPort reports whether a container has a port named name,
// which is how a PodMonitor endpoint finds its target.
func hasContainerPort(containers []corev1.Container, name string) bool {
	for _, c := range containers {
		for _, p := range c.Ports {
			if p.Name == name {
				return true
			}
		}
	}
	return false
}

func readPodMonitor(t *testing.T, path string) podMonitor {
	t.Helper()
	var pm podMonitor
	framework.ReadManifest(t, path, &pm)
	return pm
}

func readDeployment(t *testing.T, path string) appsv1.Deployment {
	t.Helper()
	var d appsv1.Deployment
	framework.ReadManifest(t, path, &d)
	return d
}

// readNameList reads a metric name list: one name a line, # comments.
func readNameList(t *testing.T, path string) []string {
	t.Helper()
	data, err := os.ReadFile(framework.Path(path))
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	s := bufio.NewScanner(bytes.NewReader(data))
	for s.Scan() {
		if line := strings.TrimSpace(s.Text()); line != "" && !strings.HasPrefix(line, "#") {
			names = append(names, line)
		}
	}
	if len(names) == 0 {
		t.Fatalf("%s lists no names", path)
	}
	return names
}
