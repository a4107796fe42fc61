package main

import (
	"cmp"
	"strings"
	"testing"

	"github.com/spf13/pflag"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	kubeinformers "k8s.io/client-go/informers"
	k8sfake "k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/rest"

	"github.com/kubelite/memcached-operator/pkg/childcache"
	"github.com/kubelite/memcached-operator/pkg/generated/clientset/versioned/fake"
	informers "github.com/kubelite/memcached-operator/pkg/generated/informers/externalversions"
)

func TestOptionsComplete(t *testing.T) {
	tests := []struct {
		name            string
		args            []string
		env             string
		wantLeaderElect bool
		wantNamespaces  []string
		// wantWebhook is --webhook-bind-address once completed; empty
		// means the default, :9443.
		wantWebhook string
	}{
		{name: "in-cluster defaults", wantLeaderElect: true},
		{name: "kubeconfig flag turns leader election off", args: []string{"--kubeconfig=/k"}},
		{name: "KUBECONFIG turns leader election off", env: "/k"},
		{name: "explicit leader election wins", args: []string{"--kubeconfig=/k", "--leader-elect=true"}, wantLeaderElect: true},
		{name: "namespaces repeated and comma separated, the webhook off", args: []string{"--namespace=a,b", "--namespace", "c", "--namespace= "},
			wantLeaderElect: true, wantNamespaces: []string{"a", "b", "c"}, wantWebhook: "0"},
		{name: "a namespaced install that asks for the webhook", args: []string{"--namespace=a", "--webhook-bind-address=:9443"},
			wantLeaderElect: true, wantNamespaces: []string{"a"}},
		{name: "blank namespaces are all namespaces", args: []string{"--namespace= "}, wantLeaderElect: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Setenv("KUBECONFIG", tt.env)
			fs := pflag.NewFlagSet("test", pflag.ContinueOnError)
			o := newOptions()
			o.addFlags(fs)
			if err := fs.Parse(tt.args); err != nil {
				t.Fatal(err)
			}
			o.complete(fs)
			if o.leaderElect != tt.wantLeaderElect {
				t.Errorf("leaderElect = %v, want %v", o.leaderElect, tt.wantLeaderElect)
			}
			if len(o.namespaces) != len(tt.wantNamespaces) {
				t.Fatalf("namespaces = %q, want %q", o.namespaces, tt.wantNamespaces)
			}
			for i := range o.namespaces {
				if o.namespaces[i] != tt.wantNamespaces[i] {
					t.Errorf("namespaces = %q, want %q", o.namespaces, tt.wantNamespaces)
				}
			}
			if want := cmp.Or(tt.wantWebhook, ":9443"); o.webhookBindAddress != want {
				t.Errorf("webhookBindAddress = %q, want %q", o.webhookBindAddress, want)
			}
			if err := o.validate(); err != nil {
				t.Errorf("validate: %v", err)
			}
		})
	}
}

func TestOptionsValidate(t *testing.T) {
	tests := []struct {
		name string
		args []string
		want []string // What the error must mention.
	}{
		{
			name: "counts and durations",
			args: []string{"--workers=0", "--leader-elect-renew-deadline=20s", "--shutdown-timeout=0s"},
			want: []string{"--workers", "renew deadline", "--shutdown-timeout"},
		},
		{
			name: "client limit of zero",
			args: []string{"--kube-api-qps=0"},
			want: []string{"--kube-api-qps must be positive, or negative"},
		},
		{
			name: "client limit without a burst",
			args: []string{"--kube-api-qps=200", "--kube-api-burst=0"},
			want: []string{"--kube-api-burst must be at least 1"},
		},
		{
			name: "metrics certificate without its key",
			args: []string{"--metrics-tls-cert-file=/tls/tls.crt"},
			want: []string{"given together"},
		},
		{
			name: "metrics certificate on plain HTTP",
			args: []string{"--metrics-secure=false", "--metrics-tls-cert-file=/tls/tls.crt", "--metrics-tls-private-key-file=/tls/tls.key"},
			want: []string{"need --metrics-secure"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			fs := pflag.NewFlagSet("test", pflag.ContinueOnError)
			o := newOptions()
			o.addFlags(fs)
			if err := fs.Parse(tt.args); err != nil {
				t.Fatal(err)
			}
			o.complete(fs)
			err := o.validate()
			if err == nil {
				t.Fatal("validate accepted invalid flags")
			}
			for _, want := range tt.want {
				if !strings.Contains(err.Error(), want) {
					t.Errorf("error %q does not mention %s", err, want)
				}
			}
		})
	}
}

func TestScopedListers(t *testing.T) {
	inA := newMemcached("cache")
	inA.Namespace = "a"
	client := fake.NewClientset()
	kubeClient := k8sfake.NewClientset()

	var scopes []childcache.InformerScope
	for _, ns := range []string{"a", "b"} {
		mcf := informers.NewSharedInformerFactoryWithOptions(client, 0, informers.WithNamespace(ns))
		kf := kubeinformers.NewSharedInformerFactoryWithOptions(kubeClient, 0, kubeinformers.WithNamespace(ns), childTransform())
		scopes = append(scopes, childcache.InformerScope{
			Namespace:            ns,
			Memcacheds:           mcf.Cache().V1beta1().Memcacheds(),
			Deployments:          kf.Apps().V1().Deployments(),
			Services:             kf.Core().V1().Services(),
			PodDisruptionBudgets: kf.Policy().V1().PodDisruptionBudgets(),
			NetworkPolicies:      kf.Networking().V1().NetworkPolicies(),
			Secrets:              kf.Core().V1().Secrets(),
			ConfigMaps:           kf.Core().V1().ConfigMaps(),
			Claims:               kf.Core().V1().PersistentVolumeClaims(),
		})
	}
	// Seed the namespace-a cache only; what an informer of namespace a
	// would hold.
	if err := scopes[0].Memcacheds.Informer().GetIndexer().Add(inA); err != nil {
		t.Fatal(err)
	}
	mcs := childcache.NewListers(scopes).Memcacheds
	if got, err := mcs.Get("a", "cache"); err != nil || got.Namespace != "a" {
		t.Errorf("Get(a/cache) = %v, %v", got, err)
	}
	if _, err := mcs.Get("b", "cache"); !apierrors.IsNotFound(err) {
		t.Errorf("Get(b/cache) error = %v, want NotFound", err)
	}
	if _, err := mcs.Get("c", "cache"); !apierrors.IsNotFound(err) {
		t.Errorf("Get of a namespace out of scope = %v, want NotFound", err)
	}
	if list, err := mcs.List(); err != nil || len(list) != 1 {
		t.Errorf("List = %d objects, %v; want 1", len(list), err)
	}
}

// TestWithUserAgent checks that each of the operator's clients is named
// for its purpose after the operator's own name, and that the operator's
// configuration is left as it was.
func TestWithUserAgent(t *testing.T) {
	tests := []struct {
		name, base string
		wantPrefix string
	}{
		{name: "the binary's agent", base: controllerAgentName, wantPrefix: controllerAgentName + "/"},
		{name: "no agent set", base: "", wantPrefix: rest.DefaultKubernetesUserAgent() + "/"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg := &rest.Config{UserAgent: tt.base}
			got := withUserAgent(cfg, "leader-election")
			if want := tt.wantPrefix + "leader-election"; got.UserAgent != want {
				t.Errorf("user agent %q, want %q", got.UserAgent, want)
			}
			if cfg.UserAgent != tt.base {
				t.Errorf("the operator's configuration changed to %q", cfg.UserAgent)
			}
		})
	}
}
