//go:build integration

// Package conversion tests that Memcacheds read and write alike through
// v1alpha1 and v1beta1: the conversion webhook on the real apiserver, while
// it is down, while it renews its certificates, on every replica, beside a
// second install, and across the upgrade in place from the release that
// stored v1alpha1.
//
// Every request through v1alpha1 needs the package's conversion webhook,
// because v1beta1 is stored. Tests that stop it do not run in parallel:
// Go runs them before it resumes any parallel test, so no other test sends
// a v1alpha1 request while the webhook is down.
package conversion

import (
	"testing"

	cachev1beta1 "github.com/kubelite/memcached-operator/pkg/apis/cache/v1beta1"
	"github.com/kubelite/memcached-operator/test/integration/framework"
)

// The package webhook's certificate lifetimes: short, so that its serving
// certificate is renewed about every 20 s and its CA every 80 s while the
// tests run, and TestIntegrationConversionSurvivesRotation sees both
// within a minute or two.
const (
	webhookCAValidity   = "2m"
	webhookCertValidity = "30s"
)

// Where the shipped install keeps the webhook's certificate, in its own
// namespace (and, for a second install, in that one's), and the CRD it
// serves.
const (
	webhookSecret = "memcached-operator-webhook-cert"
	crdName       = "memcacheds." + cachev1beta1.GroupName
)

func TestMain(m *testing.M) {
	framework.Main(m, framework.Config{WebhookArgs: []string{
		"--webhook-ca-validity=" + webhookCAValidity,
		"--webhook-cert-validity=" + webhookCertValidity,
	}})
}
