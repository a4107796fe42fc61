package framework

import (
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/util/validation"
)

func TestNamespaceName(t *testing.T) {
	for _, tc := range []struct {
		test string
		want string
	}{
		{test: "TestIntegrationPodSettings", want: "testintegrationpodsettings-7"},
		{test: "TestChart/v1.35.4", want: "testchart-v1-35-4-7"},
		{test: "TestX/a_b (c)#01", want: "testx-a-b-c-01-7"},
		{test: "TestIntegrationV1alpha1SmugglingRuleCases/extraArgs_may_not_set_ssl_chain_cert", want: "testintegrationv1alpha1smugglingrulecases-extraarg-7"},
		{test: strings.Repeat("a", 49) + "/xyz", want: strings.Repeat("a", 49) + "-7"},
	} {
		t.Run(tc.test, func(t *testing.T) {
			got := namespaceName(tc.test, 7)
			if got != tc.want {
				t.Errorf("namespaceName(%q) = %q, want %q", tc.test, got, tc.want)
			}
			if errs := validation.IsDNS1123Label(got); len(errs) > 0 {
				t.Errorf("namespaceName(%q) = %q, not a namespace name: %v", tc.test, got, errs)
			}
		})
	}
}
