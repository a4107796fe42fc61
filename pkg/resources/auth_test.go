package resources

import (
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	corev1ac "k8s.io/client-go/applyconfigurations/core/v1"
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
	{name: "254 bytes, then an entry", data: "u:" + strings.Repeat("p", 252) + "\nbob:pw\n", normalized: "u:" + strings.Repeat("p", 252) + "\nbob:pw\n"},
	{name: "empty", data: "", problem: "no entry"},
	{name: "only comments", data: "# app:secret\n\n", problem: "no entry"},
	{name: "no colon", data: "app:secret\napp secret\n", problem: "no ':' on line 2"},
	{name: "a space in the password", data: "# x\napp:se cret\n", problem: "whitespace in line 2"},
	{name: "a trailing tab", data: "app:secret\t\n", problem: "whitespace in line 1"},
	{name: "an indented comment", data: " # app\n", problem: "no ':' on line 1"},
	{name: "255 bytes, which would hide every entry after it from memcached", data: "u:" + strings.Repeat("p", 253) + "\nbob:pw\n", problem: "line 1 over 254 bytes"},
	{name: "a NUL byte, which bash would drop", data: "app:sec\x00ret\n", problem: "a NUL byte in line 1"},
	{name: "a NUL byte in a comment", data: "# a\x00\napp:secret\n", problem: "a NUL byte in line 1"},
	{name: "a NUL byte alone on a line", data: "app:secret\n\x00\n", problem: "a NUL byte in line 2"},
	{name: "a NUL byte as the last byte, without a newline", data: "app:secret\n\x00", problem: "a NUL byte in line 2"},
	{name: "a NUL byte after an earlier problem", data: "nocolon\napp:\x00\n", problem: "no ':' on line 1"},
	{name: "a NUL byte after a line of only a carriage return", data: "\r\n\x00#x\napp:secret\n", problem: "a NUL byte in line 2"},
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
			wantReloaderArgs: []string{"", ""},
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
			wantReloaderArgs: []string{TLSMountPath, TLSRefusedPath, corev1.TLSCertKey, corev1.TLSPrivateKeyKey},
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
			wantReloaderArgs: []string{TLSMountPath, TLSRefusedPath, corev1.TLSCertKey, corev1.TLSPrivateKeyKey, cachev1beta1.ClientCAKey},
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

// kubeletExpand does to s what the kubelet does to a container's command
// and arguments (and, with the variables of literal value only, to an
// exec probe's command): "$$" becomes "$", "$(NAME)" becomes the value of
// the container's variable NAME, where NAME runs to the first ')', and is
// left as written when the container has no such variable. A '$' before
// anything else, or a "$(" without its ')', is left as written.
func kubeletExpand(s string, env map[string]string) string {
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] != '$' || i+1 == len(s) {
			b.WriteByte(s[i])
			continue
		}
		switch s[i+1] {
		case '$':
			b.WriteByte('$')
			i++
		case '(':
			end := strings.IndexByte(s[i+2:], ')')
			if end < 0 {
				b.WriteString("$(")
				i++
				continue
			}
			name := s[i+2 : i+2+end]
			if v, ok := env[name]; ok {
				b.WriteString(v)
			} else {
				b.WriteString("$(" + name + ")")
			}
			i += 2 + end
		default:
			b.WriteString(s[i : i+2])
			i++
		}
	}
	return b.String()
}

func TestKubeletExpand(t *testing.T) {
	env := map[string]string{"POD_IPS": "10.0.0.1"}
	for in, want := range map[string]string{
		"-l notls:127.0.0.1:11212,$(POD_IPS)": "-l notls:127.0.0.1:11212,10.0.0.1",
		`mv "$2.$$" "$2"`:                     `mv "$2.$" "$2"`,
		"$$(POD_IPS)":                         "$(POD_IPS)",
		"$(n + 1)) $(UNSET) $(":               "$(n + 1)) $(UNSET) $(",
		"${x} $'\\r' $":                       "${x} $'\\r' $",
	} {
		if got := kubeletExpand(in, env); got != want {
			t.Errorf("kubeletExpand(%q) = %q, want %q", in, got, want)
		}
	}
}

// TestScriptsSurviveKubeletExpansion renders every container of Pods with
// auth and TLS, expands their commands, arguments and exec probes as the
// kubelet does, and checks that bash gets the scripts as written. Then it
// runs the normalize function of the wrapper and of the reloader, as the
// kubelet hands them over, and checks that each writes its temporary file
// under a name of its own process, not one they share.
func TestScriptsSurviveKubeletExpansion(t *testing.T) {
	specs := map[string]func(*cachev1beta1.MemcachedSpec){
		"auth": func(s *cachev1beta1.MemcachedSpec) { s.Auth = &cachev1beta1.Auth{SecretName: "cache-auth"} },
		"auth and TLS with a client CA": func(s *cachev1beta1.MemcachedSpec) {
			s.Auth = &cachev1beta1.Auth{SecretName: "cache-auth"}
			s.TLS = &cachev1beta1.TLS{SecretName: "cache-tls", ClientCA: &cachev1beta1.ClientCA{ConfigMapName: "clients"}}
		},
		"TLS": func(s *cachev1beta1.MemcachedSpec) { s.TLS = &cachev1beta1.TLS{SecretName: "cache-tls"} },
	}
	for name, spec := range specs {
		t.Run(name, func(t *testing.T) {
			d, err := Deployment(Default(memcached(spec)))
			if err != nil {
				t.Fatal(err)
			}
			for _, c := range d.Spec.Template.Spec.Containers {
				env, static := map[string]string{}, map[string]string{}
				for _, e := range c.Env {
					// A downward-API variable is expanded in the
					// command, never in a probe.
					env[*e.Name] = "10.0.0.1"
					if e.Value != nil {
						static[*e.Name] = *e.Value
					}
				}
				for i, a := range append(append([]string{}, c.Command...), c.Args...) {
					if strings.Contains(a, "$("+PodIPsEnv+")") {
						continue // the one reference meant for the kubelet
					}
					if got := kubeletExpand(a, env); got != a {
						t.Errorf("container %s, word %d of its command and arguments: the kubelet would hand over\n%s\ninstead of\n%s", *c.Name, i, got, a)
					}
				}
				for _, p := range []*corev1ac.ProbeApplyConfiguration{c.ReadinessProbe, c.LivenessProbe, c.StartupProbe} {
					if p == nil || p.Exec == nil {
						continue
					}
					for _, a := range p.Exec.Command {
						if got := kubeletExpand(a, static); got != a {
							t.Errorf("container %s: the kubelet would run the probe word %q as %q", *c.Name, a, got)
						}
					}
				}
			}
		})
	}

	bash, err := exec.LookPath("bash")
	if err != nil {
		t.Fatalf("the scripts run in bash: %v", err)
	}
	d, err := Deployment(Default(memcached(specs["auth"])))
	if err != nil {
		t.Fatal(err)
	}
	pod := d.Spec.Template.Spec
	dir := t.TempDir()
	src, dst := filepath.Join(dir, "secret"), filepath.Join(dir, "auth")
	if err := os.WriteFile(src, []byte("app:secret\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	mv := regexp.MustCompile(`(?m)^\++ mv -f (\S+) ` + regexp.QuoteMeta(dst) + `$`)
	temp := map[string]string{}
	for _, name := range []string{MemcachedContainerName, ReloaderContainerName} {
		script := kubeletExpand(container(t, pod, name).Command[2], nil)
		start := strings.Index(script, "first_nul() {")
		end := strings.Index(script, "\nnormalize() {")
		end += strings.Index(script[end:], "\n}\n") + 3
		if start < 0 || end < start {
			t.Fatalf("container %s: no normalize function in its script", name)
		}
		out, err := exec.Command(bash, "-x", "-c", "LC_ALL=C\n"+script[start:end]+`normalize "$1" "$2"`, name, src, dst).CombinedOutput()
		m := mv.FindStringSubmatch(string(out))
		if err != nil || m == nil {
			t.Fatalf("container %s: normalize %v, trace:\n%s", name, err, out)
		}
		if !regexp.MustCompile(`^` + regexp.QuoteMeta(dst) + `\.[0-9]+$`).MatchString(m[1]) {
			t.Errorf("container %s writes its temporary file %s, want %s.<its pid>", name, m[1], dst)
		}
		temp[name] = m[1]
	}
	if temp[MemcachedContainerName] == temp[ReloaderContainerName] {
		t.Errorf("the wrapper and the reloader share the temporary file %s", temp[ReloaderContainerName])
	}
}
