package framework

import (
	"context"
	"crypto/tls"
	"fmt"
	"io"
	"net/http"
	"sync"
	"testing"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// InsecureClient skips verifying the operator's self-signed metrics
// certificate, as a Prometheus scrape configuration for it does.
var InsecureClient = &http.Client{
	Timeout:   scrapeTimeout,
	Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}, //nolint:gosec // The operator's generated certificate.
}

// GetWithToken returns the status code and the start of the body of a GET
// of url, with a bearer token unless it is empty; the code is 0 when
// nothing answered.
func GetWithToken(url, token string) (int, string) {
	ctx, cancel := context.WithTimeout(context.Background(), scrapeTimeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return 0, err.Error()
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := InsecureClient.Do(req)
	if err != nil {
		return 0, err.Error()
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
	return resp.StatusCode, string(body)
}

var metricsReader struct {
	once  sync.Once
	token string
	err   error
}

// MetricsReaderToken returns the token of monitoring/prometheus, a
// ServiceAccount bound to the shipped memcached-operator-metrics-reader
// ClusterRole, as a user would bind their Prometheus.
func MetricsReaderToken(t *testing.T) string {
	t.Helper()
	token, err := metricsReaderToken()
	if err != nil {
		t.Fatal(err)
	}
	return token
}

// metricsReaderToken binds the metrics reader once per package.
func metricsReaderToken() (string, error) {
	metricsReader.once.Do(func() {
		metricsReader.token, metricsReader.err = bindMetricsReader(context.Background())
		if metricsReader.err != nil {
			metricsReader.err = fmt.Errorf("setting up the metrics reader: %w", metricsReader.err)
		}
	})
	return metricsReader.token, metricsReader.err
}

func bindMetricsReader(ctx context.Context) (string, error) {
	_, err := env.kube.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "monitoring"}}, metav1.CreateOptions{})
	if err != nil && !apierrors.IsAlreadyExists(err) {
		return "", fmt.Errorf("creating namespace monitoring: %w", err)
	}
	_, err = env.kube.RbacV1().ClusterRoleBindings().Create(ctx, &rbacv1.ClusterRoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: "prometheus-memcached-operator-metrics"},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "memcached-operator-metrics-reader"},
		Subjects:   []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Namespace: "monitoring", Name: "prometheus"}},
	}, metav1.CreateOptions{})
	if err != nil && !apierrors.IsAlreadyExists(err) {
		return "", fmt.Errorf("binding the metrics reader: %w", err)
	}
	return env.cluster.ServiceAccountToken(ctx, "monitoring", "prometheus")
}
