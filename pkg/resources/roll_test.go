package resources

import (
	"bufio"
	"encoding/json"
	"os"
	"reflect"
	"regexp"
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"

	cachev1beta1 "github.com/kubelite/memcached-operator/pkg/apis/cache/v1beta1"
)

// What a spec change changes, as TestWhichFieldsRoll names it. Only
// rollTemplate restarts Pods.
const (
	rollTemplate       = "Pod template"
	rollDeploymentSpec = "Deployment spec"
	rollService        = "Service"
	rollPDB            = "PodDisruptionBudget"
	rollNetworkPolicy  = "NetworkPolicy"
)

// rollDoc is the page whose table "Which changes restart the Pods" says,
// for every spec field, what TestWhichFieldsRoll finds.
const rollDoc = "../../docs/api.md"

// TestWhichFieldsRoll changes one spec field at a time and checks which
// children change: a change of the Pod template rolls the Deployment, and
// so restarts every Pod and empties its part of the cache; the rest does
// not. It fails when a spec field has no row here, and when the table of
// docs/api.md says otherwise.
func TestWhichFieldsRoll(t *testing.T) {
	tls := func(s *cachev1beta1.MemcachedSpec) { s.TLS = &cachev1beta1.TLS{SecretName: "cache-tls"} }
	clientCASecret := func(s *cachev1beta1.MemcachedSpec) {
		tls(s)
		s.TLS.ClientCA = &cachev1beta1.ClientCA{SecretName: "client-ca"}
	}
	plaintext := func(s *cachev1beta1.MemcachedSpec) {
		tls(s)
		s.TLS.PlaintextPort = 11300
	}
	auth := func(s *cachev1beta1.MemcachedSpec) { s.Auth = &cachev1beta1.Auth{SecretName: "cache-auth"} }
	exporterOn := func(s *cachev1beta1.MemcachedSpec) {
		s.Monitoring = &cachev1beta1.Monitoring{Exporter: &cachev1beta1.Exporter{Enabled: true}}
	}
	policy := func(s *cachev1beta1.MemcachedSpec) { s.NetworkPolicy = &cachev1beta1.NetworkPolicy{} }
	peer := []cachev1beta1.NetworkPolicyPeer{{NamespaceSelector: &cachev1beta1.LabelSelector{MatchLabels: map[string]string{"team": "web"}}}}
	both := func(fs ...func(*cachev1beta1.MemcachedSpec)) func(*cachev1beta1.MemcachedSpec) {
		return func(s *cachev1beta1.MemcachedSpec) {
			for _, f := range fs {
				f(s)
			}
		}
	}
	template := []string{rollTemplate}

	tests := []struct {
		field  string // the spec field, as docs/api.md names it
		change string
		from   func(*cachev1beta1.MemcachedSpec) // nil: the defaults
		to     func(*cachev1beta1.MemcachedSpec)
		want   []string
	}{
		{field: "replicas", change: "1 to 3", to: func(s *cachev1beta1.MemcachedSpec) { s.Replicas = ptr.To[int32](3) }, want: []string{rollDeploymentSpec}},
		{field: "replicas", change: "1 to 0", to: func(s *cachev1beta1.MemcachedSpec) { s.Replicas = ptr.To[int32](0) }, want: []string{rollDeploymentSpec}},
		{field: "image", change: "another tag", to: func(s *cachev1beta1.MemcachedSpec) { s.Image = "memcached:1.6.40" }, want: template},
		{field: "memory", change: "64Mi to 128Mi", to: func(s *cachev1beta1.MemcachedSpec) { s.Memory = ptr.To(resource.MustParse("128Mi")) }, want: template},
		{field: "maxConnections", change: "1024 to 2048", to: func(s *cachev1beta1.MemcachedSpec) { s.MaxConnections = 2048 }, want: template},
		{field: "threads", change: "4 to 8", to: func(s *cachev1beta1.MemcachedSpec) { s.Threads = 8 }, want: template},
		{field: "port", change: "11211 to 11311", to: func(s *cachev1beta1.MemcachedSpec) { s.Port = 11311 }, want: []string{rollTemplate, rollService}},
		{field: "port", change: "with a NetworkPolicy", from: policy, to: both(policy, func(s *cachev1beta1.MemcachedSpec) { s.Port = 11311 }),
			want: []string{rollTemplate, rollService, rollNetworkPolicy}},
		{field: "maxItemSize", change: "set", to: func(s *cachev1beta1.MemcachedSpec) { s.MaxItemSize = ptr.To(resource.MustParse("2Mi")) }, want: template},
		{field: "extraArgs", change: "set", to: func(s *cachev1beta1.MemcachedSpec) { s.ExtraArgs = []string{"-o", "lru_crawler"} }, want: template},
		{field: "resources.requests.cpu", change: "set", to: func(s *cachev1beta1.MemcachedSpec) {
			s.Resources = &cachev1beta1.ResourceOverrides{Requests: &cachev1beta1.ResourceAmounts{CPU: "250m"}}
		}, want: template},
		{field: "resources.requests.memory", change: "set", to: func(s *cachev1beta1.MemcachedSpec) {
			s.Resources = &cachev1beta1.ResourceOverrides{Requests: &cachev1beta1.ResourceAmounts{Memory: "100Mi"}}
		}, want: template},
		{field: "resources.limits.cpu", change: "set", to: func(s *cachev1beta1.MemcachedSpec) {
			s.Resources = &cachev1beta1.ResourceOverrides{Limits: &cachev1beta1.ResourceAmounts{CPU: "2"}}
		}, want: template},
		{field: "resources.limits.memory", change: "set", to: func(s *cachev1beta1.MemcachedSpec) {
			s.Resources = &cachev1beta1.ResourceOverrides{Limits: &cachev1beta1.ResourceAmounts{Memory: "256Mi"}}
		}, want: template},
		{field: "tls.secretName", change: "set", to: tls, want: template},
		{field: "tls.secretName", change: "another Secret", from: tls, to: func(s *cachev1beta1.MemcachedSpec) {
			s.TLS = &cachev1beta1.TLS{SecretName: "cache-tls-2"}
		}, want: template},
		{field: "tls.clientCA.secretName", change: "set", from: tls, to: clientCASecret, want: template},
		{field: "tls.clientCA.secretName", change: "another Secret", from: clientCASecret, to: func(s *cachev1beta1.MemcachedSpec) {
			tls(s)
			s.TLS.ClientCA = &cachev1beta1.ClientCA{SecretName: "client-ca-2"}
		}, want: template},
		{field: "tls.clientCA.configMapName", change: "in place of the Secret", from: clientCASecret, to: func(s *cachev1beta1.MemcachedSpec) {
			tls(s)
			s.TLS.ClientCA = &cachev1beta1.ClientCA{ConfigMapName: "client-ca"}
		}, want: template},
		{field: "tls.plaintextPort", change: "set", from: tls, to: plaintext, want: []string{rollTemplate, rollService}},
		{field: "tls.plaintextPort", change: "set, with a NetworkPolicy", from: both(tls, policy), to: both(plaintext, policy), want: []string{rollTemplate, rollService, rollNetworkPolicy}},
		{field: "extstore.size", change: "set", to: func(s *cachev1beta1.MemcachedSpec) {
			s.Extstore = &cachev1beta1.Extstore{Size: resource.MustParse("10Gi")}
		}, want: template},
		{field: "extstore.size", change: "10Gi to 20Gi", from: func(s *cachev1beta1.MemcachedSpec) {
			s.Extstore = &cachev1beta1.Extstore{Size: resource.MustParse("10Gi")}
		}, to: func(s *cachev1beta1.MemcachedSpec) {
			s.Extstore = &cachev1beta1.Extstore{Size: resource.MustParse("20Gi")}
		}, want: template},
		{field: "extstore.storageClassName", change: "set", from: func(s *cachev1beta1.MemcachedSpec) {
			s.Extstore = &cachev1beta1.Extstore{Size: resource.MustParse("10Gi")}
		}, to: func(s *cachev1beta1.MemcachedSpec) {
			s.Extstore = &cachev1beta1.Extstore{Size: resource.MustParse("10Gi"), StorageClassName: ptr.To("fast")}
		}, want: template},
		{field: "auth.secretName", change: "set", to: auth, want: template},
		{field: "auth.secretName", change: "another Secret", from: auth, to: func(s *cachev1beta1.MemcachedSpec) {
			s.Auth = &cachev1beta1.Auth{SecretName: "cache-auth-2"}
		}, want: template},
		{field: "podDisruptionBudget.maxUnavailable", change: "set", to: func(s *cachev1beta1.MemcachedSpec) {
			s.PodDisruptionBudget = &cachev1beta1.DisruptionBudget{MaxUnavailable: ptr.To(intstr.FromString("50%"))}
		}, want: []string{rollPDB}},
		{field: "podDisruptionBudget.minAvailable", change: "set", to: func(s *cachev1beta1.MemcachedSpec) {
			s.PodDisruptionBudget = &cachev1beta1.DisruptionBudget{MinAvailable: ptr.To(intstr.FromInt32(1))}
		}, want: []string{rollPDB}},
		{field: "pod.labels", change: "set", to: func(s *cachev1beta1.MemcachedSpec) { podOf(s).Labels = map[string]string{"team": "web"} }, want: template},
		{field: "pod.annotations", change: "set", to: func(s *cachev1beta1.MemcachedSpec) {
			podOf(s).Annotations = map[string]string{"example.com/owner": "web"}
		}, want: template},
		{field: "pod.imagePullSecrets", change: "set", to: func(s *cachev1beta1.MemcachedSpec) {
			podOf(s).ImagePullSecrets = []corev1.LocalObjectReference{{Name: "registry"}}
		}, want: template},
		{field: "pod.terminationGracePeriodSeconds", change: "set", to: func(s *cachev1beta1.MemcachedSpec) {
			podOf(s).TerminationGracePeriodSeconds = ptr.To[int64](60)
		}, want: template},
		{field: "pod.preStopDelaySeconds", change: "5 to 0", to: func(s *cachev1beta1.MemcachedSpec) { podOf(s).PreStopDelaySeconds = ptr.To[int32](0) }, want: template},
		{field: "pod.preStopDelaySeconds", change: "the default written out", to: func(s *cachev1beta1.MemcachedSpec) {
			podOf(s).PreStopDelaySeconds = ptr.To[int32](defaultPreStopDelaySeconds)
		}},
		{field: "pod.topologySpreadConstraints", change: "set", to: func(s *cachev1beta1.MemcachedSpec) {
			podOf(s).TopologySpreadConstraints = []corev1.TopologySpreadConstraint{{MaxSkew: 1, TopologyKey: corev1.LabelTopologyZone, WhenUnsatisfiable: corev1.DoNotSchedule}}
		}, want: template},
		{field: "pod.nodeSelector", change: "set", to: func(s *cachev1beta1.MemcachedSpec) { podOf(s).NodeSelector = map[string]string{"pool": "cache"} }, want: template},
		{field: "pod.tolerations", change: "set", to: func(s *cachev1beta1.MemcachedSpec) {
			podOf(s).Tolerations = []corev1.Toleration{{Key: "dedicated", Operator: corev1.TolerationOpExists}}
		}, want: template},
		{field: "pod.affinity", change: "set", to: func(s *cachev1beta1.MemcachedSpec) {
			podOf(s).Affinity = &corev1.Affinity{NodeAffinity: &corev1.NodeAffinity{RequiredDuringSchedulingIgnoredDuringExecution: &corev1.NodeSelector{
				NodeSelectorTerms: []corev1.NodeSelectorTerm{{MatchExpressions: []corev1.NodeSelectorRequirement{{Key: "pool", Operator: corev1.NodeSelectorOpExists}}}},
			}}}
		}, want: template},
		{field: "pod.priorityClassName", change: "set", to: func(s *cachev1beta1.MemcachedSpec) { podOf(s).PriorityClassName = "high" }, want: template},
		{field: "monitoring.exporter.enabled", change: "turned on", to: exporterOn, want: []string{rollTemplate, rollService}},
		{field: "monitoring.exporter.enabled", change: "turned on with a NetworkPolicy with metrics peers",
			from: func(s *cachev1beta1.MemcachedSpec) { s.NetworkPolicy = &cachev1beta1.NetworkPolicy{Metrics: peer} },
			to:   both(exporterOn, func(s *cachev1beta1.MemcachedSpec) { s.NetworkPolicy = &cachev1beta1.NetworkPolicy{Metrics: peer} }),
			want: []string{rollTemplate, rollService, rollNetworkPolicy}},
		{field: "monitoring.exporter.image", change: "with the exporter on", from: exporterOn, to: both(exporterOn, func(s *cachev1beta1.MemcachedSpec) {
			s.Monitoring.Exporter.Image = "registry.example/memcached-exporter:v0.15.4"
		}), want: template},
		{field: "monitoring.exporter.image", change: "with the exporter off", to: func(s *cachev1beta1.MemcachedSpec) {
			s.Monitoring = &cachev1beta1.Monitoring{Exporter: &cachev1beta1.Exporter{Image: "registry.example/memcached-exporter:v0.15.4"}}
		}},
		{field: "networkPolicy", change: "{}", to: policy, want: []string{rollNetworkPolicy}},
		{field: "networkPolicy.clients", change: "set", from: policy, to: func(s *cachev1beta1.MemcachedSpec) {
			s.NetworkPolicy = &cachev1beta1.NetworkPolicy{Clients: peer}
		}, want: []string{rollNetworkPolicy}},
		{field: "networkPolicy.metrics", change: "set, with the exporter on", from: both(exporterOn, policy), to: both(exporterOn, func(s *cachev1beta1.MemcachedSpec) {
			s.NetworkPolicy = &cachev1beta1.NetworkPolicy{Metrics: peer}
		}), want: []string{rollNetworkPolicy}},
		{field: "zones", change: "set", to: func(s *cachev1beta1.MemcachedSpec) { s.Zones = []string{"a"} },
			want: []string{rollTemplate, rollDeploymentSpec, rollPDB}},
		{field: "zones", change: "a zone added", from: func(s *cachev1beta1.MemcachedSpec) { s.Zones = []string{"a"} },
			to: func(s *cachev1beta1.MemcachedSpec) { s.Zones = []string{"a", "b"} }},
		{field: "minReadySeconds", change: "10 to 60", to: func(s *cachev1beta1.MemcachedSpec) { s.MinReadySeconds = ptr.To[int32](60) }, want: []string{rollDeploymentSpec}},
		{field: "minReadySeconds", change: "10 to 0", to: func(s *cachev1beta1.MemcachedSpec) { s.MinReadySeconds = ptr.To[int32](0) }, want: []string{rollDeploymentSpec}},
		{field: "paused", change: "set", to: func(s *cachev1beta1.MemcachedSpec) { s.Paused = true }},
		{field: "deletionPolicy", change: "Orphan", to: func(s *cachev1beta1.MemcachedSpec) { s.DeletionPolicy = cachev1beta1.DeletionPolicyOrphan }},
		{field: "image, memory, maxConnections, threads, port, minReadySeconds", change: "the defaults written out", to: func(s *cachev1beta1.MemcachedSpec) {
			s.Image = cachev1beta1.DefaultImage
			s.Memory = ptr.To(resource.MustParse(cachev1beta1.DefaultMemory))
			s.MaxConnections, s.Threads, s.Port = 1024, 4, cachev1beta1.DefaultPort
			s.MinReadySeconds = ptr.To[int32](cachev1beta1.DefaultMinReadySeconds)
		}},
	}

	rolls := map[string]bool{} // field: whether some change of it rolls
	for _, tt := range tests {
		t.Run(tt.field+" "+tt.change, func(t *testing.T) {
			before, after := rollParts(t, memcached(tt.from)), rollParts(t, memcached(tt.to))
			var got []string
			for _, part := range []string{rollTemplate, rollDeploymentSpec, rollService, rollPDB, rollNetworkPolicy} {
				if before[part] != after[part] {
					got = append(got, part)
				}
			}
			if !slices.Equal(got, tt.want) {
				t.Errorf("changed %v, want %v", got, tt.want)
			}
		})
		for f := range strings.SplitSeq(tt.field, ", ") {
			rolls[f] = rolls[f] || slices.Contains(tt.want, rollTemplate)
		}
	}

	for _, f := range specFields(reflect.TypeFor[cachev1beta1.MemcachedSpec](), "") {
		if _, ok := rolls[f]; !ok {
			t.Errorf("spec.%s has no row in TestWhichFieldsRoll: add one, and a row to the table of %s", f, rollDoc)
		}
	}

	documented := rollTable(t)
	for f, roll := range rolls {
		doc, ok := documented[f]
		switch {
		case !ok:
			t.Errorf("%s: the table \"Which changes restart the Pods\" has no row for %s", rollDoc, f)
		case doc != roll:
			t.Errorf("%s: the table \"Which changes restart the Pods\" says %s restarts the Pods: %v; TestWhichFieldsRoll finds %v", rollDoc, f, doc, roll)
		}
	}
	for f := range documented {
		if _, ok := rolls[f]; !ok {
			t.Errorf("%s: the table \"Which changes restart the Pods\" has a row for %s, which TestWhichFieldsRoll does not change", rollDoc, f)
		}
	}
}

// rollParts returns, for each part of mc's children TestWhichFieldsRoll
// compares, a string that changes when the part does.
func rollParts(t *testing.T, mc *cachev1beta1.Memcached) map[string]string {
	t.Helper()
	c, err := Build(Default(mc))
	if err != nil {
		t.Fatal(err)
	}
	spec := *c.Pools[0].Deployment.Spec
	spec.Template = nil
	deploymentSpec, err := json.Marshal(spec)
	if err != nil {
		t.Fatal(err)
	}
	parts := map[string]string{
		rollTemplate:       c.Pools[0].Deployment.Annotations[TemplateHashAnnotation],
		rollDeploymentSpec: string(deploymentSpec),
		rollService:        c.Service.Annotations[SpecHashAnnotation],
		rollPDB:            c.Pools[0].PodDisruptionBudget.Annotations[SpecHashAnnotation],
	}
	if c.NetworkPolicy != nil {
		parts[rollNetworkPolicy] = c.NetworkPolicy.Annotations[SpecHashAnnotation]
	}
	return parts
}

// specFields lists the fields of a spec type by their JSON paths, going
// into the API's own structs and stopping at every other type (a
// Quantity, a corev1 type, a list).
func specFields(typ reflect.Type, prefix string) []string {
	var out []string
	for f := range typ.Fields() {
		name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
		ft := f.Type
		if ft.Kind() == reflect.Pointer {
			ft = ft.Elem()
		}
		if ft.Kind() == reflect.Struct && ft.PkgPath() == typ.PkgPath() {
			out = append(out, specFields(ft, prefix+name+".")...)
			continue
		}
		out = append(out, prefix+name)
	}
	return out
}

// rollTable reads the table "Which changes restart the Pods" of rollDoc:
// for each field named in a row's first column, whether its second says
// yes.
func rollTable(t *testing.T) map[string]bool {
	t.Helper()
	f, err := os.Open(rollDoc)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	field := regexp.MustCompile("`([a-zA-Z.]+)`")
	table := map[string]bool{}
	in := false
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := sc.Text()
		if strings.HasPrefix(line, "#") {
			in = line == "## Which changes restart the Pods"
			continue
		}
		cells := strings.Split(line, "|")
		if !in || len(cells) < 4 || !strings.HasPrefix(strings.TrimSpace(cells[1]), "`") {
			continue
		}
		roll := strings.TrimSpace(cells[2])
		if roll != "yes" && roll != "no" {
			t.Errorf("%s: %q: the second column must say yes or no", rollDoc, line)
		}
		for _, m := range field.FindAllStringSubmatch(cells[1], -1) {
			table[m[1]] = roll == "yes"
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	if len(table) == 0 {
		t.Fatalf("%s has no table under \"## Which changes restart the Pods\"", rollDoc)
	}
	return table
}
