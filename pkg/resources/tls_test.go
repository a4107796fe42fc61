package resources

import (
	"reflect"
	"slices"
	"strings"
	"testing"

	corev1ac "k8s.io/client-go/applyconfigurations/core/v1"
	"k8s.io/utils/ptr"

	cachev1beta1 "github.com/kubelite/memcached-operator/pkg/apis/cache/v1beta1"
)

func TestDeploymentTLS(t *testing.T) {
	withExporter := func(s *cachev1beta1.MemcachedSpec) {
		s.Monitoring = &cachev1beta1.Monitoring{Exporter: &cachev1beta1.Exporter{Enabled: true}}
	}
	tests := []struct {
		name string
		spec func(*cachev1beta1.MemcachedSpec)

		wantTLS bool
		// wantListen is the value of -l; wantExporter the exporter's
		// --memcached.address.
		wantListen, wantExporter string
	}{
		{
			name:         "off: plain TCP on every address, exporter on spec.port",
			spec:         withExporter,
			wantExporter: "localhost:11211",
		},
		{
			name: "on: TLS on spec.port, plain TCP on loopback 11212 for the exporter and the reloader",
			spec: func(s *cachev1beta1.MemcachedSpec) {
				withExporter(s)
				s.TLS = &cachev1beta1.TLS{SecretName: "cache-tls"}
			},
			wantTLS:      true,
			wantListen:   "notls:127.0.0.1:11212,127.0.0.1,$(POD_IPS)",
			wantExporter: "127.0.0.1:11212",
		},
		{
			name: "on with spec.port 11212: the loopback port moves to 11213",
			spec: func(s *cachev1beta1.MemcachedSpec) {
				withExporter(s)
				s.Port = 11212
				s.TLS = &cachev1beta1.TLS{SecretName: "cache-tls"}
			},
			wantTLS:      true,
			wantListen:   "notls:127.0.0.1:11213,127.0.0.1,$(POD_IPS)",
			wantExporter: "127.0.0.1:11213",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d, err := Deployment(Default(memcached(tt.spec)))
			if err != nil {
				t.Fatalf("Deployment: %v", err)
			}
			pod := d.Spec.Template.Spec
			mcd := container(t, pod, MemcachedContainerName)

			if got := argValue(mcd.Args, "-l"); got != tt.wantListen {
				t.Errorf("-l = %q, want %q", got, tt.wantListen)
			}
			if got := strings.TrimPrefix(container(t, pod, ExporterContainerName).Args[0], "--memcached.address="); got != tt.wantExporter {
				t.Errorf("exporter address = %q, want %q", got, tt.wantExporter)
			}
			if !tt.wantTLS {
				if len(pod.Volumes) > 0 || len(mcd.VolumeMounts) > 0 || len(mcd.Env) > 0 || pod.SecurityContext.FSGroup != nil {
					t.Errorf("TLS off, yet volumes %v, mounts %v, env %v, fsGroup %v", pod.Volumes, mcd.VolumeMounts, mcd.Env, pod.SecurityContext.FSGroup)
				}
				if len(pod.Containers) != 2 {
					t.Errorf("TLS off, yet %d containers", len(pod.Containers))
				}
				if slices.Contains(mcd.Args, "-Z") {
					t.Errorf("TLS off, yet args %v", mcd.Args)
				}
				return
			}

			if !slices.Contains(mcd.Args, "-Z") {
				t.Errorf("args %v lack -Z", mcd.Args)
			}
			if got, want := argValue(mcd.Args, "-o"), "ssl_chain_cert=/etc/memcached/tls/tls.crt,ssl_key=/etc/memcached/tls/tls.key"; got != want {
				t.Errorf("-o = %q, want %q", got, want)
			}
			wantEnv := []corev1ac.EnvVarApplyConfiguration{*corev1ac.EnvVar().WithName("POD_IPS").
				WithValueFrom(corev1ac.EnvVarSource().WithFieldRef(corev1ac.ObjectFieldSelector().WithFieldPath("status.podIPs")))}
			if !reflect.DeepEqual(mcd.Env, wantEnv) {
				t.Errorf("memcached env = %+v, want POD_IPS from status.podIPs", mcd.Env)
			}
			wantMount := []corev1ac.VolumeMountApplyConfiguration{*corev1ac.VolumeMount().WithName("tls").WithMountPath("/etc/memcached/tls").WithReadOnly(true)}
			if !reflect.DeepEqual(mcd.VolumeMounts, wantMount) {
				t.Errorf("memcached mounts = %+v, want %+v", mcd.VolumeMounts, wantMount)
			}

			if len(pod.Volumes) != 1 || pod.Volumes[0].Secret == nil {
				t.Fatalf("volumes = %+v, want the one Secret volume", pod.Volumes)
			}
			secret := pod.Volumes[0].Secret
			if ptr.Deref(secret.SecretName, "") != "cache-tls" || ptr.Deref(secret.DefaultMode, 0) != 0o440 || len(secret.Items) != 2 {
				t.Errorf("secret volume = name %q, mode %o, items %d; want cache-tls, 440, 2",
					ptr.Deref(secret.SecretName, ""), ptr.Deref(secret.DefaultMode, 0), len(secret.Items))
			}
			if got := ptr.Deref(pod.SecurityContext.FSGroup, 0); got != memcachedUID {
				t.Errorf("fsGroup = %d, want memcached's group %d so it can read the 0440 files", got, memcachedUID)
			}

			reloader := container(t, pod, TLSReloaderContainerName)
			if ptr.Deref(reloader.Image, "") != cachev1beta1.DefaultImage {
				t.Errorf("reloader image = %q, want memcached's own %q", ptr.Deref(reloader.Image, ""), cachev1beta1.DefaultImage)
			}
			if want := []string{"/etc/memcached/tls", strings.TrimPrefix(tt.wantExporter, "127.0.0.1:"), "10", TLSRefusedPath}; !reflect.DeepEqual(reloader.Args, want) {
				t.Errorf("reloader args = %v, want %v", reloader.Args, want)
			}
			if !reflect.DeepEqual(reloader.VolumeMounts, wantMount) {
				t.Errorf("reloader mounts = %+v, want %+v", reloader.VolumeMounts, wantMount)
			}
			// The kubelet expands $(NAME) of the container's own variables
			// in command and args, and turns $$ into $. With no variables
			// and no $$ the script reaches bash unchanged.
			if len(reloader.Env) > 0 || strings.Contains(strings.Join(reloader.Command, " "), "$$") {
				t.Errorf("the kubelet would rewrite the reloader script: env %v", reloader.Env)
			}
			if sc := reloader.SecurityContext; sc == nil || !ptr.Deref(sc.ReadOnlyRootFilesystem, false) || !ptr.Deref(sc.RunAsNonRoot, false) {
				t.Errorf("reloader security context %+v is not the restricted one", sc)
			}
		})
	}
}

// argValue returns the argument after flag, or "".
func argValue(args []string, flag string) string {
	for i, a := range args {
		if a == flag && i+1 < len(args) {
			return args[i+1]
		}
	}
	return ""
}

func TestDeploymentClientCA(t *testing.T) {
	tlsOnly := &cachev1beta1.TLS{SecretName: "cache-tls"}
	const serving = "ssl_chain_cert=/etc/memcached/tls/tls.crt,ssl_key=/etc/memcached/tls/tls.key"
	servingItems := []corev1ac.KeyToPathApplyConfiguration{
		*corev1ac.KeyToPath().WithKey("tls.crt").WithPath("tls.crt"),
		*corev1ac.KeyToPath().WithKey("tls.key").WithPath("tls.key"),
	}
	caItems := []corev1ac.KeyToPathApplyConfiguration{*corev1ac.KeyToPath().WithKey("ca.crt").WithPath("ca.crt")}
	tests := []struct {
		name string
		tls  *cachev1beta1.TLS

		wantOptions string
		// wantCA is the projected source of ca.crt; nil for the plain
		// Secret volume of a spec without a client CA.
		wantCA *corev1ac.VolumeProjectionApplyConfiguration
	}{
		{
			name:        "no client CA: the Secret volume and the reloader of TLS alone",
			tls:         tlsOnly,
			wantOptions: serving,
		},
		{
			name:        "client CA from a Secret",
			tls:         &cachev1beta1.TLS{SecretName: "cache-tls", ClientCA: &cachev1beta1.ClientCA{SecretName: "clients-ca"}},
			wantOptions: serving + ",ssl_ca_cert=/etc/memcached/tls/ca.crt,ssl_verify_mode=2",
			wantCA:      corev1ac.VolumeProjection().WithSecret(corev1ac.SecretProjection().WithName("clients-ca").WithItems(&caItems[0])),
		},
		{
			name:        "client CA from a ConfigMap",
			tls:         &cachev1beta1.TLS{SecretName: "cache-tls", ClientCA: &cachev1beta1.ClientCA{ConfigMapName: "clients-bundle"}},
			wantOptions: serving + ",ssl_ca_cert=/etc/memcached/tls/ca.crt,ssl_verify_mode=2",
			wantCA:      corev1ac.VolumeProjection().WithConfigMap(corev1ac.ConfigMapProjection().WithName("clients-bundle").WithItems(&caItems[0])),
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d, err := Deployment(Default(memcached(func(s *cachev1beta1.MemcachedSpec) { s.TLS = tt.tls })))
			if err != nil {
				t.Fatalf("Deployment: %v", err)
			}
			pod := d.Spec.Template.Spec
			mcd, reloader := container(t, pod, MemcachedContainerName), container(t, pod, TLSReloaderContainerName)
			if got := argValue(mcd.Args, "-o"); got != tt.wantOptions {
				t.Errorf("-o = %q, want %q", got, tt.wantOptions)
			}
			wantMount := []corev1ac.VolumeMountApplyConfiguration{*corev1ac.VolumeMount().WithName("tls").WithMountPath("/etc/memcached/tls").WithReadOnly(true)}
			if !reflect.DeepEqual(mcd.VolumeMounts, wantMount) || !reflect.DeepEqual(reloader.VolumeMounts, wantMount) {
				t.Errorf("mounts: memcached %+v, reloader %+v, want %+v in both", mcd.VolumeMounts, reloader.VolumeMounts, wantMount)
			}
			if len(pod.Volumes) != 1 {
				t.Fatalf("volumes = %+v, want one", pod.Volumes)
			}
			v := pod.Volumes[0]
			script := reloader.Command[2]
			if tt.wantCA == nil {
				if v.Secret == nil || v.Projected != nil || !reflect.DeepEqual(v.Secret.Items, servingItems) {
					t.Errorf("volume = %+v, want the Secret volume of tls.crt and tls.key", v)
				}
				if script != tlsReloaderScript {
					t.Errorf("without a client CA the reloader runs another script:\n%s", script)
				}
				return
			}
			if v.Secret != nil || v.Projected == nil {
				t.Fatalf("volume = %+v, want a projected volume", v)
			}
			wantSources := []corev1ac.VolumeProjectionApplyConfiguration{
				*corev1ac.VolumeProjection().WithSecret(corev1ac.SecretProjection().WithName("cache-tls").WithItems(&servingItems[0], &servingItems[1])),
				*tt.wantCA,
			}
			if !reflect.DeepEqual(v.Projected.Sources, wantSources) {
				t.Errorf("projected sources = %+v, want %+v", v.Projected.Sources, wantSources)
			}
			if got := ptr.Deref(v.Projected.DefaultMode, 0); got != 0o440 {
				t.Errorf("projected default mode = %o, want 440", got)
			}
			// The reloader must compare the bundle too, or a renewed one
			// would wait for the next renewal of the certificate.
			if !strings.Contains(script, `$(<"$dir/ca.crt")`) || script == tlsReloaderScript {
				t.Errorf("the reloader does not compare ca.crt:\n%s", script)
			}
		})
	}
}
