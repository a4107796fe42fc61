//go:build integration

// Package apiserver stops the package's kube-apiserver under the operator
// binary: for 30 seconds with etcd kept up, and with etcd compacted while
// it is down, so that every informer must relist. The operator must stay
// up, say it is not ready while it cannot reach the apiserver, and miss
// nothing that changed meanwhile.
//
// Its tests have a control plane of their own, since no other test can
// run while the apiserver is down; they run one after the other.
package apiserver

import (
	"testing"

	"github.com/kubelite/memcached-operator/test/integration/framework"
)

func TestMain(m *testing.M) {
	framework.Main(m, framework.Config{})
}
