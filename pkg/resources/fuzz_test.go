package resources

import (
	"regexp"
	"strings"
	"testing"
	"unicode/utf8"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	metav1validation "k8s.io/apimachinery/pkg/apis/meta/v1/validation"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/utils/ptr"

	cachev1beta1 "github.com/kubelite/memcached-operator/pkg/apis/cache/v1beta1"
)

// fuzzInput holds the arguments of FuzzBuilders, one field per argument, in
// the same order.
type fuzzInput struct {
	replicas                                int32
	image                                   string
	memoryMB, maxConnections, threads, port int32
	reqCPU, limCPU, reqMem, limMem          string
	exporter                                bool
	tolerationKey, nodeLabel                string
	// minReadySeconds, plaintextPort and extstoreMiB: 0 leaves the field
	// unset, so an explicit minReadySeconds of 0 is not generated. A
	// plaintext port turns TLS on, with a Secret named tls; TLS without
	// one is not generated.
	minReadySeconds, plaintextPort, extstoreMiB int32
}

// fuzzSeeds is FuzzBuilders' seed corpus. TestIntegrationValidateAgreesWithAPIServer
// (test/integration/api/validate_test.go) submits the same seeds to a real
// apiserver; it cannot import this test file, so it repeats them as
// validateSeeds. Keep the two lists equal.
var fuzzSeeds = []fuzzInput{
	{1, "memcached:1.6.39", 64, 1024, 4, 11211, "", "", "", "", false, "", "", 0, 0, 0},
	{0, "", 16, 1, 1, 1, "500m", "2", "64Mi", "1Gi", true, "dedicated", "ssd", 300, 11212, 1024},
	{1000, "r/m:x", 65536, 65536, 64, 65535, "x", "-1", "1e3", "0.5", true, "", "", 301, 9150, 512},
	// A CPU request above its limit: Validate and the apiserver both refuse it.
	{3, "memcached:1.6", 1024, 4096, 8, 11211, "2", "1", "1Gi", "2Gi", false, "example.com/gpu", "pool-a", 5, 11212, 65536},
	// A CPU limit alone, below the computed CPU request, which the builder
	// must lower to it; port 9150 is free without the exporter, and 11211
	// then free for the plaintext port.
	{1, "", 64, 1024, 4, 9150, "", "50m", "", "", false, "", "", 60, 11211, 0},
}

// fuzzSpec turns FuzzBuilders' arguments into a Memcached. A zero number or
// empty string is a field left unset, for the CRD's default to fill; the
// resource overrides are set as soon as one amount is.
func fuzzSpec(in fuzzInput) *cachev1beta1.Memcached {
	mc := &cachev1beta1.Memcached{
		ObjectMeta: metav1.ObjectMeta{Name: "fuzz", Namespace: "ns", UID: "uid"},
		Spec: cachev1beta1.MemcachedSpec{
			Replicas:       ptr.To(in.replicas),
			Image:          in.image,
			MaxConnections: in.maxConnections,
			Threads:        in.threads,
			Port:           in.port,
			Monitoring:     &cachev1beta1.Monitoring{Exporter: &cachev1beta1.Exporter{Enabled: in.exporter}},
		},
	}
	if in.memoryMB != 0 {
		mc.Spec.Memory = resource.NewQuantity(int64(in.memoryMB)*mebibyte, resource.BinarySI)
	}
	if in.reqCPU+in.limCPU+in.reqMem+in.limMem != "" {
		mc.Spec.Resources = &cachev1beta1.ResourceOverrides{
			Requests: &cachev1beta1.ResourceAmounts{CPU: in.reqCPU, Memory: in.reqMem},
			Limits:   &cachev1beta1.ResourceAmounts{CPU: in.limCPU, Memory: in.limMem},
		}
	}
	if in.tolerationKey != "" {
		podOf(&mc.Spec).Tolerations = []corev1.Toleration{{Key: in.tolerationKey, Operator: corev1.TolerationOpExists}}
	}
	if in.nodeLabel != "" {
		podOf(&mc.Spec).NodeSelector = map[string]string{"pool": in.nodeLabel}
	}
	if in.minReadySeconds != 0 {
		mc.Spec.MinReadySeconds = ptr.To(in.minReadySeconds)
	}
	if in.plaintextPort != 0 {
		mc.Spec.TLS = &cachev1beta1.TLS{SecretName: "tls", PlaintextPort: in.plaintextPort}
	}
	if in.extstoreMiB != 0 {
		mc.Spec.Extstore = &cachev1beta1.Extstore{Size: *resource.NewQuantity(int64(in.extstoreMiB)*mebibyte, resource.BinarySI)}
	}
	return mc
}

// FuzzBuilders feeds arbitrary specs to Validate and the builders. None may
// panic; for any spec inside the CRD's ranges without a memory override the
// container memory limit must exceed -m; and Validate's verdict must match
// what the apiserver would do with the children, for every spec the CRD
// admits: Validate accepts exactly the specs whose children pass
// childProblems. Validate only ever sees specs the CRD admitted, so specs
// the CRD refuses are not held against it.
//
// `go test` runs the seeds; `go test -fuzz FuzzBuilders ./pkg/resources`
// explores. TestIntegrationValidateAgreesWithAPIServer asks a real apiserver
// the same question.
func FuzzBuilders(f *testing.F) {
	for _, in := range fuzzSeeds {
		f.Add(in.replicas, in.image, in.memoryMB, in.maxConnections, in.threads, in.port,
			in.reqCPU, in.limCPU, in.reqMem, in.limMem, in.exporter, in.tolerationKey, in.nodeLabel,
			in.minReadySeconds, in.plaintextPort, in.extstoreMiB)
	}
	f.Fuzz(func(t *testing.T, replicas int32, image string, memoryMB, maxConnections, threads, port int32,
		reqCPU, limCPU, reqMem, limMem string, exporter bool, tolerationKey, nodeLabel string,
		minReadySeconds, plaintextPort, extstoreMiB int32) {
		in := fuzzInput{replicas, image, memoryMB, maxConnections, threads, port,
			reqCPU, limCPU, reqMem, limMem, exporter, tolerationKey, nodeLabel,
			minReadySeconds, plaintextPort, extstoreMiB}
		mc := fuzzSpec(in)

		verdict := Validate(Default(mc))
		depAC, err := Deployment(Default(mc))
		if err != nil {
			t.Fatalf("Deployment: %v", err)
		}
		svcAC, err := Service(Default(mc))
		if err != nil {
			t.Fatalf("Service: %v", err)
		}
		_ = Endpoint(Default(mc))

		inRange := memoryMB >= 16 && memoryMB <= 65536 && maxConnections >= 1 && maxConnections <= 65536
		if inRange && mc.Spec.Resources == nil {
			limit := (*depAC.Spec.Template.Spec.Containers[0].Resources.Limits)[corev1.ResourceMemory]
			if limit.Cmp(*resource.NewQuantity(int64(memoryMB)*1024*1024, resource.BinarySI)) <= 0 {
				t.Errorf("memory limit %s does not exceed -m %d MiB", limit.String(), memoryMB)
			}
		}

		if !crdAdmits(mc) {
			return
		}
		dep, err := convert[appsv1.Deployment](depAC)
		if err != nil {
			t.Fatalf("converting the Deployment: %v", err)
		}
		svc, err := convert[corev1.Service](svcAC)
		if err != nil {
			t.Fatalf("converting the Service: %v", err)
		}
		problems := childProblems(dep, svc)
		switch {
		case len(verdict) == 0 && len(problems) > 0:
			t.Errorf("Validate accepts a spec the CRD admits, but the apiserver would refuse its children: %v\ninput: %#v",
				problems.ToAggregate(), in)
		case len(verdict) > 0 && len(problems) == 0:
			t.Errorf("Validate refuses a spec the CRD admits (%v), but the apiserver would accept its children: Validate is stricter than the apiserver\ninput: %#v",
				verdict.ToAggregate(), in)
		}
	})
}

// imagePattern is the CRD's pattern for spec.image. The apiserver matches
// OpenAPI patterns with Go's regexp, so \S means here what it means there:
// anything but ASCII whitespace.
var imagePattern = regexp.MustCompile(`^\S+$`)

// crdAdmits reports whether the Memcached CRD
// (artifacts/crd/cache.kubelite.io_memcacheds.yaml) admits mc: its schema
// (ranges, lengths, the image pattern, isQuantity) and CEL rules (memory
// limit above memory, port 9150 taken by the exporter, the plaintext port
// apart from both, an extstore size in whole MiB from 1Gi to 64Ti),
// applied as the apiserver does after defaulting. It models only the
// fields fuzzSpec sets; the CRD accepts any toleration key and
// nodeSelector value.
func crdAdmits(mc *cachev1beta1.Memcached) bool {
	s := withDefaults(mc.Spec)
	inRange := func(v, lo, hi int32) bool { return v >= lo && v <= hi }
	if !inRange(*s.Replicas, 0, 1000) || !inRange(memoryMiB(s), 16, 65536) || !inRange(s.MaxConnections, 1, 65536) ||
		!inRange(s.Threads, 1, 64) || !inRange(s.Port, 1, 65535) {
		return false
	}
	if utf8.RuneCountInString(s.Image) > 512 || !imagePattern.MatchString(s.Image) {
		return false
	}
	if exporterEnabled(s) && s.Port == cachev1beta1.ExporterPort {
		return false
	}
	if !inRange(*s.MinReadySeconds, 0, 300) {
		return false
	}
	if s.TLS != nil && s.TLS.PlaintextPort != 0 {
		p := s.TLS.PlaintextPort
		if !inRange(p, 1, 65535) || p == s.Port || (exporterEnabled(s) && p == cachev1beta1.ExporterPort) {
			return false
		}
	}
	if e := s.Extstore; e != nil {
		const minMiB, maxMiB = 1 << 10, 64 << 20 // 1Gi and 64Ti
		if size := e.Size.Value(); size%mebibyte != 0 || size < minMiB*mebibyte || size > maxMiB*mebibyte {
			return false
		}
	}
	r := s.Resources
	if r == nil {
		return true
	}
	for _, amounts := range []*cachev1beta1.ResourceAmounts{r.Requests, r.Limits} {
		if amounts == nil {
			continue
		}
		for _, value := range []string{amounts.CPU, amounts.Memory} {
			if _, err := resource.ParseQuantity(value); value != "" && (err != nil || utf8.RuneCountInString(value) > 32) {
				return false
			}
		}
	}
	if r.Limits != nil && r.Limits.Memory != "" {
		limit := resource.MustParse(r.Limits.Memory)
		return limit.Cmp(*s.Memory) > 0
	}
	return true
}

// childProblems reports what the apiserver's validation would refuse in the
// children, or in the Pods the Deployment's ReplicaSets create. It redoes,
// with the apimachinery helpers the apiserver uses, every check of
// k8s.io/kubernetes/pkg/apis/{apps,core}/validation that a value from the
// spec can reach; the module does not depend on k8s.io/kubernetes. It is
// an offline model: the integration test asks the real apiserver.
func childProblems(dep *appsv1.Deployment, svc *corev1.Service) field.ErrorList {
	var errs field.ErrorList
	d := field.NewPath("deployment")
	for _, msg := range validation.IsDNS1123Subdomain(dep.Name) {
		errs = append(errs, field.Invalid(d.Child("metadata", "name"), dep.Name, msg))
	}
	errs = append(errs, metav1validation.ValidateLabels(dep.Labels, d.Child("metadata", "labels"))...)
	if r := ptr.Deref(dep.Spec.Replicas, 0); r < 0 {
		errs = append(errs, field.Invalid(d.Child("spec", "replicas"), r, "must be greater than or equal to 0"))
	}
	selector, err := metav1.LabelSelectorAsSelector(dep.Spec.Selector)
	switch {
	case err != nil:
		errs = append(errs, field.Invalid(d.Child("spec", "selector"), dep.Spec.Selector, err.Error()))
	case selector.Empty():
		errs = append(errs, field.Invalid(d.Child("spec", "selector"), dep.Spec.Selector, "empty selector is invalid for deployment"))
	case !selector.Matches(labels.Set(dep.Spec.Template.Labels)):
		errs = append(errs, field.Invalid(d.Child("spec", "template", "metadata", "labels"), dep.Spec.Template.Labels, "`selector` does not match template `labels`"))
	}
	errs = append(errs, metav1validation.ValidateLabels(dep.Spec.Template.Labels, d.Child("spec", "template", "metadata", "labels"))...)
	// The apiserver defaults progressDeadlineSeconds to 600 before it
	// validates; the builders leave it unset.
	if m := dep.Spec.MinReadySeconds; m < 0 {
		errs = append(errs, field.Invalid(d.Child("spec", "minReadySeconds"), m, "must be greater than or equal to 0"))
	} else if p := ptr.Deref(dep.Spec.ProgressDeadlineSeconds, 600); p <= m {
		errs = append(errs, field.Invalid(d.Child("spec", "progressDeadlineSeconds"), p, "must be greater than minReadySeconds"))
	}
	errs = append(errs, podSpecProblems(&dep.Spec.Template.Spec, d.Child("spec", "template", "spec"))...)

	s := field.NewPath("service")
	for _, msg := range validation.IsDNS1035Label(svc.Name) {
		errs = append(errs, field.Invalid(s.Child("metadata", "name"), svc.Name, msg))
	}
	errs = append(errs, metav1validation.ValidateLabels(svc.Labels, s.Child("metadata", "labels"))...)
	errs = append(errs, metav1validation.ValidateLabels(svc.Spec.Selector, s.Child("spec", "selector"))...)
	names := map[string]bool{}
	type portKey struct {
		port     int32
		protocol corev1.Protocol
	}
	ports := map[portKey]bool{}
	for i, p := range svc.Spec.Ports {
		path := s.Child("spec", "ports").Index(i)
		switch {
		case p.Name == "" && len(svc.Spec.Ports) > 1:
			errs = append(errs, field.Required(path.Child("name"), ""))
		case p.Name == "":
		case names[p.Name]:
			errs = append(errs, field.Duplicate(path.Child("name"), p.Name))
		default:
			for _, msg := range validation.IsDNS1123Label(p.Name) {
				errs = append(errs, field.Invalid(path.Child("name"), p.Name, msg))
			}
			names[p.Name] = true
		}
		for _, msg := range validation.IsValidPortNum(int(p.Port)) {
			errs = append(errs, field.Invalid(path.Child("port"), p.Port, msg))
		}
		if key := (portKey{p.Port, p.Protocol}); ports[key] {
			errs = append(errs, field.Duplicate(path, key))
		} else {
			ports[key] = true
		}
		errs = append(errs, portNumOrNameProblems(p.TargetPort, path.Child("targetPort"))...)
	}
	return errs
}

// podSpecProblems is childProblems for a Pod template's spec.
func podSpecProblems(spec *corev1.PodSpec, path *field.Path) field.ErrorList {
	errs := metav1validation.ValidateLabels(spec.NodeSelector, path.Child("nodeSelector"))
	for i, tol := range spec.Tolerations {
		p := path.Child("tolerations").Index(i)
		if tol.Key != "" {
			errs = append(errs, metav1validation.ValidateLabelName(tol.Key, p.Child("key"))...)
		} else if tol.Operator != corev1.TolerationOpExists {
			errs = append(errs, field.Invalid(p.Child("operator"), tol.Operator, "operator must be Exists when `key` is empty"))
		}
		switch tol.Operator {
		case corev1.TolerationOpExists:
			if tol.Value != "" {
				errs = append(errs, field.Invalid(p.Child("operator"), tol.Value, "value must be empty when `operator` is 'Exists'"))
			}
		case corev1.TolerationOpEqual, "":
			for _, msg := range validation.IsValidLabelValue(tol.Value) {
				errs = append(errs, field.Invalid(p.Child("operator"), tol.Value, msg))
			}
		default:
			errs = append(errs, field.NotSupported(p.Child("operator"), tol.Operator, []corev1.TolerationOperator{corev1.TolerationOpEqual, corev1.TolerationOpExists}))
		}
	}
	containerNames := map[string]bool{}
	for i, c := range spec.Containers {
		p := path.Child("containers").Index(i)
		for _, msg := range validation.IsDNS1123Label(c.Name) {
			errs = append(errs, field.Invalid(p.Child("name"), c.Name, msg))
		}
		if containerNames[c.Name] {
			errs = append(errs, field.Duplicate(p.Child("name"), c.Name))
		}
		containerNames[c.Name] = true
		// A template takes any non-empty image, but the ReplicaSet's Pods
		// are refused one with surrounding whitespace.
		if c.Image == "" {
			errs = append(errs, field.Required(p.Child("image"), ""))
		} else if strings.TrimSpace(c.Image) != c.Image {
			errs = append(errs, field.Invalid(p.Child("image"), c.Image, "must not have leading or trailing whitespace"))
		}
		portNames := map[string]bool{}
		for j, port := range c.Ports {
			pp := p.Child("ports").Index(j)
			if port.Name != "" {
				for _, msg := range validation.IsValidPortName(port.Name) {
					errs = append(errs, field.Invalid(pp.Child("name"), port.Name, msg))
				}
				if portNames[port.Name] {
					errs = append(errs, field.Duplicate(pp.Child("name"), port.Name))
				}
				portNames[port.Name] = true
			}
			for _, msg := range validation.IsValidPortNum(int(port.ContainerPort)) {
				errs = append(errs, field.Invalid(pp.Child("containerPort"), port.ContainerPort, msg))
			}
		}
		for _, probe := range []*corev1.Probe{c.ReadinessProbe, c.LivenessProbe} {
			if probe != nil && probe.TCPSocket != nil {
				errs = append(errs, portNumOrNameProblems(probe.TCPSocket.Port, p.Child("probe", "tcpSocket", "port"))...)
			}
		}
		errs = append(errs, resourceProblems(c.Resources, p.Child("resources"))...)
	}
	return errs
}

// resourceProblems checks a container's requests and limits as the
// apiserver does: no amount is negative and no request exceeds its limit.
func resourceProblems(r corev1.ResourceRequirements, path *field.Path) field.ErrorList {
	var errs field.ErrorList
	for name, limit := range r.Limits {
		if limit.Sign() < 0 {
			errs = append(errs, field.Invalid(path.Child("limits").Key(string(name)), limit.String(), "must be greater than or equal to 0"))
		}
	}
	for name, request := range r.Requests {
		if request.Sign() < 0 {
			errs = append(errs, field.Invalid(path.Child("requests").Key(string(name)), request.String(), "must be greater than or equal to 0"))
		}
		if limit, ok := r.Limits[name]; ok && request.Cmp(limit) > 0 {
			errs = append(errs, field.Invalid(path.Child("requests"), request.String(),
				"must be less than or equal to "+string(name)+" limit of "+limit.String()))
		}
	}
	return errs
}

// portNumOrNameProblems checks a port given by number or by name.
func portNumOrNameProblems(port intstr.IntOrString, path *field.Path) field.ErrorList {
	var msgs []string
	if port.Type == intstr.String {
		msgs = validation.IsValidPortName(port.StrVal)
	} else {
		msgs = validation.IsValidPortNum(port.IntValue())
	}
	var errs field.ErrorList
	for _, msg := range msgs {
		errs = append(errs, field.Invalid(path, port.String(), msg))
	}
	return errs
}

// TestChildProblems shows that FuzzBuilders' oracle can fail: each broken
// child must draw a problem at the path the apiserver would name, and the
// children of a valid spec none.
func TestChildProblems(t *testing.T) {
	tests := []struct {
		name     string
		mutate   func(*appsv1.Deployment, *corev1.Service)
		wantPath string // "" when there must be no problem
	}{
		{name: "valid children", mutate: func(*appsv1.Deployment, *corev1.Service) {}},
		{name: "negative replicas", wantPath: "deployment.spec.replicas", mutate: func(d *appsv1.Deployment, _ *corev1.Service) {
			d.Spec.Replicas = ptr.To[int32](-1)
		}},
		{name: "selector not matching the template", wantPath: "deployment.spec.template.metadata.labels", mutate: func(d *appsv1.Deployment, _ *corev1.Service) {
			d.Spec.Template.Labels = map[string]string{"app": "other"}
		}},
		{name: "node selector value not a label value", wantPath: "deployment.spec.template.spec.nodeSelector", mutate: func(d *appsv1.Deployment, _ *corev1.Service) {
			d.Spec.Template.Spec.NodeSelector = map[string]string{"pool": "a b"}
		}},
		{name: "toleration key not a qualified name", wantPath: "deployment.spec.template.spec.tolerations[0].key", mutate: func(d *appsv1.Deployment, _ *corev1.Service) {
			d.Spec.Template.Spec.Tolerations = []corev1.Toleration{{Key: "a b", Operator: corev1.TolerationOpExists}}
		}},
		{name: "image with trailing whitespace", wantPath: "deployment.spec.template.spec.containers[0].image", mutate: func(d *appsv1.Deployment, _ *corev1.Service) {
			d.Spec.Template.Spec.Containers[0].Image = "memcached\u00a0"
		}},
		{name: "container port out of range", wantPath: "deployment.spec.template.spec.containers[0].ports[0].containerPort", mutate: func(d *appsv1.Deployment, _ *corev1.Service) {
			d.Spec.Template.Spec.Containers[0].Ports[0].ContainerPort = 65536
		}},
		{name: "request above limit", wantPath: "deployment.spec.template.spec.containers[0].resources.requests", mutate: func(d *appsv1.Deployment, _ *corev1.Service) {
			d.Spec.Template.Spec.Containers[0].Resources.Requests[corev1.ResourceMemory] = resource.MustParse("1Gi")
		}},
		{name: "negative limit", wantPath: "deployment.spec.template.spec.containers[0].resources.limits[cpu]", mutate: func(d *appsv1.Deployment, _ *corev1.Service) {
			d.Spec.Template.Spec.Containers[0].Resources.Limits[corev1.ResourceCPU] = resource.MustParse("-1")
		}},
		{name: "negative minReadySeconds", wantPath: "deployment.spec.minReadySeconds", mutate: func(d *appsv1.Deployment, _ *corev1.Service) {
			d.Spec.MinReadySeconds = -1
		}},
		{name: "minReadySeconds at the defaulted progress deadline", wantPath: "deployment.spec.progressDeadlineSeconds", mutate: func(d *appsv1.Deployment, _ *corev1.Service) {
			d.Spec.MinReadySeconds = 600
		}},
		{name: "minReadySeconds below the defaulted progress deadline", mutate: func(d *appsv1.Deployment, _ *corev1.Service) {
			d.Spec.MinReadySeconds = 599
		}},
		{name: "service port out of range", wantPath: "service.spec.ports[0].port", mutate: func(_ *appsv1.Deployment, s *corev1.Service) {
			s.Spec.Ports[0].Port = 0
		}},
		{name: "duplicate service port", wantPath: "service.spec.ports[1]", mutate: func(_ *appsv1.Deployment, s *corev1.Service) {
			s.Spec.Ports = append(s.Spec.Ports, s.Spec.Ports[0])
			s.Spec.Ports[1].Name = "other"
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			mc := memcached(nil)
			depAC, err := Deployment(Default(mc))
			if err != nil {
				t.Fatal(err)
			}
			svcAC, err := Service(Default(mc))
			if err != nil {
				t.Fatal(err)
			}
			dep, err := convert[appsv1.Deployment](depAC)
			if err != nil {
				t.Fatal(err)
			}
			svc, err := convert[corev1.Service](svcAC)
			if err != nil {
				t.Fatal(err)
			}
			tt.mutate(dep, svc)
			problems := childProblems(dep, svc)
			if tt.wantPath == "" {
				if len(problems) > 0 {
					t.Fatalf("childProblems = %v, want none", problems)
				}
				return
			}
			for _, p := range problems {
				if p.Field == tt.wantPath {
					return
				}
			}
			t.Errorf("childProblems = %v, want one at %s", problems, tt.wantPath)
		})
	}
}

// TestCRDAdmits checks FuzzBuilders' model of the CRD against verdicts of
// the real one, from TestIntegrationBadInputRejected and, for the specs the
// CRD admits but the children's validation refuses (whitespace outside
// ASCII, a negative amount, any toleration key), from
// TestIntegrationValidateAgreesWithAPIServer. A wrong model would make the
// fuzz oracle skip specs the CRD admits or judge specs it refuses.
func TestCRDAdmits(t *testing.T) {
	valid := fuzzSeeds[0]
	tests := []struct {
		name   string
		mutate func(*fuzzInput)
		want   bool
	}{
		{name: "defaults", mutate: func(*fuzzInput) {}, want: true},
		{name: "every field unset", mutate: func(in *fuzzInput) { *in = fuzzInput{} }, want: true},
		{name: "negative replicas", mutate: func(in *fuzzInput) { in.replicas = -1 }},
		{name: "too little memory", mutate: func(in *fuzzInput) { in.memoryMB = 1 }},
		{name: "too many threads", mutate: func(in *fuzzInput) { in.threads = 65 }},
		{name: "port above 65535", mutate: func(in *fuzzInput) { in.port = 65536 }},
		{name: "image with whitespace", mutate: func(in *fuzzInput) { in.image = "memcached latest" }},
		{name: "image with non-ASCII whitespace", mutate: func(in *fuzzInput) { in.image = "memcached\u00a0" }, want: true},
		{name: "memory limit below memoryMB", mutate: func(in *fuzzInput) { in.memoryMB, in.limMem = 512, "256Mi" }},
		{name: "memory limit above memoryMB", mutate: func(in *fuzzInput) { in.memoryMB, in.limMem = 512, "513Mi" }, want: true},
		{name: "not a quantity", mutate: func(in *fuzzInput) { in.reqCPU = "one" }},
		{name: "negative quantity", mutate: func(in *fuzzInput) { in.reqCPU = "-1" }, want: true},
		{name: "exporter port clash", mutate: func(in *fuzzInput) { in.port, in.exporter = 9150, true }},
		{name: "any toleration key and node label", mutate: func(in *fuzzInput) { in.tolerationKey, in.nodeLabel = "a b", "c d" }, want: true},
		{name: "minReadySeconds at its maximum", mutate: func(in *fuzzInput) { in.minReadySeconds = 300 }, want: true},
		{name: "minReadySeconds above its maximum", mutate: func(in *fuzzInput) { in.minReadySeconds = 301 }},
		{name: "negative minReadySeconds", mutate: func(in *fuzzInput) { in.minReadySeconds = -1 }},
		{name: "plaintext port beside the port", mutate: func(in *fuzzInput) { in.plaintextPort = 11212 }, want: true},
		{name: "plaintext port on the defaulted port", mutate: func(in *fuzzInput) { in.port, in.plaintextPort = 0, 11211 }},
		{name: "plaintext port above 65535", mutate: func(in *fuzzInput) { in.plaintextPort = 65536 }},
		{name: "plaintext port 9150 without the exporter", mutate: func(in *fuzzInput) { in.plaintextPort = 9150 }, want: true},
		{name: "plaintext port 9150 with the exporter", mutate: func(in *fuzzInput) { in.plaintextPort, in.exporter = 9150, true }},
		{name: "extstore below 1Gi", mutate: func(in *fuzzInput) { in.extstoreMiB = 1023 }},
		{name: "extstore of 1Gi", mutate: func(in *fuzzInput) { in.extstoreMiB = 1024 }, want: true},
		{name: "extstore of 64Ti", mutate: func(in *fuzzInput) { in.extstoreMiB = 64 << 20 }, want: true},
		{name: "extstore above 64Ti", mutate: func(in *fuzzInput) { in.extstoreMiB = 64<<20 + 1 }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			in := valid
			tt.mutate(&in)
			if got := crdAdmits(fuzzSpec(in)); got != tt.want {
				t.Errorf("crdAdmits(%#v) = %v, want %v", in, got, tt.want)
			}
		})
	}
}
