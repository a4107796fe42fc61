package resources

import (
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	corev1ac "k8s.io/client-go/applyconfigurations/core/v1"

	cachev1beta1 "github.com/kubelite/memcached-operator/pkg/apis/cache/v1beta1"
)

// TLS: memcached serves the Secret's certificate on spec.port (-Z), and
// also listens in plain TCP on a loopback-only port. Nothing outside the
// Pod can reach that port; inside it, the exporter scrapes through it and
// the reloader sidecar sends it refresh_certs when the kubelet has written
// a renewed certificate into the volume. memcached then loads the new
// certificate and key in place, so a renewal never restarts the cache and
// never empties it. The client CA bundle is not replaced that way:
// refresh_certs only adds the CAs of the bundle to what memcached trusts,
// so a CA removed from the bundle stays trusted until the Pod restarts;
// the controller records a ClientCARemoved Event that says so when it
// sees a CA leave the bundle.
const (
	TLSReloaderContainerName = "tls-reloader"
	TLSVolumeName            = "tls"
	// TLSMountPath is where the Secret's files appear in both containers.
	TLSMountPath = "/etc/memcached/tls"
	// PodIPsEnv holds the Pod's addresses (status.podIPs, comma
	// separated), which memcached is told to listen on: with -l set it no
	// longer listens on every address by itself, and the Pod's own list
	// works in IPv4, IPv6 and dual-stack clusters alike.
	PodIPsEnv = "POD_IPS"
	// TLSReloadIntervalSeconds is how often the reloader compares the
	// mounted files with the ones memcached last loaded. The kubelet takes
	// up to about a minute to write a renewed Secret into the volume, so
	// checking more often would not make a renewal land sooner.
	TLSReloadIntervalSeconds = 10
	// TLSRefusedPath is the file in which the reloader keeps memcached's
	// reply to a refresh_certs it refused, and which it empties when
	// memcached takes the files. Such a refusal can leave memcached
	// without a usable certificate, every new TLS connection failing its
	// handshake, so the reloader container is not ready while the file
	// holds a reply (tlsReadinessProbe). It is in /dev/shm, the Pod's
	// tmpfs, which is writable under the read-only root filesystem.
	TLSRefusedPath = "/dev/shm/memcached-refresh-certs-refused"
)

// tlsFileMode lets the owner and the Pod's fsGroup (memcached's group) read
// the certificate and key, and nobody else.
const tlsFileMode = 0o440

// tlsReloaderScript is the sidecar's script with TLS alone; with auth the
// sidecar runs reloaderScript. Its text is part of the Pod template, so
// any change to it rolls, and empties, every cache with TLS.
//
// It sends refresh_certs to memcached's loopback port whenever the
// certificate or key in the volume differs from what it last loaded, and
// at start, in case the files were renewed while memcached was starting.
// A refusal (memcached's reply is not OK) is logged and the files are sent
// again next round, whatever they hold then: memcached 1.6.18 keeps the
// certificate of a refused pair with the old key, so it serves no TLS
// until a pair is loaded again, even the pair it had before. While the
// refusal stands the reply is kept in the file at its last argument, which
// makes the container unready (tlsReadinessProbe). The kubelet swaps a
// Secret volume's files in one rename, so memcached reads a matching pair
// unless the Secret itself holds a mismatched one.
//
// Until memcached has accepted a connection once it waits without a word,
// as every Pod's start does; after that a refused connection is logged.
// It is plain bash (builtins, /dev/tcp and sleep) so that it runs in the
// memcached image itself and needs no image of its own.
//
// As the container's first process it gets no default signal handling, so
// it traps SIGTERM and sleeps in the background: otherwise every Pod would
// take its whole grace period to stop.
//
// Arguments: the directory, the port, the interval in seconds, the file
// that says memcached cannot serve TLS.
const tlsReloaderScript = `dir=$1 port=$2 interval=$3 down=$4
trap 'exit 0' TERM
loaded= up=
while :; do
  if ! (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null; then
    [ -z "$up" ] || echo "memcached does not accept connections on 127.0.0.1:$port; retrying in ${interval}s" >&2
  elif up=1 && files="$(<"$dir/tls.crt")$(<"$dir/tls.key")" && [ "$files" != "$loaded" ]; then
    reply=$(exec 2>/dev/null; exec 3<>"/dev/tcp/127.0.0.1/$port" && printf 'refresh_certs\r\n' >&3 && read -r -t 5 line <&3 && printf %s "${line%$'\r'}")
    if [ "$reply" = OK ]; then
      loaded=$files
      : >"$down"
      echo "memcached loaded the certificate in $dir"
    else
      loaded=
      [ -z "$reply" ] || printf '%s\n' "$reply" >"$down"
      echo "refresh_certs: ${reply:-no answer from 127.0.0.1:$port}; retrying in ${interval}s" >&2
    fi
  fi
  sleep "$interval" &
  wait $!
done
`

// tlsReloaderFiles is what tlsReloaderScript compares, and
// tlsReloaderFilesWithCA the same with the client CA bundle: memcached's
// refresh_certs reads ssl_ca_cert again too, and adds the bundle's CAs to
// those it trusts. It never drops one: a CA removed from the bundle stays
// trusted until the Pod restarts. Only a Memcached with spec.tls.clientCA
// gets the second, so that every other one keeps the Pod template it has.
const (
	tlsReloaderFiles       = `files="$(<"$dir/tls.crt")$(<"$dir/tls.key")"`
	tlsReloaderFilesWithCA = `files="$(<"$dir/tls.crt")$(<"$dir/tls.key")$(<"$dir/ca.crt")"`
)

// tlsReloaderScriptFor is tlsReloaderScript, comparing ca.crt as well when the
// spec has a client CA.
func tlsReloaderScriptFor(s cachev1beta1.MemcachedSpec) string {
	if !clientCAEnabled(s) {
		return tlsReloaderScript
	}
	return strings.Replace(tlsReloaderScript, tlsReloaderFiles, tlsReloaderFilesWithCA, 1)
}

// Reloader sidecar sizing: one bash process that mostly sleeps.
var (
	tlsReloaderCPURequest    = resource.MustParse("1m")
	tlsReloaderMemoryRequest = resource.MustParse("4Mi")
	tlsReloaderMemoryLimit   = resource.MustParse("16Mi")
)

func tlsEnabled(s cachev1beta1.MemcachedSpec) bool {
	return s.TLS != nil
}

func clientCAEnabled(s cachev1beta1.MemcachedSpec) bool {
	return s.TLS != nil && s.TLS.ClientCA != nil
}

// LoopbackPort is the plain-TCP port memcached listens on at 127.0.0.1
// when TLS is on: the first of 11212, 11213 and 11214 that neither
// spec.port nor spec.tls.plaintextPort takes.
func LoopbackPort(s cachev1beta1.MemcachedSpec) int32 {
	port := int32(11212)
	for port == s.Port || port == plaintextPort(s) {
		port++
	}
	return port
}

// PlaintextPortName names the container and Service port of
// spec.tls.plaintextPort.
const PlaintextPortName = "memcache-plain"

// plaintextPort is spec.tls.plaintextPort, 0 when there is none.
func plaintextPort(s cachev1beta1.MemcachedSpec) int32 {
	if s.TLS == nil {
		return 0
	}
	return s.TLS.PlaintextPort
}

// tlsArgs turn on TLS with the mounted files, and list the listeners:
// the loopback port without TLS, then spec.port with TLS on loopback (for
// port-forwarding) and on each of the Pod's addresses. memcached takes the
// port of an address that names none from -p.
//
// With a client CA, ssl_verify_mode=2 makes memcached refuse a TLS client
// without a certificate signed by a CA of the bundle. It applies to the
// TLS listeners only: the exporter and the reloader, on the plain loopback
// port, need no certificate.
//
// spec.tls.plaintextPort adds a listener without TLS on every address
// (notls:*:PORT): memcached binds it for each address family the Pod has,
// which a list built from $(POD_IPS) could not say, since every address
// of it would need the prefix and the port.
func tlsArgs(s cachev1beta1.MemcachedSpec) []string {
	files := "ssl_chain_cert=" + TLSMountPath + "/" + corev1.TLSCertKey + ",ssl_key=" + TLSMountPath + "/" + corev1.TLSPrivateKeyKey
	if clientCAEnabled(s) {
		files += ",ssl_ca_cert=" + TLSMountPath + "/" + cachev1beta1.ClientCAKey + ",ssl_verify_mode=2"
	}
	listeners := "notls:127.0.0.1:" + strconv.Itoa(int(LoopbackPort(s))) + ",127.0.0.1,$(" + PodIPsEnv + ")"
	if p := plaintextPort(s); p != 0 {
		listeners += ",notls:*:" + strconv.Itoa(int(p))
	}
	return []string{
		"-Z",
		"-o", files,
		"-l", listeners,
	}
}

// tlsVolume is the Secret's certificate and key or, with a client CA, a
// projected volume that adds the CA's ca.crt beside them, at the same
// path. A Memcached without a client CA keeps the plain Secret volume, so
// that its Pod template does not change.
func tlsVolume(s cachev1beta1.MemcachedSpec) *corev1ac.VolumeApplyConfiguration {
	if clientCAEnabled(s) {
		return clientCAVolume(s)
	}
	return corev1ac.Volume().
		WithName(TLSVolumeName).
		WithSecret(corev1ac.SecretVolumeSource().
			WithSecretName(s.TLS.SecretName).
			WithItems(
				corev1ac.KeyToPath().WithKey(corev1.TLSCertKey).WithPath(corev1.TLSCertKey),
				corev1ac.KeyToPath().WithKey(corev1.TLSPrivateKeyKey).WithPath(corev1.TLSPrivateKeyKey)).
			WithDefaultMode(tlsFileMode))
}

// clientCAVolume projects tls.crt and tls.key of spec.tls.secretName and
// ca.crt of spec.tls.clientCA into one directory. The kubelet writes a
// projected volume's files with one rename, whichever source changed, as
// it does a Secret volume's.
func clientCAVolume(s cachev1beta1.MemcachedSpec) *corev1ac.VolumeApplyConfiguration {
	caItem := corev1ac.KeyToPath().WithKey(cachev1beta1.ClientCAKey).WithPath(cachev1beta1.ClientCAKey)
	ca := corev1ac.VolumeProjection()
	if name := s.TLS.ClientCA.SecretName; name != "" {
		ca.WithSecret(corev1ac.SecretProjection().WithName(name).WithItems(caItem))
	} else {
		ca.WithConfigMap(corev1ac.ConfigMapProjection().WithName(s.TLS.ClientCA.ConfigMapName).WithItems(caItem))
	}
	return corev1ac.Volume().
		WithName(TLSVolumeName).
		WithProjected(corev1ac.ProjectedVolumeSource().
			WithSources(
				corev1ac.VolumeProjection().WithSecret(corev1ac.SecretProjection().
					WithName(s.TLS.SecretName).
					WithItems(
						corev1ac.KeyToPath().WithKey(corev1.TLSCertKey).WithPath(corev1.TLSCertKey),
						corev1ac.KeyToPath().WithKey(corev1.TLSPrivateKeyKey).WithPath(corev1.TLSPrivateKeyKey))),
				ca).
			WithDefaultMode(tlsFileMode))
}

func tlsVolumeMount() *corev1ac.VolumeMountApplyConfiguration {
	return corev1ac.VolumeMount().WithName(TLSVolumeName).WithMountPath(TLSMountPath).WithReadOnly(true)
}

// podIPsEnv is the downward-API variable tlsArgs refers to.
func podIPsEnv() *corev1ac.EnvVarApplyConfiguration {
	return corev1ac.EnvVar().
		WithName(PodIPsEnv).
		WithValueFrom(corev1ac.EnvVarSource().
			WithFieldRef(corev1ac.ObjectFieldSelector().WithFieldPath("status.podIPs")))
}

// tlsReloaderContainer runs tlsReloaderScript in the memcached image.
func tlsReloaderContainer(s cachev1beta1.MemcachedSpec) *corev1ac.ContainerApplyConfiguration {
	return reloaderResources(corev1ac.Container().
		WithName(TLSReloaderContainerName).
		WithImage(s.Image).
		WithCommand("bash", "-c", tlsReloaderScriptFor(s), TLSReloaderContainerName).
		WithArgs(TLSMountPath, strconv.Itoa(int(LoopbackPort(s))), strconv.Itoa(TLSReloadIntervalSeconds), TLSRefusedPath).
		WithVolumeMounts(tlsVolumeMount()).
		WithReadinessProbe(tlsReadinessProbe()))
}

// tlsReadinessProbe fails while TLSRefusedPath holds memcached's refusal
// of the files in the volume, and says it: the TCP probes of the memcached
// container pass while every TLS handshake fails, so this one keeps the
// Pod out of the Service's endpoints then. It reads the file only, in bash
// as the reloader does; the kubelet runs it every 5 s, and one failure is
// enough, since the reloader writes the file only on memcached's word.
func tlsReadinessProbe() *corev1ac.ProbeApplyConfiguration {
	return corev1ac.Probe().
		WithExec(corev1ac.ExecAction().WithCommand("bash", "-c",
			`if [ -s "$1" ]; then echo "memcached refused the certificate in the volume: $(<"$1")"; exit 1; fi`,
			"tls-probe", TLSRefusedPath)).
		WithPeriodSeconds(5).
		WithTimeoutSeconds(5).
		WithFailureThreshold(1)
}

// reloaderResources sizes a reloader sidecar, the TLS one or the one for
// auth, and gives it the restricted security context.
func reloaderResources(c *corev1ac.ContainerApplyConfiguration) *corev1ac.ContainerApplyConfiguration {
	return c.
		WithResources(corev1ac.ResourceRequirements().
			WithRequests(corev1.ResourceList{
				corev1.ResourceCPU:    tlsReloaderCPURequest,
				corev1.ResourceMemory: tlsReloaderMemoryRequest,
			}).
			WithLimits(corev1.ResourceList{
				corev1.ResourceMemory: tlsReloaderMemoryLimit,
			})).
		WithSecurityContext(restrictedContainerSecurityContext())
}
