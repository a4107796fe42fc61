//go:build integration

package main

import (
	"net/url"
	"slices"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// TestIntegrationInformersStreamTheirLists checks that every informer fills
// its cache with a streaming watch (client-go's WatchList: a watch with
// sendInitialEvents=true) and none with a LIST: the apiserver then sends
// the objects one event at a time from its watch cache instead of building
// list pages, and the operator decodes them one at a time instead of a
// page of up to 500 at once.
func TestIntegrationInformersStreamTheirLists(t *testing.T) {
	op := startOperator(t)
	ns := newNamespace(t)
	createMemcached(t, ns, "cache", nil)
	waitConverged(t, ns, "cache", metav1.ConditionTrue)

	collections := []string{"memcacheds", "deployments", "services", "poddisruptionbudgets", "networkpolicies", "secrets", "configmaps"}
	streamed := map[string]bool{}
	for _, r := range op.requests.Since(0, func(request) bool { return true }) {
		resource := r.path[strings.LastIndex(r.path, "/")+1:]
		if r.method != "GET" || !slices.Contains(collections, resource) {
			continue
		}
		q, _ := url.ParseQuery(r.query)
		switch {
		case q.Get("watch") == "":
			t.Errorf("the %s informer sent a LIST: %s?%s", resource, r.path, r.query)
		case q.Get("sendInitialEvents") == "true":
			streamed[resource] = true
		}
	}
	for _, resource := range collections {
		if !streamed[resource] {
			t.Errorf("the %s informer did not fill its cache with a streaming watch", resource)
		}
	}
}
