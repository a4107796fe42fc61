package metrics

import (
	"errors"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/prometheus/common/expfmt"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	cachev1beta1 "github.com/kubelite/memcached-operator/pkg/apis/cache/v1beta1"
)

func memcached(spec cachev1beta1.MemcachedSpec, conds ...metav1.Condition) *cachev1beta1.Memcached {
	return &cachev1beta1.Memcached{Spec: spec, Status: cachev1beta1.MemcachedStatus{Conditions: conds}}
}

func condition(t, status, reason string) metav1.Condition {
	return metav1.Condition{Type: t, Status: metav1.ConditionStatus(status), Reason: reason}
}

func TestInstancesCollector(t *testing.T) {
	tls := &cachev1beta1.TLS{SecretName: "cert"}
	tests := []struct {
		name  string
		items []*cachev1beta1.Memcached
		// metric is the family compared; want its exposition.
		metric, want string
	}{
		{
			name: "conditions: every type and status, a missing condition as Unknown",
			items: []*cachev1beta1.Memcached{
				memcached(cachev1beta1.MemcachedSpec{}, condition(cachev1beta1.ConditionAvailable, "True", cachev1beta1.ReasonMinimumReplicasAvailable)),
				memcached(cachev1beta1.MemcachedSpec{}, condition(cachev1beta1.ConditionImageVulnerable, "True", cachev1beta1.ReasonKnownVulnerability)),
			},
			metric: "memcached_operator_instances",
			want: `
memcached_operator_instances{condition="Available",status="False"} 0
memcached_operator_instances{condition="Available",status="True"} 1
memcached_operator_instances{condition="Available",status="Unknown"} 1
memcached_operator_instances{condition="Degraded",status="False"} 0
memcached_operator_instances{condition="Degraded",status="True"} 0
memcached_operator_instances{condition="Degraded",status="Unknown"} 2
memcached_operator_instances{condition="ImageVulnerable",status="False"} 0
memcached_operator_instances{condition="ImageVulnerable",status="True"} 1
memcached_operator_instances{condition="ImageVulnerable",status="Unknown"} 1
memcached_operator_instances{condition="Progressing",status="False"} 0
memcached_operator_instances{condition="Progressing",status="True"} 0
memcached_operator_instances{condition="Progressing",status="Unknown"} 2
`,
		},
		{
			name: "reasons: scaled to zero is told apart from unavailable, which is there at zero",
			items: []*cachev1beta1.Memcached{
				memcached(cachev1beta1.MemcachedSpec{}, condition(cachev1beta1.ConditionAvailable, "False", cachev1beta1.ReasonScaledToZero)),
				memcached(cachev1beta1.MemcachedSpec{}, condition(cachev1beta1.ConditionAvailable, "False", cachev1beta1.ReasonScaledToZero),
					condition(cachev1beta1.ConditionDegraded, "True", cachev1beta1.ReasonAuthSecretInvalid)),
			},
			metric: "memcached_operator_instances_by_reason",
			want: `
memcached_operator_instances_by_reason{condition="Available",reason="MinimumReplicasUnavailable",status="False"} 0
memcached_operator_instances_by_reason{condition="Available",reason="ScaledToZero",status="False"} 2
memcached_operator_instances_by_reason{condition="Degraded",reason="AuthSecretInvalid",status="True"} 1
`,
		},
		{
			name: "access: each combination in use, and none at all even at zero",
			items: []*cachev1beta1.Memcached{
				memcached(cachev1beta1.MemcachedSpec{Auth: &cachev1beta1.Auth{SecretName: "creds"}, TLS: tls}),
				memcached(cachev1beta1.MemcachedSpec{Auth: &cachev1beta1.Auth{SecretName: "creds"}, TLS: tls}),
				memcached(cachev1beta1.MemcachedSpec{TLS: &cachev1beta1.TLS{SecretName: "cert", ClientCA: &cachev1beta1.ClientCA{SecretName: "ca"}}, NetworkPolicy: &cachev1beta1.NetworkPolicy{}}),
			},
			metric: "memcached_operator_instances_by_access",
			want: `
memcached_operator_instances_by_access{auth="false",client_certificates="false",network_policy="false",tls="false"} 0
memcached_operator_instances_by_access{auth="false",client_certificates="true",network_policy="true",tls="true"} 1
memcached_operator_instances_by_access{auth="true",client_certificates="false",network_policy="false",tls="true"} 2
`,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := NewInstancesCollector(func() ([]*cachev1beta1.Memcached, error) { return tt.items, nil })
			got, err := testutil.CollectAndFormat(c, expfmt.TypeTextPlain, tt.metric)
			if err != nil {
				t.Fatal(err)
			}
			if samples := sampleLines(string(got)); samples != strings.TrimSpace(tt.want) {
				t.Errorf("got:\n%s\nwant:\n%s", samples, strings.TrimSpace(tt.want))
			}
		})
	}
}

// sampleLines drops the HELP and TYPE lines of an exposition.
func sampleLines(exposition string) string {
	var out []string
	for _, line := range strings.Split(exposition, "\n") {
		if line != "" && !strings.HasPrefix(line, "#") {
			out = append(out, line)
		}
	}
	return strings.Join(out, "\n")
}

func TestInstancesCollectorReportsAFailingList(t *testing.T) {
	reg := prometheus.NewRegistry()
	reg.MustRegister(NewInstancesCollector(func() ([]*cachev1beta1.Memcached, error) { return nil, errors.New("boom") }))
	if _, err := reg.Gather(); err == nil {
		t.Errorf("a failing list was not reported")
	}
}
