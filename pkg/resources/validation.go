package resources

import (
	"regexp"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	apimachineryvalidation "k8s.io/apimachinery/pkg/api/validation"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	metav1validation "k8s.io/apimachinery/pkg/apis/meta/v1/validation"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/utils/ptr"

	cachev1beta1 "github.com/kubelite/memcached-operator/pkg/apis/cache/v1beta1"
)

// Validate reports what is wrong with a Memcached before the operator
// builds anything from it. It refuses two kinds of spec:
//
//   - What the v1beta1 schema refuses: every x-kubernetes-validations (CEL)
//     rule of the CRD's v1beta1 schema, and the OpenAPI bounds of the fields
//     that v1alpha1 carries only in its cache.kubelite.io/v1beta1-spec
//     annotation. The apiserver runs only the schema of the version a
//     request uses, so a v1alpha1 write runs none of these, and an object
//     stored before a rule existed never met it; without this check either
//     would render children that no v1beta1 write could ask for, such as
//     memcached told -m twice, or told not to check the client
//     certificates the spec requires. TestValidateRefusesWhatTheCRDRefuses
//     holds this list to the CRD's, rule for rule.
//   - What the schema lets through but the apiserver would refuse in the
//     children: a request above a limit the operator computes, the label
//     syntax of Kubernetes types the CRD embeds without their rules
//     (nodeSelector, tolerations), or checks the apiserver applies only to
//     Pods, so that a Deployment would be accepted and never get one (an
//     image with Unicode whitespace). TestIntegrationValidateAgreesWithAPIServer
//     holds it to the apiserver's verdicts.
//
// The sync shows any error as InvalidSpec and leaves the children as they
// are.
func Validate(d Defaulted) field.ErrorList {
	s := d.Spec
	spec := field.NewPath("spec")
	var errs field.ErrorList
	errs = append(errs, validateName(d.Memcached.Name, field.NewPath("metadata", "name"))...)
	errs = append(errs, validateImage(s.Image, spec.Child("image"))...)
	if e := exporter(s); e != nil {
		errs = append(errs, validateImage(e.Image, spec.Child("monitoring", "exporter", "image"))...)
	}
	errs = append(errs, validateMemory(s.Memory, spec.Child("memory"))...)
	errs = append(errs, validateMaxItemSize(s, spec.Child("maxItemSize"))...)
	errs = append(errs, validateExtstore(s, spec)...)
	errs = append(errs, validateResources(s, spec.Child("resources"))...)
	errs = append(errs, validateMemoryLimit(s, spec.Child("resources", "limits", "memory"))...)
	errs = append(errs, validateExporter(s, spec)...)
	errs = append(errs, validatePlaintextPort(s, spec.Child("tls", "plaintextPort"))...)
	errs = append(errs, validateExtraArgs(s, spec.Child("extraArgs"))...)
	errs = append(errs, validateTLS(s.TLS, spec.Child("tls"))...)
	if s.Auth != nil {
		errs = append(errs, validateObjectName(s.Auth.SecretName, "Secret", spec.Child("auth", "secretName"))...)
	}
	errs = append(errs, validateDisruptionBudget(s.PodDisruptionBudget, spec.Child("podDisruptionBudget"))...)
	if m := s.MinReadySeconds; m != nil && (*m < 0 || *m > maxMinReadySeconds) {
		errs = append(errs, field.Invalid(spec.Child("minReadySeconds"), *m, "must be between 0 and "+strconv.Itoa(maxMinReadySeconds)))
	}
	errs = append(errs, validatePod(pod(s), spec.Child("pod"))...)
	errs = append(errs, validateNetworkPolicy(s.NetworkPolicy, spec.Child("networkPolicy"))...)
	errs = append(errs, validateZones(d.Memcached.Name, s.Zones, spec.Child("zones"))...)
	// Some checks range over maps: a stable order keeps the status message,
	// and so the status, the same from one sync to the next.
	slices.SortStableFunc(errs, func(a, b *field.Error) int {
		return strings.Compare(a.Field+"\x00"+a.Detail, b.Field+"\x00"+b.Detail)
	})
	return errs
}

// Bounds of the v1beta1 schema, as the markers of
// pkg/apis/cache/v1beta1/types.go and hack/tools/cmd/crdbounds set them.
const (
	// maxKeyLength is the longest label or annotation key Kubernetes
	// allows: a 253-character prefix, '/', and a 63-character name.
	maxKeyLength = 317
	// maxLabelValueLength is the longest label value Kubernetes allows.
	maxLabelValueLength = 63
	// maxObjectNameLength is the longest name of a Secret or ConfigMap.
	maxObjectNameLength = 253
	// maxQuantityLength bounds the strings of memory and maxItemSize.
	maxQuantityLength = 32

	maxExtraArgs            = 64
	maxExtraArgLength       = 1024
	maxExtraArgsLength      = 4096
	maxZones                = 8
	maxZoneLength           = 61
	maxPoolNameLength       = 62
	maxPodMapEntries        = 64
	maxPodAnnotationsLength = 8192
	maxImagePullSecrets     = 16
	maxGracePeriodSeconds   = 3600
	maxPreStopDelaySeconds  = 300
	// maxMinReadySeconds keeps minReadySeconds below the Deployment's
	// default progressDeadlineSeconds, 600, which the apiserver requires.
	maxMinReadySeconds = 300
	// defaultGracePeriodSeconds is Kubernetes' terminationGracePeriodSeconds
	// when the Pod leaves it out.
	defaultGracePeriodSeconds = 30

	maxSpreadConstraints    = 8
	maxSpreadEntries        = 32
	maxNodeAffinityEntries  = 32
	maxPodAffinityEntries   = 16
	maxNetworkPolicyPeers   = 16
	maxNetworkPolicyEntries = 24
	maxSelectorLabels       = 32
	maxSelectorRequirements = 16
	maxRequirementValues    = 64
	maxLabelKeys            = 16
	maxKubernetesEnumLength = 32
)

// Patterns of the v1beta1 schema. The apiserver matches CEL's matches()
// and OpenAPI patterns with RE2, which Go's regexp is: a pattern means here
// what it means there.
var (
	dns1035LabelPattern   = regexp.MustCompile(`^[a-z]([-a-z0-9]*[a-z0-9])?$`)
	objectNamePattern     = regexp.MustCompile(`^[a-z0-9]([-a-z0-9]*[a-z0-9])?([.][a-z0-9]([-a-z0-9]*[a-z0-9])?)*$`)
	zonePattern           = regexp.MustCompile(`^[a-z0-9]([-a-z0-9]*[a-z0-9])?$`)
	percentPattern        = regexp.MustCompile(`^(100|[1-9]?[0-9])%$`)
	tlsFileOptionPattern  = regexp.MustCompile(`ssl_(chain_cert|key)=`)
	clientCAOptionPattern = regexp.MustCompile(`ssl_(ca_cert|verify_mode)=`)
	extPathOptionPattern  = regexp.MustCompile(`ext_path=`)
)

// validateName applies the CRD's rule for metadata.name: a DNS-1035 label,
// because the headless Service takes the name.
func validateName(name string, path *field.Path) field.ErrorList {
	if utf8.RuneCountInString(name) <= validation.DNS1035LabelMaxLength && dns1035LabelPattern.MatchString(name) {
		return nil
	}
	return field.ErrorList{field.Invalid(path, name, "metadata.name must be a DNS-1035 label (at most 63 lowercase letters, digits and '-', starting with a letter and ending with a letter or digit), because the Memcached's headless Service takes its name")}
}

// validateImage applies the Pod's image rule. The CRD's pattern (^\S+$)
// only knows ASCII whitespace.
func validateImage(image string, path *field.Path) field.ErrorList {
	if strings.TrimSpace(image) != image {
		return field.ErrorList{field.Invalid(path, image, "must not have leading or trailing whitespace")}
	}
	return nil
}

// validateMemory applies the CRD's rules for spec.memory: a whole number
// of mebibytes, from 16Mi to 64Gi. The length rule reads the quantity as
// the operator decoded it, in canonical form: the apiserver keeps a
// v1beta1 write's string as written, but the operator only ever sees it
// parsed.
func validateMemory(q *resource.Quantity, path *field.Path) field.ErrorList {
	if q == nil {
		return nil
	}
	return validateQuantity(*q, path, quantityBounds{
		unit: mebibyte, unitMessage: "must be a whole number of mebibytes, such as 64Mi or 1Gi",
		min: resource.MustParse("16Mi"), max: resource.MustParse("64Gi"), rangeMessage: "must be between 16Mi and 64Gi",
	})
}

// validateMaxItemSize applies the CRD's rules for spec.maxItemSize: a whole
// number of kibibytes, from 1Ki to 1Gi, and at most half of memory, or
// memcached refuses to start.
func validateMaxItemSize(s cachev1beta1.MemcachedSpec, path *field.Path) field.ErrorList {
	if s.MaxItemSize == nil {
		return nil
	}
	errs := validateQuantity(*s.MaxItemSize, path, quantityBounds{
		unit: kibibyte, unitMessage: "must be a whole number of kibibytes, such as 512Ki or 2Mi",
		min: resource.MustParse("1Ki"), max: resource.MustParse("1Gi"), rangeMessage: "must be between 1Ki and 1Gi",
	})
	if s.Memory != nil {
		twice := s.MaxItemSize.DeepCopy()
		twice.Add(*s.MaxItemSize)
		if twice.Cmp(*s.Memory) > 0 {
			errs = append(errs, field.Invalid(path, s.MaxItemSize.String(), "maxItemSize must be at most half of memory, or memcached refuses to start"))
		}
	}
	return errs
}

// validateExtstore applies the CRD's rules for spec.extstore: a size of
// whole mebibytes from 1Gi to 64Ti, a StorageClass name, and a
// maxItemSize that fits extstore's write buffer.
func validateExtstore(s cachev1beta1.MemcachedSpec, spec *field.Path) field.ErrorList {
	e := s.Extstore
	if e == nil {
		return nil
	}
	path := spec.Child("extstore")
	errs := validateQuantity(e.Size, path.Child("size"), quantityBounds{
		unit: mebibyte, unitMessage: "must be a whole number of mebibytes, such as 10Gi",
		min: resource.MustParse("1Gi"), max: resource.MustParse("64Ti"), rangeMessage: "must be between 1Gi and 64Ti",
	})
	if c := e.StorageClassName; c != nil && *c != "" {
		if len(*c) > maxObjectNameLength {
			errs = append(errs, field.TooLong(path.Child("storageClassName"), "", maxObjectNameLength))
		}
		if !objectNamePattern.MatchString(*c) {
			errs = append(errs, field.Invalid(path.Child("storageClassName"), *c, "must be a StorageClass name: lower-case letters, digits, '-' and '.'"))
		}
	}
	if s.MaxItemSize != nil && s.MaxItemSize.Cmp(maxExtstoreItemSize) > 0 {
		errs = append(errs, field.Invalid(spec.Child("maxItemSize"), s.MaxItemSize.String(), "maxItemSize must be at most 4Mi with extstore: memcached refuses items larger than extstore's write buffer (ext_wbuf_size, 4 MiB)"))
	}
	return errs
}

// quantityBounds are the rules of a quantity the CRD bounds: its length, a
// whole multiple of unit, and a range.
type quantityBounds struct {
	unit         int64
	unitMessage  string
	min, max     resource.Quantity
	rangeMessage string
}

func validateQuantity(q resource.Quantity, path *field.Path, b quantityBounds) field.ErrorList {
	var errs field.ErrorList
	if utf8.RuneCountInString(q.String()) > maxQuantityLength {
		errs = append(errs, field.Invalid(path, q.String(), "must have at most 32 characters"))
	}
	// As CEL's isInteger(): a value of whole bytes that fits an int64.
	if v, ok := q.AsInt64(); !ok || v%b.unit != 0 {
		errs = append(errs, field.Invalid(path, q.String(), b.unitMessage))
	}
	if q.Cmp(b.min) < 0 || q.Cmp(b.max) > 0 {
		errs = append(errs, field.Invalid(path, q.String(), b.rangeMessage))
	}
	return errs
}

// validateResources checks the amounts the user gave and the requirements
// the builder makes of them, so that a request above the memory limit the
// operator computes is caught as well as one above a limit the user set.
func validateResources(s cachev1beta1.MemcachedSpec, path *field.Path) field.ErrorList {
	r := s.Resources
	if r == nil {
		return nil
	}
	var errs field.ErrorList
	for kind, amounts := range map[string]*cachev1beta1.ResourceAmounts{"requests": r.Requests, "limits": r.Limits} {
		if amounts == nil {
			continue
		}
		for name, value := range map[string]string{"cpu": amounts.CPU, "memory": amounts.Memory} {
			if value == "" {
				continue
			}
			q, err := resource.ParseQuantity(value)
			switch {
			case err != nil:
				example := map[string]string{"cpu": "500m or 2", "memory": "256Mi or 1Gi"}[name]
				errs = append(errs, field.Invalid(path.Child(kind, name), value, "must be a quantity such as "+example))
			case q.Sign() < 0:
				errs = append(errs, field.Invalid(path.Child(kind, name), value, "must be greater than or equal to 0"))
			}
		}
	}
	if len(errs) > 0 {
		return errs
	}
	built := memcachedResources(s)
	userLimits := resourceList(r.Limits)
	names := make([]corev1.ResourceName, 0, len(*built.Requests))
	for name := range *built.Requests {
		names = append(names, name)
	}
	slices.Sort(names)
	for _, name := range names {
		request := (*built.Requests)[name]
		limit, ok := (*built.Limits)[name]
		if !ok || request.Cmp(limit) <= 0 {
			continue
		}
		msg := "must be less than or equal to resources.limits." + string(name) + " (" + limit.String() + ")"
		if _, set := userLimits[name]; !set {
			msg = "must be less than or equal to the " + string(name) + " limit the operator computes from memory and maxConnections (" +
				limit.String() + "); set resources.limits." + string(name) + " to raise it"
		}
		errs = append(errs, field.Invalid(path.Child("requests", string(name)), request.String(), msg))
	}
	return errs
}

// validateMemoryLimit applies the CRD's rule that a memory limit the user
// sets exceeds memory: at or below -m the kernel would kill memcached as
// soon as the cache fills.
func validateMemoryLimit(s cachev1beta1.MemcachedSpec, path *field.Path) field.ErrorList {
	if s.Resources == nil || s.Resources.Limits == nil || s.Resources.Limits.Memory == "" || s.Memory == nil {
		return nil
	}
	limit, err := resource.ParseQuantity(s.Resources.Limits.Memory)
	if err != nil || limit.Cmp(*s.Memory) > 0 {
		return nil
	}
	return field.ErrorList{field.Invalid(path, s.Resources.Limits.Memory, "resources.limits.memory must be greater than memory")}
}

// validatePlaintextPort applies the CRD's rules for spec.tls.plaintextPort:
// a port of its own, not spec.port's and not the exporter's. The loopback
// port moves out of its way by itself (LoopbackPort).
func validatePlaintextPort(s cachev1beta1.MemcachedSpec, path *field.Path) field.ErrorList {
	p := plaintextPort(s)
	switch {
	case p == 0:
		return nil
	case p < 1 || p > 65535:
		return field.ErrorList{field.Invalid(path, p, "must be between 1 and 65535")}
	case p == s.Port:
		return field.ErrorList{field.Invalid(path, p, "tls.plaintextPort must differ from port, which serves TLS")}
	case p == cachev1beta1.ExporterPort && exporterEnabled(s):
		return field.ErrorList{field.Invalid(path, p, "tls.plaintextPort 9150 is taken by the exporter sidecar when monitoring.exporter.enabled is true")}
	}
	return nil
}

// validateExporter applies the CRD's rules that tie the exporter sidecar
// to the rest of the spec: it takes port 9150, and it cannot
// authenticate.
func validateExporter(s cachev1beta1.MemcachedSpec, spec *field.Path) field.ErrorList {
	if !exporterEnabled(s) {
		return nil
	}
	var errs field.ErrorList
	if s.Port == cachev1beta1.ExporterPort {
		errs = append(errs, field.Invalid(spec.Child("port"), s.Port, "port 9150 is taken by the exporter sidecar when monitoring.exporter.enabled is true"))
	}
	if authEnabled(s) {
		errs = append(errs, field.Forbidden(spec.Child("auth"), "auth cannot be combined with monitoring.exporter.enabled: the memcached exporter cannot authenticate (prometheus/memcached_exporter#240) and memcached has no listener without authentication, so it could not scrape; turn the exporter off or leave auth out"))
	}
	return errs
}

// noArgumentFlags are memcached's one-letter flags that take no argument,
// which getopt lets a cluster such as -vvm put before a flag that does.
const noArgumentFlags = "AMkhiVrvdLCSFXWTZ"

// ownedFlag is a memcached flag that extraArgs must not set, because a
// field of the spec or the operator sets it, and memcached would take the
// last one given.
type ownedFlag struct {
	// shortPattern matches the one-letter flag as the CRD does: alone, with
	// its value, or at the end of a cluster of flags without an argument.
	shortPattern *regexp.Regexp
	// long is the long option, matched as getopt_long does: any
	// abbreviation of at least minAbbrev characters, alone or with
	// "=value".
	long      string
	minAbbrev int
	message   string
}

func newOwnedFlag(short byte, long string, minAbbrev int, message string) ownedFlag {
	cluster := strings.ReplaceAll(noArgumentFlags, string(short), "")
	return ownedFlag{
		shortPattern: regexp.MustCompile(`^-[` + cluster + `]*` + string(short)),
		long:         long, minAbbrev: minAbbrev, message: message,
	}
}

// setBy reports whether arg sets the flag.
func (f ownedFlag) setBy(arg string) bool {
	if f.shortPattern.MatchString(arg) {
		return true
	}
	name, ok := strings.CutPrefix(arg, "--")
	if !ok {
		return false
	}
	// The name ends at the first '=', whatever follows: getopt takes the
	// rest as the value. The CRD's pattern, (=.*)?$, fails on a value with
	// a newline, which RE2's '.' does not match, so the CRD admits
	// --memory-limit=10\n, which memcached reads as -m 10; this refuses it.
	name, _, _ = strings.Cut(name, "=")
	return len(name) >= f.minAbbrev && strings.HasPrefix(f.long, name)
}

// ownedFlags are the flags extraArgs must not set in any spec, with the
// CRD's messages.
var ownedFlags = []ownedFlag{
	newOwnedFlag('m', "memory-limit", 1, "must not set -m or --memory-limit; use spec.memory"),
	newOwnedFlag('c', "conn-limit", 1, "must not set -c or --conn-limit; use spec.maxConnections"),
	newOwnedFlag('t', "threads", 1, "must not set -t or --threads; use spec.threads"),
	newOwnedFlag('p', "port", 1, "must not set -p or --port; use spec.port"),
	newOwnedFlag('U', "udp-port", 1, "must not set -U or --udp-port; the operator keeps UDP off (memcached's UDP protocol amplifies reflection attacks)"),
	newOwnedFlag('l', "listen", 1, "must not set -l or --listen; the operator sets the listeners from spec.port and spec.tls"),
	newOwnedFlag('u', "user", 1, "must not set -u or --user; the Pod's securityContext sets the user"),
	newOwnedFlag('Z', "enable-ssl", 1, "must not set -Z or --enable-ssl; use spec.tls"),
	newOwnedFlag('I', "max-item-size", 1, "must not set -I or --max-item-size; use spec.maxItemSize"),
	newOwnedFlag('d', "daemon", 1, "must not set -d or --daemon; memcached must stay in the foreground as the container's process"),
	newOwnedFlag('s', "unix-socket", 1, "must not set -s or --unix-socket; it turns off the TCP listener clients and probes use"),
	newOwnedFlag('Y', "auth-file", 1, "must not set -Y or --auth-file; use spec.auth"),
}

// protocolFlag is -B, which auth forbids. Its long form needs two letters:
// --p is --port.
var protocolFlag = newOwnedFlag('B', "protocol", 2, "extraArgs must not set -B or --protocol with auth: memcached authenticates only the ASCII protocol, which it then speaks by itself, and refuses to start with -B binary or auto")

// validateExtraArgs applies the CRD's rules for spec.extraArgs: its
// bounds, the flags the operator owns, and the TLS options spec.tls and
// spec.tls.clientCA set. Each argument is named by its index.
func validateExtraArgs(s cachev1beta1.MemcachedSpec, path *field.Path) field.ErrorList {
	args := s.ExtraArgs
	var errs field.ErrorList
	if len(args) > maxExtraArgs {
		errs = append(errs, field.TooMany(path, len(args), maxExtraArgs))
	}
	total := 0
	for i, arg := range args {
		n := utf8.RuneCountInString(arg)
		total += n
		argPath := path.Index(i)
		if n > maxExtraArgLength {
			errs = append(errs, field.TooLong(argPath, "", maxExtraArgLength))
		}
		for _, f := range ownedFlags {
			if f.setBy(arg) {
				errs = append(errs, field.Forbidden(argPath, f.message))
			}
		}
		if tlsFileOptionPattern.MatchString(arg) {
			errs = append(errs, field.Forbidden(argPath, "must not set ssl_chain_cert or ssl_key; use spec.tls"))
		}
		if extPathOptionPattern.MatchString(arg) {
			errs = append(errs, field.Forbidden(argPath, "must not set ext_path; use spec.extstore, which gives each Pod a volume for it"))
		}
		if clientCAEnabled(s) && clientCAOptionPattern.MatchString(arg) {
			errs = append(errs, field.Forbidden(argPath, "extraArgs must not set ssl_ca_cert or ssl_verify_mode with tls.clientCA: the operator sets them from it, and memcached would take the last one given"))
		}
		if authEnabled(s) && protocolFlag.setBy(arg) {
			errs = append(errs, field.Forbidden(argPath, protocolFlag.message))
		}
	}
	if total > maxExtraArgsLength {
		errs = append(errs, field.Invalid(path, total, "must have at most 4096 characters in all"))
	}
	return errs
}

// validateTLS applies the CRD's rules for spec.tls: names of objects, and
// exactly one source of the client CA.
func validateTLS(tls *cachev1beta1.TLS, path *field.Path) field.ErrorList {
	if tls == nil {
		return nil
	}
	errs := validateObjectName(tls.SecretName, "Secret", path.Child("secretName"))
	if ca := tls.ClientCA; ca != nil {
		caPath := path.Child("clientCA")
		if (ca.SecretName != "") == (ca.ConfigMapName != "") {
			errs = append(errs, field.Invalid(caPath, "", "set exactly one of secretName and configMapName"))
		}
		if ca.SecretName != "" {
			errs = append(errs, validateObjectName(ca.SecretName, "Secret", caPath.Child("secretName"))...)
		}
		if ca.ConfigMapName != "" {
			errs = append(errs, validateObjectName(ca.ConfigMapName, "ConfigMap", caPath.Child("configMapName"))...)
		}
	}
	return errs
}

// validateObjectName applies the CRD's rules for the name of a Secret or
// ConfigMap the spec refers to.
func validateObjectName(name, kind string, path *field.Path) field.ErrorList {
	var errs field.ErrorList
	if n := utf8.RuneCountInString(name); n > maxObjectNameLength {
		errs = append(errs, field.TooLong(path, "", maxObjectNameLength))
	}
	if !objectNamePattern.MatchString(name) {
		errs = append(errs, field.Invalid(path, name, "must be a "+kind+" name: lower-case letters, digits, '-' and '.'"))
	}
	return errs
}

// validateDisruptionBudget applies the CRD's rules for
// spec.podDisruptionBudget.
func validateDisruptionBudget(b *cachev1beta1.DisruptionBudget, path *field.Path) field.ErrorList {
	if b == nil {
		return nil
	}
	var errs field.ErrorList
	if b.MaxUnavailable != nil && b.MinAvailable != nil {
		errs = append(errs, field.Invalid(path, "", "set at most one of maxUnavailable and minAvailable"))
	}
	errs = append(errs, validateBudgetValue(b.MaxUnavailable, path.Child("maxUnavailable"))...)
	errs = append(errs, validateBudgetValue(b.MinAvailable, path.Child("minAvailable"))...)
	return errs
}

// validateBudgetValue applies the CRD's rule for a budget's number or
// percentage. The pattern also keeps the string within its maxLength, 4.
func validateBudgetValue(v *intstr.IntOrString, path *field.Path) field.ErrorList {
	if v == nil {
		return nil
	}
	if (v.Type == intstr.Int && v.IntVal >= 0) || (v.Type == intstr.String && percentPattern.MatchString(v.StrVal)) {
		return nil
	}
	return field.ErrorList{field.Invalid(path, v.String(), "must be a non-negative number of Pods or a percentage from 0% to 100%")}
}

// reservedPodLabels are the labels that select the Pods, which spec.pod
// must not set.
var reservedPodLabels = []string{LabelName, LabelInstance, LabelManagedBy}

// operatorAnnotationPrefix is the prefix of the Pod annotations the
// operator owns.
const operatorAnnotationPrefix = "cache.kubelite.io/"

// validatePod applies the CRD's rules for spec.pod, and the apiserver's
// rules for the Kubernetes types it embeds.
func validatePod(p cachev1beta1.PodOverrides, path *field.Path) field.ErrorList {
	var errs field.ErrorList
	errs = append(errs, validateNodeSelector(p.NodeSelector, path.Child("nodeSelector"))...)
	for i, t := range p.Tolerations {
		errs = append(errs, validateToleration(t, path.Child("tolerations").Index(i))...)
	}
	errs = append(errs, validatePodLabels(p.Labels, path.Child("labels"))...)
	errs = append(errs, validatePodAnnotations(p.Annotations, path.Child("annotations"))...)
	if p.PriorityClassName != "" {
		for _, msg := range validation.IsDNS1123Subdomain(p.PriorityClassName) {
			errs = append(errs, field.Invalid(path.Child("priorityClassName"), p.PriorityClassName, msg))
		}
	}
	errs = append(errs, validateImagePullSecrets(p.ImagePullSecrets, path.Child("imagePullSecrets"))...)
	errs = append(errs, validateStopTimes(p, path)...)
	errs = append(errs, validateSpreadConstraints(p.TopologySpreadConstraints, path.Child("topologySpreadConstraints"))...)
	errs = append(errs, validateAffinity(p.Affinity, path.Child("affinity"))...)
	return errs
}

// validateKeyLengths applies the CRD's rule, on every map of labels or
// annotations, that keys have at most 317 characters.
func validateKeyLengths(m map[string]string, path *field.Path) field.ErrorList {
	for k := range m {
		if utf8.RuneCountInString(k) > maxKeyLength {
			return field.ErrorList{field.Invalid(path, k, "keys must have at most 317 characters")}
		}
	}
	return nil
}

// validateNodeSelector applies the CRD's key rule and the apiserver's
// label syntax to spec.pod.nodeSelector.
func validateNodeSelector(m map[string]string, path *field.Path) field.ErrorList {
	errs := validateKeyLengths(m, path)
	return append(errs, metav1validation.ValidateLabels(m, path)...)
}

// validatePodLabels applies the CRD's rules for spec.pod.labels, and the
// apiserver's label syntax.
func validatePodLabels(labels map[string]string, path *field.Path) field.ErrorList {
	var errs field.ErrorList
	if len(labels) > maxPodMapEntries {
		errs = append(errs, field.TooMany(path, len(labels), maxPodMapEntries))
	}
	for _, k := range reservedPodLabels {
		if _, ok := labels[k]; ok {
			errs = append(errs, field.Forbidden(path, "must not set app.kubernetes.io/name, app.kubernetes.io/instance or app.kubernetes.io/managed-by: the operator sets them to select the Pods"))
			break
		}
	}
	errs = append(errs, validateKeyLengths(labels, path)...)
	return append(errs, metav1validation.ValidateLabels(labels, path)...)
}

// validatePodAnnotations applies the CRD's rules for spec.pod.annotations,
// and the apiserver's annotation syntax.
func validatePodAnnotations(annotations map[string]string, path *field.Path) field.ErrorList {
	var errs field.ErrorList
	if len(annotations) > maxPodMapEntries {
		errs = append(errs, field.TooMany(path, len(annotations), maxPodMapEntries))
	}
	total := 0
	for k, v := range annotations {
		total += utf8.RuneCountInString(k) + utf8.RuneCountInString(v)
	}
	if total > maxPodAnnotationsLength {
		errs = append(errs, field.Invalid(path, total, "must have at most 8192 characters of keys and values in all"))
	}
	for k := range annotations {
		if strings.HasPrefix(k, operatorAnnotationPrefix) {
			errs = append(errs, field.Forbidden(path, "must not use the prefix cache.kubelite.io/, which the operator owns"))
			break
		}
	}
	errs = append(errs, validateKeyLengths(annotations, path)...)
	return append(errs, apimachineryvalidation.ValidateAnnotations(annotations, path)...)
}

// validateImagePullSecrets applies the CRD's bounds for
// spec.pod.imagePullSecrets.
func validateImagePullSecrets(refs []corev1.LocalObjectReference, path *field.Path) field.ErrorList {
	var errs field.ErrorList
	if len(refs) > maxImagePullSecrets {
		errs = append(errs, field.TooMany(path, len(refs), maxImagePullSecrets))
	}
	for i, ref := range refs {
		if utf8.RuneCountInString(ref.Name) > maxObjectNameLength {
			errs = append(errs, field.TooLong(path.Index(i).Child("name"), "", maxObjectNameLength))
		}
	}
	return errs
}

// validateStopTimes applies the CRD's bounds for the two stop times, and
// its rule that the preStop delay ends before the kubelet kills memcached.
func validateStopTimes(p cachev1beta1.PodOverrides, path *field.Path) field.ErrorList {
	var errs field.ErrorList
	grace := int64(defaultGracePeriodSeconds)
	if g := p.TerminationGracePeriodSeconds; g != nil {
		grace = *g
		if *g < 0 || *g > maxGracePeriodSeconds {
			errs = append(errs, field.Invalid(path.Child("terminationGracePeriodSeconds"), *g, "must be between 0 and "+strconv.Itoa(maxGracePeriodSeconds)))
		}
	}
	if d := p.PreStopDelaySeconds; d != nil {
		delayPath := path.Child("preStopDelaySeconds")
		if *d < 0 || *d > maxPreStopDelaySeconds {
			errs = append(errs, field.Invalid(delayPath, *d, "must be between 0 and "+strconv.Itoa(maxPreStopDelaySeconds)))
		}
		if int64(*d) >= grace {
			errs = append(errs, field.Invalid(delayPath, *d, "preStopDelaySeconds must be less than terminationGracePeriodSeconds (30 when left out), or the kubelet kills memcached before the delay ends"))
		}
	}
	return errs
}

// selectorView is what validateSelector reads of a metav1.LabelSelector
// or of the CRD's own LabelSelector.
type selectorView struct {
	matchLabels      map[string]string
	matchExpressions []requirementView
}

type requirementView struct {
	key, operator string
	values        []string
}

func fromMetaSelector(s *metav1.LabelSelector) *selectorView {
	if s == nil {
		return nil
	}
	out := &selectorView{matchLabels: s.MatchLabels}
	for _, r := range s.MatchExpressions {
		out.matchExpressions = append(out.matchExpressions, requirementView{r.Key, string(r.Operator), r.Values})
	}
	return out
}

func fromPolicySelector(s *cachev1beta1.LabelSelector) *selectorView {
	if s == nil {
		return nil
	}
	out := &selectorView{matchLabels: s.MatchLabels}
	for _, r := range s.MatchExpressions {
		out.matchExpressions = append(out.matchExpressions, requirementView{r.Key, r.Operator, r.Values})
	}
	return out
}

// entries counts a selector as the CRD's entry rules do: one for each
// match label, and one for each match expression and each of its values.
func (s *selectorView) entries() int {
	if s == nil {
		return 0
	}
	n := len(s.matchLabels)
	for _, r := range s.matchExpressions {
		n += 1 + len(r.values)
	}
	return n
}

// validateSelector applies the CRD's bounds for a label selector: the key
// rule on matchLabels, and the list and string bounds crdbounds sets.
func validateSelector(s *selectorView, path *field.Path) field.ErrorList {
	if s == nil {
		return nil
	}
	labelsPath := path.Child("matchLabels")
	var errs field.ErrorList
	if len(s.matchLabels) > maxSelectorLabels {
		errs = append(errs, field.TooMany(labelsPath, len(s.matchLabels), maxSelectorLabels))
	}
	errs = append(errs, validateKeyLengths(s.matchLabels, labelsPath)...)
	for k, v := range s.matchLabels {
		if utf8.RuneCountInString(v) > maxLabelValueLength {
			errs = append(errs, field.TooLong(labelsPath.Key(k), "", maxLabelValueLength))
		}
	}
	exprPath := path.Child("matchExpressions")
	if len(s.matchExpressions) > maxSelectorRequirements {
		errs = append(errs, field.TooMany(exprPath, len(s.matchExpressions), maxSelectorRequirements))
	}
	for i, r := range s.matchExpressions {
		rPath := exprPath.Index(i)
		if utf8.RuneCountInString(r.key) > maxKeyLength {
			errs = append(errs, field.TooLong(rPath.Child("key"), "", maxKeyLength))
		}
		if utf8.RuneCountInString(r.operator) > maxKubernetesEnumLength {
			errs = append(errs, field.TooLong(rPath.Child("operator"), "", maxKubernetesEnumLength))
		}
		if len(r.values) > maxRequirementValues {
			errs = append(errs, field.TooMany(rPath.Child("values"), len(r.values), maxRequirementValues))
		}
		for j, v := range r.values {
			if utf8.RuneCountInString(v) > maxLabelValueLength {
				errs = append(errs, field.TooLong(rPath.Child("values").Index(j), "", maxLabelValueLength))
			}
		}
	}
	return errs
}

// validateSpreadConstraints applies the CRD's rules for
// spec.pod.topologySpreadConstraints: its bounds, and at most 32 entries
// in all, counting each constraint, match label, match expression and
// value, and label key.
func validateSpreadConstraints(cs []corev1.TopologySpreadConstraint, path *field.Path) field.ErrorList {
	var errs field.ErrorList
	if len(cs) > maxSpreadConstraints {
		errs = append(errs, field.TooMany(path, len(cs), maxSpreadConstraints))
	}
	entries := 0
	for i, c := range cs {
		cPath := path.Index(i)
		selector := fromMetaSelector(c.LabelSelector)
		entries += 1 + selector.entries() + len(c.MatchLabelKeys)
		errs = append(errs, validateSelector(selector, cPath.Child("labelSelector"))...)
		errs = append(errs, validateLabelKeys(c.MatchLabelKeys, cPath.Child("matchLabelKeys"))...)
		if utf8.RuneCountInString(c.TopologyKey) > maxKeyLength {
			errs = append(errs, field.TooLong(cPath.Child("topologyKey"), "", maxKeyLength))
		}
		for name, v := range map[string]string{
			"whenUnsatisfiable":  string(c.WhenUnsatisfiable),
			"nodeAffinityPolicy": string(ptr.Deref(c.NodeAffinityPolicy, "")),
			"nodeTaintsPolicy":   string(ptr.Deref(c.NodeTaintsPolicy, "")),
		} {
			if utf8.RuneCountInString(v) > maxKubernetesEnumLength {
				errs = append(errs, field.TooLong(cPath.Child(name), "", maxKubernetesEnumLength))
			}
		}
	}
	if entries > maxSpreadEntries {
		errs = append(errs, field.Invalid(path, entries, "topologySpreadConstraints must have at most 32 entries in all, counting each constraint, match label, match expression and value and label key"))
	}
	return errs
}

// validateLabelKeys applies the CRD's bounds for a list of label keys.
func validateLabelKeys(keys []string, path *field.Path) field.ErrorList {
	var errs field.ErrorList
	if len(keys) > maxLabelKeys {
		errs = append(errs, field.TooMany(path, len(keys), maxLabelKeys))
	}
	for i, k := range keys {
		if utf8.RuneCountInString(k) > maxKeyLength {
			errs = append(errs, field.TooLong(path.Index(i), "", maxKeyLength))
		}
	}
	return errs
}

// validateAffinity applies the CRD's rules for spec.pod.affinity: at most
// 32 entries of node affinity and 16 each of pod affinity and pod
// anti-affinity, and the key rule on their selectors. The other bounds of
// affinity are v1alpha1's too, which the apiserver applies to both
// versions.
func validateAffinity(a *corev1.Affinity, path *field.Path) field.ErrorList {
	if a == nil {
		return nil
	}
	var errs field.ErrorList
	if na := a.NodeAffinity; na != nil {
		n := 0
		if req := na.RequiredDuringSchedulingIgnoredDuringExecution; req != nil {
			for _, t := range req.NodeSelectorTerms {
				n += nodeSelectorTermEntries(t)
			}
		}
		for _, p := range na.PreferredDuringSchedulingIgnoredDuringExecution {
			n += nodeSelectorTermEntries(p.Preference)
		}
		if n > maxNodeAffinityEntries {
			errs = append(errs, field.Invalid(path.Child("nodeAffinity"), n, "nodeAffinity must have at most 32 entries in all, counting each match expression or field and each of their values"))
		}
	}
	if pa := a.PodAffinity; pa != nil {
		errs = append(errs, validatePodAffinityTerms(pa.RequiredDuringSchedulingIgnoredDuringExecution, pa.PreferredDuringSchedulingIgnoredDuringExecution,
			path.Child("podAffinity"), "podAffinity must have at most 16 entries in all, counting each term, match label, match expression and value, namespace and label key")...)
	}
	if pa := a.PodAntiAffinity; pa != nil {
		errs = append(errs, validatePodAffinityTerms(pa.RequiredDuringSchedulingIgnoredDuringExecution, pa.PreferredDuringSchedulingIgnoredDuringExecution,
			path.Child("podAntiAffinity"), "podAntiAffinity must have at most 16 entries in all, counting each term, match label, match expression and value, namespace and label key")...)
	}
	return errs
}

func nodeSelectorTermEntries(t corev1.NodeSelectorTerm) int {
	n := 0
	for _, r := range t.MatchExpressions {
		n += 1 + len(r.Values)
	}
	for _, r := range t.MatchFields {
		n += 1 + len(r.Values)
	}
	return n
}

// validatePodAffinityTerms counts the entries of a pod affinity or
// anti-affinity and applies the key rule to its selectors.
func validatePodAffinityTerms(required []corev1.PodAffinityTerm, preferred []corev1.WeightedPodAffinityTerm, path *field.Path, message string) field.ErrorList {
	var errs field.ErrorList
	n := 0
	term := func(t corev1.PodAffinityTerm, tPath *field.Path) {
		labels, namespaces := fromMetaSelector(t.LabelSelector), fromMetaSelector(t.NamespaceSelector)
		n += 1 + labels.entries() + namespaces.entries() + len(t.Namespaces) + len(t.MatchLabelKeys) + len(t.MismatchLabelKeys)
		if labels != nil {
			errs = append(errs, validateKeyLengths(labels.matchLabels, tPath.Child("labelSelector", "matchLabels"))...)
		}
		if namespaces != nil {
			errs = append(errs, validateKeyLengths(namespaces.matchLabels, tPath.Child("namespaceSelector", "matchLabels"))...)
		}
	}
	for i, t := range required {
		term(t, path.Child("requiredDuringSchedulingIgnoredDuringExecution").Index(i))
	}
	for i, w := range preferred {
		term(w.PodAffinityTerm, path.Child("preferredDuringSchedulingIgnoredDuringExecution").Index(i).Child("podAffinityTerm"))
	}
	if n > maxPodAffinityEntries {
		errs = append(errs, field.Invalid(path, n, message))
	}
	return errs
}

// validNetworkPolicyOperators are the operators of the CRD's
// LabelSelectorRequirement.
var validNetworkPolicyOperators = []string{"In", "NotIn", "Exists", "DoesNotExist"}

// validateNetworkPolicy applies the CRD's rules for spec.networkPolicy: at
// most 24 entries in all, counting each peer, match label, match
// expression and value; a selector in each peer; values exactly for In
// and NotIn; and the bounds of its lists and strings.
func validateNetworkPolicy(np *cachev1beta1.NetworkPolicy, path *field.Path) field.ErrorList {
	if np == nil {
		return nil
	}
	var errs field.ErrorList
	entries := 0
	for name, peers := range map[string][]cachev1beta1.NetworkPolicyPeer{"clients": np.Clients, "metrics": np.Metrics} {
		peersPath := path.Child(name)
		if len(peers) > maxNetworkPolicyPeers {
			errs = append(errs, field.TooMany(peersPath, len(peers), maxNetworkPolicyPeers))
		}
		for i, p := range peers {
			pPath := peersPath.Index(i)
			if p.PodSelector == nil && p.NamespaceSelector == nil {
				errs = append(errs, field.Invalid(pPath, "", "set podSelector, namespaceSelector or both"))
			}
			entries++
			for selName, sel := range map[string]*cachev1beta1.LabelSelector{"podSelector": p.PodSelector, "namespaceSelector": p.NamespaceSelector} {
				s := fromPolicySelector(sel)
				entries += s.entries()
				errs = append(errs, validatePolicySelector(s, pPath.Child(selName))...)
			}
		}
	}
	if entries > maxNetworkPolicyEntries {
		errs = append(errs, field.Invalid(path, entries, "networkPolicy must have at most 24 entries in all, counting each peer, match label, match expression and value"))
	}
	return errs
}

// validatePolicySelector applies validateSelector, and the CRD's rules for
// the requirements of a NetworkPolicy's selector, which are the
// apiserver's own rules for a NetworkPolicy.
func validatePolicySelector(s *selectorView, path *field.Path) field.ErrorList {
	if s == nil {
		return nil
	}
	errs := validateSelector(s, path)
	for i, r := range s.matchExpressions {
		rPath := path.Child("matchExpressions").Index(i)
		if !slices.Contains(validNetworkPolicyOperators, r.operator) {
			errs = append(errs, field.NotSupported(rPath.Child("operator"), r.operator, validNetworkPolicyOperators))
		}
		if (r.operator == "In" || r.operator == "NotIn") != (len(r.values) > 0) {
			errs = append(errs, field.Invalid(rPath, r.key, "values must be set for In and NotIn, and left out for Exists and DoesNotExist"))
		}
	}
	return errs
}

// validateZones applies the CRD's rules for spec.zones: at most 8 zones,
// each a distinct DNS label of at most 61 characters, which with the
// Memcached's name makes a pool name, and a Service name, of at most 63.
func validateZones(name string, zones []string, path *field.Path) field.ErrorList {
	var errs field.ErrorList
	if len(zones) > maxZones {
		errs = append(errs, field.TooMany(path, len(zones), maxZones))
	}
	seen := make(map[string]bool, len(zones))
	for i, z := range zones {
		zPath := path.Index(i)
		if seen[z] {
			errs = append(errs, field.Duplicate(zPath, z))
		}
		seen[z] = true
		n := utf8.RuneCountInString(z)
		if n > maxZoneLength {
			errs = append(errs, field.TooLong(zPath, "", maxZoneLength))
		}
		if !zonePattern.MatchString(z) {
			errs = append(errs, field.Invalid(zPath, z, "zone "+z+" cannot name a pool: the pool takes the name <name>-"+z+", a Service name, so the zone must be lowercase letters, digits and hyphens, starting and ending with a letter or digit"))
		}
		if utf8.RuneCountInString(name)+n > maxPoolNameLength {
			errs = append(errs, field.Invalid(zPath, z, "spec.zones: the pool of each zone is named <name>-<zone>, a Service name of at most 63 characters, and zone "+z+" makes it longer: shorten the zone or the name, which together may have at most 62 characters"))
		}
	}
	return errs
}

// validateToleration applies the apiserver's rules for a Pod's toleration.
func validateToleration(t corev1.Toleration, path *field.Path) field.ErrorList {
	var errs field.ErrorList
	if t.Key != "" {
		errs = append(errs, metav1validation.ValidateLabelName(t.Key, path.Child("key"))...)
	} else if t.Operator != corev1.TolerationOpExists {
		errs = append(errs, field.Invalid(path.Child("operator"), t.Operator, "must be Exists when key is empty, which matches all keys and values"))
	}
	if t.TolerationSeconds != nil && t.Effect != corev1.TaintEffectNoExecute {
		errs = append(errs, field.Invalid(path.Child("effect"), t.Effect, "must be NoExecute when tolerationSeconds is set"))
	}
	switch t.Operator {
	case corev1.TolerationOpEqual, "":
		for _, msg := range validation.IsValidLabelValue(t.Value) {
			errs = append(errs, field.Invalid(path.Child("value"), t.Value, msg))
		}
	case corev1.TolerationOpExists:
		if t.Value != "" {
			errs = append(errs, field.Invalid(path.Child("value"), t.Value, "must be empty when operator is Exists"))
		}
	default:
		errs = append(errs, field.NotSupported(path.Child("operator"), t.Operator, []corev1.TolerationOperator{corev1.TolerationOpEqual, corev1.TolerationOpExists}))
	}
	switch t.Effect {
	case "", corev1.TaintEffectNoSchedule, corev1.TaintEffectPreferNoSchedule, corev1.TaintEffectNoExecute:
	default:
		errs = append(errs, field.NotSupported(path.Child("effect"), t.Effect,
			[]corev1.TaintEffect{corev1.TaintEffectNoSchedule, corev1.TaintEffectPreferNoSchedule, corev1.TaintEffectNoExecute}))
	}
	return errs
}
