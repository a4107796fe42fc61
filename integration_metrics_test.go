//go:build integration

package main

import (
	"context"
	"fmt"
	"net/http"
	"testing"
	"time"
)

// TestIntegrationMetricsNeedAuthorization runs two replicas as shipped:
// /metrics over HTTPS behind delegated authentication and authorization.
// Both the leader and the follower must refuse a request without a token
// (401) and one whose user lacks RBAC (403), and serve the shipped
// metrics-reader role (200); pprof stays out of that role's reach, and
// plain HTTP gets no metrics.
func TestIntegrationMetricsNeedAuthorization(t *testing.T) {
	args := []string{"--leader-elect=true", "--leader-election-namespace=memcached-operator", "--metrics-secure=true", "--enable-profiling"}
	leader := startBinary(t, args...)
	waitLeader(t, leader, "first replica leads")
	follower := startBinary(t, args...)
	waitReady(t, follower)
	if s := leaderStatus(follower); s != "0" {
		t.Fatalf("second replica leader status = %q, want 0", s)
	}
	ctx := context.Background()
	nobody, err := suite.cluster.ServiceAccountToken(ctx, "monitoring", "nobody")
	if err != nil {
		t.Fatal(err)
	}
	reader := metricsReaderToken(t)

	for name, op := range map[string]*binaryOperator{"leader": leader, "follower": follower} {
		t.Run(name, func(t *testing.T) {
			base := "https://" + op.metricsAddr
			cases := []struct {
				what, url, token string
				want             int
			}{
				{"no token", base + "/metrics", "", http.StatusUnauthorized},
				{"a token the apiserver does not know", base + "/metrics", "not-a-token", http.StatusUnauthorized},
				{"a ServiceAccount without RBAC", base + "/metrics", nobody, http.StatusForbidden},
				{"the metrics reader", base + "/metrics", reader, http.StatusOK},
				{"the metrics reader on pprof", base + "/debug/pprof/", reader, http.StatusForbidden},
			}
			for _, c := range cases {
				if code, body := getWithToken(c.url, c.token); code != c.want {
					t.Errorf("%s: %d, want %d (%s)", c.what, code, c.want, body)
				}
			}
			if _, err := op.scrape(); err != nil {
				t.Errorf("scrape as the metrics reader: %v", err)
			}
			if code, _ := get(op.metricsAddr, "/metrics"); code == http.StatusOK {
				t.Errorf("plain HTTP to the secure listener got metrics")
			}
		})
	}
}

// getWithToken GETs url through insecureClient with an optional bearer
// token and returns the status code and the start of the body.
func getWithToken(url, token string) (int, string) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return 0, err.Error()
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := insecureClient.Do(req)
	if err != nil {
		return 0, err.Error()
	}
	defer resp.Body.Close()
	buf := make([]byte, 200)
	n, _ := resp.Body.Read(buf)
	return resp.StatusCode, fmt.Sprintf("%q", buf[:n])
}
