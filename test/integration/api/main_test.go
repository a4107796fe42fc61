//go:build integration

// Package api tests the Memcached API as the apiserver serves it: what the
// CRD's schema admits and refuses and where its bounds lie, that Validate
// agrees with the apiserver about the children of every spec the CRD
// admits, that no v1beta1 rule can be passed by writing through v1alpha1,
// and that every field documents itself. Most of it needs no operator: the
// schema alone decides.
package api

import (
	"testing"

	"github.com/kubelite/memcached-operator/test/integration/framework"
)

func TestMain(m *testing.M) {
	framework.Main(m, framework.Config{})
}
