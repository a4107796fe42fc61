package resources

import (
	"reflect"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	corev1ac "k8s.io/client-go/applyconfigurations/core/v1"
	"k8s.io/utils/ptr"

	cachev1beta1 "github.com/kubelite/memcached-operator/pkg/apis/cache/v1beta1"
)

// spread is a topology spread constraint as the tests read it back.
type spread struct {
	key, when      string
	selector       map[string]string
	matchLabelKeys []string
}

func spreadOf(cs []corev1ac.TopologySpreadConstraintApplyConfiguration) []spread {
	var out []spread
	for _, c := range cs {
		s := spread{key: ptr.Deref(c.TopologyKey, ""), when: string(ptr.Deref(c.WhenUnsatisfiable, "")), matchLabelKeys: c.MatchLabelKeys}
		if c.LabelSelector != nil {
			s.selector = c.LabelSelector.MatchLabels
		}
		out = append(out, s)
	}
	return out
}

func TestDeploymentPodSettings(t *testing.T) {
	selector := map[string]string{LabelName: AppName, LabelInstance: "cache"}
	defaultSpread := []spread{
		{key: corev1.LabelHostname, when: "ScheduleAnyway", selector: selector, matchLabelKeys: []string{"pod-template-hash"}},
		{key: corev1.LabelTopologyZone, when: "ScheduleAnyway", selector: selector, matchLabelKeys: []string{"pod-template-hash"}},
	}
	operatorLabels := map[string]string{LabelName: AppName, LabelInstance: "cache", LabelManagedBy: ManagedBy}
	defaultArgs := []string{"-m", "64", "-c", "1024", "-t", "4", "-p", "11211"}

	tests := []struct {
		name string
		spec func(*cachev1beta1.MemcachedSpec)

		wantSpread       []spread
		wantAffinity     bool
		wantLabels       map[string]string
		wantAnnotations  map[string]string
		wantPullSecrets  []string
		wantGrace        *int64
		wantPreStopSleep int64 // 0: no preStop hook
		wantArgs         []string
	}{
		{
			name:             "defaults spread across nodes and zones and delay the stop",
			wantSpread:       defaultSpread,
			wantLabels:       operatorLabels,
			wantPreStopSleep: 5,
			wantArgs:         defaultArgs,
		},
		{
			name: "user constraints replace the default and get the selector",
			spec: func(s *cachev1beta1.MemcachedSpec) {
				podOf(s).TopologySpreadConstraints = []corev1.TopologySpreadConstraint{
					{MaxSkew: 1, TopologyKey: corev1.LabelTopologyZone, WhenUnsatisfiable: corev1.DoNotSchedule},
					{MaxSkew: 2, TopologyKey: "rack", WhenUnsatisfiable: corev1.ScheduleAnyway,
						LabelSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"tier": "cache"}}},
				}
			},
			wantSpread: []spread{
				{key: corev1.LabelTopologyZone, when: "DoNotSchedule", selector: selector, matchLabelKeys: []string{"pod-template-hash"}},
				{key: "rack", when: "ScheduleAnyway", selector: map[string]string{"tier": "cache"}},
			},
			wantLabels:       operatorLabels,
			wantPreStopSleep: 5,
			wantArgs:         defaultArgs,
		},
		{
			name: "user affinity is passed as given, with no term of the operator's",
			spec: func(s *cachev1beta1.MemcachedSpec) {
				podOf(s).Affinity = &corev1.Affinity{NodeAffinity: &corev1.NodeAffinity{
					RequiredDuringSchedulingIgnoredDuringExecution: &corev1.NodeSelector{NodeSelectorTerms: []corev1.NodeSelectorTerm{{
						MatchExpressions: []corev1.NodeSelectorRequirement{{Key: "pool", Operator: corev1.NodeSelectorOpIn, Values: []string{"cache"}}},
					}}},
				}}
			},
			wantSpread:       defaultSpread,
			wantAffinity:     true,
			wantLabels:       operatorLabels,
			wantPreStopSleep: 5,
			wantArgs:         defaultArgs,
		},
		{
			name: "labels, annotations, pull secrets and stop timing",
			spec: func(s *cachev1beta1.MemcachedSpec) {
				p := podOf(s)
				p.Labels = map[string]string{"team": "web", LabelInstance: "other"}
				p.Annotations = map[string]string{"sidecar.istio.io/inject": "false"}
				p.ImagePullSecrets = []corev1.LocalObjectReference{{Name: "registry"}, {Name: "mirror"}}
				p.TerminationGracePeriodSeconds = ptr.To[int64](60)
				p.PreStopDelaySeconds = ptr.To[int32](15)
			},
			wantSpread: defaultSpread,
			// The operator's labels select the Pods and always win.
			wantLabels:       map[string]string{"team": "web", LabelName: AppName, LabelInstance: "cache", LabelManagedBy: ManagedBy},
			wantAnnotations:  map[string]string{"sidecar.istio.io/inject": "false"},
			wantPullSecrets:  []string{"registry", "mirror"},
			wantGrace:        ptr.To[int64](60),
			wantPreStopSleep: 15,
			wantArgs:         defaultArgs,
		},
		{
			name:       "a zero preStop delay sets no hook",
			spec:       func(s *cachev1beta1.MemcachedSpec) { podOf(s).PreStopDelaySeconds = ptr.To[int32](0) },
			wantSpread: defaultSpread,
			wantLabels: operatorLabels,
			wantArgs:   defaultArgs,
		},
		{
			name: "max item size and extra arguments follow the owned flags",
			spec: func(s *cachev1beta1.MemcachedSpec) {
				s.MaxItemSize = ptr.To(resource.MustParse("4Mi"))
				s.ExtraArgs = []string{"-o", "lru_crawler", "--disable-cas"}
			},
			wantSpread:       defaultSpread,
			wantLabels:       operatorLabels,
			wantPreStopSleep: 5,
			wantArgs:         []string{"-m", "64", "-c", "1024", "-t", "4", "-p", "11211", "-I", "4096k", "-o", "lru_crawler", "--disable-cas"},
		},
		{
			name: "a max item size that is not whole kibibytes rounds up",
			spec: func(s *cachev1beta1.MemcachedSpec) {
				s.MaxItemSize = resource.NewQuantity(1500, resource.DecimalSI)
			},
			wantSpread:       defaultSpread,
			wantLabels:       operatorLabels,
			wantPreStopSleep: 5,
			wantArgs:         []string{"-m", "64", "-c", "1024", "-t", "4", "-p", "11211", "-I", "2k"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d, err := Deployment(Default(memcached(tt.spec)))
			if err != nil {
				t.Fatalf("Deployment: %v", err)
			}
			tmpl := d.Spec.Template
			pod := tmpl.Spec
			if got := spreadOf(pod.TopologySpreadConstraints); !reflect.DeepEqual(got, tt.wantSpread) {
				t.Errorf("topologySpreadConstraints = %+v, want %+v", got, tt.wantSpread)
			}
			for _, c := range pod.TopologySpreadConstraints {
				if ptr.Deref(c.MaxSkew, 0) < 1 {
					t.Errorf("constraint %q has maxSkew %d", ptr.Deref(c.TopologyKey, ""), ptr.Deref(c.MaxSkew, 0))
				}
			}
			if got := pod.Affinity != nil; got != tt.wantAffinity {
				t.Errorf("affinity set = %v, want %v", got, tt.wantAffinity)
			}
			if !reflect.DeepEqual(tmpl.Labels, tt.wantLabels) {
				t.Errorf("template labels = %v, want %v", tmpl.Labels, tt.wantLabels)
			}
			if !reflect.DeepEqual(d.Spec.Selector.MatchLabels, map[string]string{LabelName: AppName, LabelInstance: "cache"}) {
				t.Errorf("selector = %v; user labels must not reach it", d.Spec.Selector.MatchLabels)
			}
			if !reflect.DeepEqual(tmpl.Annotations, tt.wantAnnotations) {
				t.Errorf("template annotations = %v, want %v", tmpl.Annotations, tt.wantAnnotations)
			}
			var secrets []string
			for _, s := range pod.ImagePullSecrets {
				secrets = append(secrets, ptr.Deref(s.Name, ""))
			}
			if !reflect.DeepEqual(secrets, tt.wantPullSecrets) {
				t.Errorf("imagePullSecrets = %v, want %v", secrets, tt.wantPullSecrets)
			}
			if !reflect.DeepEqual(pod.TerminationGracePeriodSeconds, tt.wantGrace) {
				t.Errorf("terminationGracePeriodSeconds = %v, want %v", ptr.Deref(pod.TerminationGracePeriodSeconds, -1), ptr.Deref(tt.wantGrace, -1))
			}
			mcd := container(t, pod, MemcachedContainerName)
			var sleep int64
			if mcd.Lifecycle != nil && mcd.Lifecycle.PreStop != nil && mcd.Lifecycle.PreStop.Sleep != nil {
				sleep = ptr.Deref(mcd.Lifecycle.PreStop.Sleep.Seconds, 0)
			}
			if sleep != tt.wantPreStopSleep {
				t.Errorf("preStop sleep = %d, want %d", sleep, tt.wantPreStopSleep)
			}
			if !reflect.DeepEqual(mcd.Args, tt.wantArgs) {
				t.Errorf("args = %v, want %v", mcd.Args, tt.wantArgs)
			}
		})
	}
}
