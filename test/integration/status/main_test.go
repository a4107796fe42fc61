//go:build integration

// Package status tests what a Memcached's status tells its user about one
// Memcached's lifecycle: Available only with a serving Pod, a write the
// cluster refuses shown as Degraded with its reason and one Warning Event
// and cleared without an edit once the cause is gone, a recreated
// Memcached waiting for its predecessor's children, and an image with
// known security holes.
package status

import (
	"testing"

	"github.com/kubelite/memcached-operator/test/integration/framework"
)

func TestMain(m *testing.M) {
	framework.Main(m, framework.Config{})
}
