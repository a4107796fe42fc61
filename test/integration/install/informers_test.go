//go:build integration

package install

import (
	"net/url"
	"slices"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kubelite/memcached-operator/pkg/localcluster"
	"github.com/kubelite/memcached-operator/test/integration/framework"
)

// TestIntegrationInformersStreamTheirLists checks that every informer fills
// its cache with a streaming watch (client-go's WatchList: a watch with
// sendInitialEvents=true) and none with a LIST: the apiserver then sends
// the objects one event at a time from its watch cache instead of building
// list pages, and the operator decodes them one at a time instead of a
// page of up to 500 at once.
func TestIntegrationInformersStreamTheirLists(t *testing.T) {
	t.Parallel()
	ns := framework.NewNamespace(t)
	op := framework.StartOperator(t, ns)
	framework.CreateMemcached(t, ns, "cache", nil)
	framework.WaitConverged(t, ns, "cache", metav1.ConditionTrue)

	collections := []string{"memcacheds", "deployments", "services", "poddisruptionbudgets", "networkpolicies", "secrets", "configmaps"}
	streamed := map[string]bool{}
	for _, e := range op.Requests(t, func(e localcluster.AuditEvent) bool {
		return slices.Contains(collections, e.Resource()) && e.Name() == ""
	}) {
		u, err := url.Parse(e.RequestURI)
		if err != nil {
			t.Fatal(err)
		}
		switch {
		case e.Verb == "list":
			t.Errorf("the %s informer sent a LIST: %s", e.Resource(), e.RequestURI)
		case e.Verb == "watch" && u.Query().Get("sendInitialEvents") == "true":
			streamed[e.Resource()] = true
		}
	}
	for _, resource := range collections {
		if !streamed[resource] {
			t.Errorf("the %s informer did not fill its cache with a streaming watch", resource)
		}
	}
}
