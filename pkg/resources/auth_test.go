package resources

import (
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/utils/ptr"

	cachev1beta1 "github.com/kubelite/memcached-operator/pkg/apis/cache/v1beta1"
)

// authFileCases are auth files with what AuthFileProblem says of them and,
// for valid ones, the file the Pod hands memcached.
var authFileCases = []struct {
	name, data, problem, normalized string
}{
	{name: "one entry", data: "app:secret\n", normalized: "app:secret\n"},
	{name: "no final newline, which memcached 1.6.18 would cut short", data: "app:secret", normalized: "app:secret\n"},
	{name: "CRLF, comments and blank lines dropped", data: "# app\r\n\r\napp:secret\r\n \t\nother:pw\r\n", normalized: "app:secret\nother:pw\n"},
	{name: "a password with ':'", data: "app:a:b:c\n", normalized: "app:a:b:c\n"},
	{name: "eight entries", data: strings.Repeat("u:p\n", 8), normalized: strings.Repeat("u:p\n", 8)},
	{name: "255 bytes", data: "u:" + strings.Repeat("p", 253) + "\n", normalized: "u:" + strings.Repeat("p", 253) + "\n"},
	{name: "empty", data: "", problem: "no entry"},
	{name: "only comments", data: "# app:secret\n\n", problem: "no entry"},
	{name: "no colon", data: "app:secret\napp secret\n", problem: "no ':' on line 2"},
	{name: "a space in the password", data: "# x\napp:se cret\n", problem: "whitespace in line 2"},
	{name: "a trailing tab", data: "app:secret\t\n", problem: "whitespace in line 1"},
	{name: "an indented comment", data: " # app\n", problem: "no ':' on line 1"},
	{name: "256 bytes", data: "u:" + strings.Repeat("p", 254) + "\n", problem: "line 1 over 255 bytes"},
	{name: "nine entries, the ninth of which memcached would ignore", data: strings.Repeat("u:p\n", 9), problem: "more than 8 entries"},
	{name: "nine lines, one of them a comment", data: "#\n" + strings.Repeat("u:p\n", 8), normalized: strings.Repeat("u:p\n", 8)},
}

func TestAuthFileProblem(t *testing.T) {
	for _, tt := range authFileCases {
		t.Run(tt.name, func(t *testing.T) {
			if got := AuthFileProblem([]byte(tt.data)); got != tt.problem {
				t.Errorf("AuthFileProblem(%q) = %q, want %q", tt.data, got, tt.problem)
			}
		})
	}
	t.Run("a NUL byte, which bash would drop", func(t *testing.T) {
		if got := AuthFileProblem([]byte("app:sec\x00ret\n")); got != "a NUL byte in line 1" {
			t.Errorf("got %q", got)
		}
	})
}

// TestAuthNormalizeMatchesAuthFileProblem runs the Pods' bash function on
// every case: the operator's verdict on a Secret must be the one the Pod
// acts on, in the same words, and a valid file must come out normalized.
func TestAuthNormalizeMatchesAuthFileProblem(t *testing.T) {
	bash, err := exec.LookPath("bash")
	if err != nil {
		t.Fatalf("the normalize function runs in bash: %v", err)
	}
	script := "LC_ALL=C\n" + authNormalizeFunc + `normalize "$1" "$2"`
	for _, tt := range authFileCases {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			src, dst := filepath.Join(dir, "secret"), filepath.Join(dir, "auth")
			if err := os.WriteFile(src, []byte(tt.data), 0o600); err != nil {
				t.Fatal(err)
			}
			out, err := exec.Command(bash, "-c", script, "normalize", src, dst).CombinedOutput()
			if got := strings.TrimSpace(string(out)); got != tt.problem || (err == nil) != (tt.problem == "") {
				t.Fatalf("normalize: %v, output %q; want the problem %q", err, out, tt.problem)
			}
			written, err := os.ReadFile(dst)
			if tt.problem != "" {
				if !os.IsNotExist(err) {
					t.Errorf("normalize wrote %q for a file it refused (%v)", written, err)
				}
				return
			}
			if err != nil || string(written) != tt.normalized {
				t.Errorf("normalized file %q (%v), want %q", written, err, tt.normalized)
			}
			if leftovers, _ := filepath.Glob(dst + ".*"); len(leftovers) > 0 {
				t.Errorf("temporary files left: %v", leftovers)
			}
		})
	}
}

func TestDeploymentAuth(t *testing.T) {
	withAuth := func(s *cachev1beta1.MemcachedSpec) {
		s.Auth = &cachev1beta1.Auth{SecretName: "cache-auth"}
		s.ExtraArgs = []string{"-o", "lru_crawler"}
	}
	tests := []struct {
		name string
		spec func(*cachev1beta1.MemcachedSpec)

		wantContainers, wantVolumes []string
		// wantReloaderArgs are the reloader's arguments after the
		// interval and the two auth files.
		wantPort         string
		wantReloaderArgs []string
	}{
		{
			name:             "auth: the reloader reaches memcached on spec.port",
			spec:             withAuth,
			wantContainers:   []string{MemcachedContainerName, ReloaderContainerName},
			wantVolumes:      []string{AuthSecretVolumeName, AuthVolumeName},
			wantPort:         "11211",
			wantReloaderArgs: []string{""},
		},
		{
			name: "auth and TLS: one reloader for both, on the loopback port",
			spec: func(s *cachev1beta1.MemcachedSpec) {
				withAuth(s)
				s.TLS = &cachev1beta1.TLS{SecretName: "cache-tls"}
			},
			wantContainers:   []string{MemcachedContainerName, ReloaderContainerName},
			wantVolumes:      []string{TLSVolumeName, AuthSecretVolumeName, AuthVolumeName},
			wantPort:         "11212",
			wantReloaderArgs: []string{TLSMountPath, corev1.TLSCertKey, corev1.TLSPrivateKeyKey},
		},
		{
			name: "auth, TLS and a client CA: the reloader compares the bundle too",
			spec: func(s *cachev1beta1.MemcachedSpec) {
				withAuth(s)
				s.TLS = &cachev1beta1.TLS{SecretName: "cache-tls", ClientCA: &cachev1beta1.ClientCA{ConfigMapName: "clients"}}
			},
			wantContainers:   []string{MemcachedContainerName, ReloaderContainerName},
			wantVolumes:      []string{TLSVolumeName, AuthSecretVolumeName, AuthVolumeName},
			wantPort:         "11212",
			wantReloaderArgs: []string{TLSMountPath, corev1.TLSCertKey, corev1.TLSPrivateKeyKey, cachev1beta1.ClientCAKey},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d, err := Deployment(Default(memcached(tt.spec)))
			if err != nil {
				t.Fatal(err)
			}
			pod := d.Spec.Template.Spec
			var names, volumes []string
			for _, c := range pod.Containers {
				names = append(names, *c.Name)
			}
			for _, v := range pod.Volumes {
				volumes = append(volumes, *v.Name)
			}
			if !slices.Equal(names, tt.wantContainers) || !slices.Equal(volumes, tt.wantVolumes) {
				t.Errorf("containers %v, volumes %v; want %v, %v", names, volumes, tt.wantContainers, tt.wantVolumes)
			}
			if !ptr.Deref(pod.ShareProcessNamespace, false) || ptr.Deref(pod.SecurityContext.FSGroup, 0) != memcachedUID {
				t.Errorf("shareProcessNamespace %v, fsGroup %v: the reloader must see memcached and the Secret's files be readable", pod.ShareProcessNamespace, pod.SecurityContext.FSGroup)
			}
			for _, v := range pod.Volumes {
				switch *v.Name {
				case AuthSecretVolumeName:
					if s := v.Secret; s == nil || *s.SecretName != "cache-auth" || len(s.Items) != 1 || *s.Items[0].Key != AuthSecretKey || *s.DefaultMode != tlsFileMode {
						t.Errorf("Secret volume %+v, want cache-auth's key auth, mode 0440", v.Secret)
					}
				case AuthVolumeName:
					if e := v.EmptyDir; e == nil || *e.Medium != corev1.StorageMediumMemory || e.SizeLimit == nil {
						t.Errorf("auth file volume %+v, want a bounded in-memory emptyDir", v.EmptyDir)
					}
				}
			}

			mcd := container(t, pod, MemcachedContainerName)
			if len(mcd.Command) != 6 || mcd.Command[0] != "bash" || mcd.Command[4] != AuthSecretMountPath+"/auth" || mcd.Command[5] != AuthFilePath {
				t.Errorf("memcached command %q, want the wrapper from the Secret's file to %s", mcd.Command, AuthFilePath)
			}
			if !strings.HasSuffix(mcd.Command[2], "exec memcached \"$@\"\n") {
				t.Errorf("the wrapper does not end by execing memcached with its arguments:\n%s", mcd.Command[2])
			}
			if got := argValue(mcd.Args, "-Y"); got != AuthFilePath {
				t.Errorf("-Y %q, want %s", got, AuthFilePath)
			}
			if i := slices.Index(mcd.Args, "-Y"); i < 0 || !slices.Equal(mcd.Args[i+2:], []string{"-o", "lru_crawler"}) {
				t.Errorf("args %v: -Y must come before extraArgs", mcd.Args)
			}
			if mcd.ReadinessProbe.TCPSocket == nil || mcd.LivenessProbe.TCPSocket == nil {
				t.Error("the probes must stay TCP connects, which -Y lets through")
			}

			reloader := container(t, pod, ReloaderContainerName)
			if reloader.Command[2] != reloaderScript {
				t.Error("the reloader does not run reloaderScript")
			}
			wantArgs := append([]string{tt.wantPort, "10", AuthSecretMountPath + "/auth", AuthFilePath}, tt.wantReloaderArgs...)
			if !slices.Equal(reloader.Args, wantArgs) {
				t.Errorf("reloader args %q, want %q", reloader.Args, wantArgs)
			}
			for _, c := range []string{MemcachedContainerName, ReloaderContainerName} {
				var mounts []string
				for _, m := range container(t, pod, c).VolumeMounts {
					mounts = append(mounts, *m.Name+":"+*m.MountPath+map[bool]string{true: ":ro", false: ""}[ptr.Deref(m.ReadOnly, false)])
				}
				for _, want := range []string{AuthSecretVolumeName + ":" + AuthSecretMountPath + ":ro", AuthVolumeName + ":" + AuthMountPath} {
					if !slices.Contains(mounts, want) {
						t.Errorf("%s mounts %v, want %s", c, mounts, want)
					}
				}
			}
		})
	}
}

func TestValidateAuthWithExporter(t *testing.T) {
	errs := Validate(Default(memcached(func(s *cachev1beta1.MemcachedSpec) {
		s.Auth = &cachev1beta1.Auth{SecretName: "cache-auth"}
		s.Monitoring = &cachev1beta1.Monitoring{Exporter: &cachev1beta1.Exporter{Enabled: true}}
	})))
	if len(errs) != 1 || errs[0].Field != "spec.auth" || !strings.Contains(errs[0].Detail, "cannot authenticate") {
		t.Errorf("Validate = %v, want spec.auth refused with the exporter", errs)
	}
}
