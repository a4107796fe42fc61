package localcluster

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	"k8s.io/utils/ptr"
)

// KubernetesVersion is the version of the control plane hack/build-cluster.sh
// builds.
const KubernetesVersion = "v1.37.2"

// BinDirEnv overrides where the control-plane binaries are looked up.
const BinDirEnv = "LOCALCLUSTER_BIN_DIR"

// Config says which parts to run.
type Config struct {
	// BinDir holds the binaries. Empty means $LOCALCLUSTER_BIN_DIR, then
	// _output/bin/k8s-<version> in the repository that contains the working
	// directory.
	BinDir string
	// ControllerManager runs kube-controller-manager: the garbage collector
	// and the Deployment and ReplicaSet controllers.
	ControllerManager bool
	// Scheduler runs kube-scheduler.
	Scheduler bool
	// Kwok runs kwok and registers Nodes it manages, so that scheduled Pods
	// become Running and Ready.
	Kwok bool
	// Nodes is how many fake nodes to register when Kwok is set; default 2.
	Nodes int
	// Zones, when set, puts the fake nodes in these zones, in turn: node
	// i gets the label topology.kubernetes.io/zone=Zones[i%len(Zones)].
	Zones []string
	// PodReadyDelay is how long kwok waits before it makes a scheduled
	// Pod Running and Ready, as pulling an image and passing a readiness
	// probe would take; 0 makes it at once.
	PodReadyDelay time.Duration
	// Progress receives one line per step; nil discards them.
	Progress io.Writer
	// AuditGroups, when set, makes the apiserver log every request the
	// members of these groups send (Cluster.AuditLog): tests count and
	// classify the requests of an operator running as a separate process,
	// under whichever ServiceAccount it runs.
	AuditGroups []string
	// ExtraArgs are flags appended to a part's command line, keyed by the
	// part's name ("kube-controller-manager", "kube-scheduler"): a bench
	// raises the controllers' client limits so that they keep up.
	ExtraArgs map[string][]string
}

// Full is every part, for tests that need Pods to become Ready.
func Full() Config {
	return Config{ControllerManager: true, Scheduler: true, Kwok: true}
}

// Cluster is a running local control plane.
type Cluster struct {
	// Dir holds every file of the run; Stop removes it.
	Dir string
	// KubeconfigPath is an admin kubeconfig (system:masters).
	KubeconfigPath string
	// Config is the admin client configuration.
	Config *rest.Config
	// APIServerURL is https://127.0.0.1:<port>.
	APIServerURL string
	// EtcdURL is etcd's client URL, http://127.0.0.1:<port>.
	EtcdURL string

	cfg       Config
	pki       *pki
	etcd      *process
	apiserver *process
	others    []*process
	progress  io.Writer
	// auditLog is the audit log's path, empty without Config.AuditGroups.
	auditLog string
}

// Start brings up the configured parts and returns when the apiserver is
// ready and, with Kwok, the fake nodes are Ready. On failure everything
// already started is stopped and the error names the part that failed and
// shows its log tail.
func Start(ctx context.Context, cfg Config) (_ *Cluster, err error) {
	binDir, err := resolveBinDir(cfg.BinDir)
	if err != nil {
		return nil, err
	}
	dir, err := os.MkdirTemp("", "localcluster-")
	if err != nil {
		return nil, fmt.Errorf("creating cluster directory: %w", err)
	}
	c := &Cluster{Dir: dir, cfg: cfg, progress: cfg.Progress}
	if c.progress == nil {
		c.progress = io.Discard
	}
	defer func() {
		if err != nil {
			c.Stop()
		}
	}()

	if c.pki, err = newPKI(dir); err != nil {
		return nil, err
	}
	ports, err := FreePorts(3)
	if err != nil {
		return nil, err
	}
	etcdClient, etcdPeer, apiPort := ports[0], ports[1], ports[2]
	c.APIServerURL = "https://" + hostPort(apiPort)
	c.EtcdURL = "http://" + hostPort(etcdClient)

	c.KubeconfigPath = filepath.Join(dir, "admin.kubeconfig")
	if err := c.writeAdminKubeconfig(); err != nil {
		return nil, err
	}
	if c.Config, err = clientcmd.BuildConfigFromFlags("", c.KubeconfigPath); err != nil {
		return nil, fmt.Errorf("loading admin kubeconfig: %w", err)
	}

	c.etcd = &process{
		name:    "etcd",
		path:    filepath.Join(binDir, "etcd"),
		logPath: filepath.Join(dir, "etcd.log"),
		args: []string{
			"--name=localcluster",
			"--data-dir=" + filepath.Join(dir, "etcd"),
			"--listen-client-urls=http://" + hostPort(etcdClient),
			"--advertise-client-urls=http://" + hostPort(etcdClient),
			"--listen-peer-urls=http://" + hostPort(etcdPeer),
			"--initial-advertise-peer-urls=http://" + hostPort(etcdPeer),
			"--initial-cluster=localcluster=http://" + hostPort(etcdPeer),
			// Tests do not need durability; fsync dominates write latency.
			"--unsafe-no-fsync",
			"--log-level=warn",
		},
	}
	c.step("Starting etcd on %s", hostPort(etcdClient))
	if err := c.etcd.start(); err != nil {
		return nil, err
	}
	if err := waitHTTP(ctx, c.etcd, "http://"+hostPort(etcdClient)+"/health", nil); err != nil {
		return nil, err
	}

	c.apiserver = &process{
		name:    "kube-apiserver",
		path:    filepath.Join(binDir, "kube-apiserver"),
		logPath: filepath.Join(dir, "kube-apiserver.log"),
		args: []string{
			"--etcd-servers=http://" + hostPort(etcdClient),
			"--bind-address=127.0.0.1",
			"--advertise-address=127.0.0.1",
			// The kubernetes Service endpoint cannot point at loopback, and
			// nothing in a local cluster needs it.
			"--endpoint-reconciler-type=none",
			fmt.Sprintf("--secure-port=%d", apiPort),
			"--tls-cert-file=" + c.pki.servingCert,
			"--tls-private-key-file=" + c.pki.servingKey,
			"--client-ca-file=" + c.pki.caFile,
			"--authorization-mode=RBAC",
			// Production clusters enable it on top of the defaults: an
			// ownerReference with blockOwnerDeletion then needs update on
			// the owner's finalizers subresource, so the tests prove the
			// shipped RBAC grants it.
			"--enable-admission-plugins=OwnerReferencesPermissionEnforcement",
			"--service-account-issuer=https://kubernetes.default.svc.cluster.local",
			"--service-account-key-file=" + c.pki.saPublicKey,
			"--service-account-signing-key-file=" + c.pki.saPrivateKey,
			"--service-cluster-ip-range=10.0.0.0/24",
			// Webhooks and aggregated APIs named by a Service are called at
			// one of its EndpointSlice addresses instead of its ClusterIP,
			// which nothing routes without kube-proxy. Tests then reach a
			// listener on this machine through a selector-less Service and
			// an EndpointSlice they write; without a Service reference
			// nothing changes.
			"--enable-aggregator-routing=true",
			"--profiling=false",
			"--v=1",
		},
	}
	if len(cfg.AuditGroups) > 0 {
		policy, err := auditPolicy(dir, cfg.AuditGroups)
		if err != nil {
			return nil, fmt.Errorf("writing the audit policy: %w", err)
		}
		c.auditLog = filepath.Join(dir, "audit.log")
		// Blocking: an event is written before the apiserver moves on, so
		// none is dropped when a test floods it.
		c.apiserver.args = append(c.apiserver.args,
			"--audit-policy-file="+policy,
			"--audit-log-path="+c.auditLog,
			"--audit-log-format=json",
			"--audit-log-mode=blocking",
			// Rotation would move the file under AuditLog's reader.
			"--audit-log-maxsize=10240",
		)
	}
	if err := c.StartAPIServer(ctx); err != nil {
		return nil, err
	}

	if cfg.ControllerManager {
		err := c.startOnFreePort(ctx, func(port int) *process {
			return &process{
				name:    "kube-controller-manager",
				path:    filepath.Join(binDir, "kube-controller-manager"),
				logPath: filepath.Join(dir, "kube-controller-manager.log"),
				args: append([]string{
					"--kubeconfig=" + c.KubeconfigPath,
					"--authentication-kubeconfig=" + c.KubeconfigPath,
					"--authorization-kubeconfig=" + c.KubeconfigPath,
					"--bind-address=127.0.0.1",
					fmt.Sprintf("--secure-port=%d", port),
					"--leader-elect=false",
					"--root-ca-file=" + c.pki.caFile,
					"--service-account-private-key-file=" + c.pki.saPrivateKey,
					"--use-service-account-credentials=false",
					"--v=1",
				}, cfg.ExtraArgs["kube-controller-manager"]...),
			}
		})
		if err != nil {
			return nil, err
		}
	}
	if cfg.Scheduler {
		err := c.startOnFreePort(ctx, func(port int) *process {
			return &process{
				name:    "kube-scheduler",
				path:    filepath.Join(binDir, "kube-scheduler"),
				logPath: filepath.Join(dir, "kube-scheduler.log"),
				args: append([]string{
					"--kubeconfig=" + c.KubeconfigPath,
					"--authentication-kubeconfig=" + c.KubeconfigPath,
					"--authorization-kubeconfig=" + c.KubeconfigPath,
					"--bind-address=127.0.0.1",
					fmt.Sprintf("--secure-port=%d", port),
					"--leader-elect=false",
					"--v=1",
				}, cfg.ExtraArgs["kube-scheduler"]...),
			}
		})
		if err != nil {
			return nil, err
		}
	}
	if cfg.Kwok {
		if err := c.startKwok(ctx, binDir); err != nil {
			return nil, err
		}
	}
	c.step("Control plane ready; kubeconfig: %s", c.KubeconfigPath)
	return c, nil
}

// Parts names the processes that run, for reports.
func (c *Cluster) Parts() []string {
	parts := []string{"etcd", "kube-apiserver"}
	for _, p := range c.others {
		parts = append(parts, p.name)
	}
	return parts
}

func (c *Cluster) step(format string, args ...any) {
	fmt.Fprintf(c.progress, ">> "+format+"\n", args...)
}

// startOnFreePort starts a process whose only listener is its secure port
// and waits for its /healthz. The port is picked just before the start; if
// another process took it in between, the start is retried on a new port.
func (c *Cluster) startOnFreePort(ctx context.Context, newProcess func(port int) *process) error {
	const attempts = 3
	var err error
	for range attempts {
		var port int
		if port, err = FreePort(); err != nil {
			return err
		}
		p := newProcess(port)
		c.step("Starting %s on %s", p.name, hostPort(port))
		if err = p.start(); err != nil {
			return err
		}
		c.others = append(c.others, p)
		err = waitHTTP(ctx, p, fmt.Sprintf("https://%s/healthz", hostPort(port)), &tls.Config{InsecureSkipVerify: true}) //nolint:gosec // Local health probe of a process we just started.
		if err == nil || !errors.Is(err, errExited) || !strings.Contains(tail(p.logPath, 5), "address already in use") {
			return err
		}
		c.others = c.others[:len(c.others)-1]
	}
	return err
}

// StartAPIServer starts kube-apiserver on its port, with the same flags and
// the same etcd, and waits until it is ready. Start calls it; fault tests
// call it after StopAPIServer.
func (c *Cluster) StartAPIServer(ctx context.Context) error {
	c.step("Starting kube-apiserver on %s", c.APIServerURL)
	if err := c.apiserver.start(); err != nil {
		return err
	}
	return waitHTTP(ctx, c.apiserver, c.APIServerURL+"/readyz", c.adminTLS())
}

// StopAPIServer stops kube-apiserver and leaves etcd running.
func (c *Cluster) StopAPIServer() {
	c.apiserver.stop(15 * time.Second)
}

// Stop ends every process, newest first, and removes Dir. It is safe to
// call more than once.
func (c *Cluster) Stop() {
	for i := len(c.others) - 1; i >= 0; i-- {
		c.others[i].stop(10 * time.Second)
	}
	c.others = nil
	if c.apiserver != nil {
		c.apiserver.stop(15 * time.Second)
	}
	if c.etcd != nil {
		c.etcd.stop(10 * time.Second)
	}
	if c.Dir != "" {
		_ = os.RemoveAll(c.Dir)
	}
}

// Exited names the parts that are no longer running, for diagnosing a
// test that waits in vain.
func (c *Cluster) Exited() []string {
	var out []string
	for _, p := range append([]*process{c.etcd, c.apiserver}, c.others...) {
		if p == nil {
			continue
		}
		if done, err := p.exited(); done {
			out = append(out, fmt.Sprintf("%s (%v)", p.name, err))
		}
	}
	return out
}

// LogTail returns the last lines of a part's log, for test failure output.
func (c *Cluster) LogTail(part string, lines int) string {
	return tail(filepath.Join(c.Dir, part+".log"), lines)
}

func (c *Cluster) adminTLS() *tls.Config {
	cfg, err := rest.TLSConfigFor(c.Config)
	if err != nil {
		return &tls.Config{InsecureSkipVerify: true} //nolint:gosec // Fallback for a readiness probe only.
	}
	return cfg
}

func (c *Cluster) writeAdminKubeconfig() error {
	kc := clientcmdapi.NewConfig()
	kc.Clusters["localcluster"] = &clientcmdapi.Cluster{Server: c.APIServerURL, CertificateAuthorityData: c.pki.caPEM}
	kc.AuthInfos["admin"] = &clientcmdapi.AuthInfo{ClientCertificateData: c.pki.adminCertPEM, ClientKeyData: c.pki.adminKeyPEM}
	kc.Contexts["localcluster"] = &clientcmdapi.Context{Cluster: "localcluster", AuthInfo: "admin"}
	kc.CurrentContext = "localcluster"
	return clientcmd.WriteToFile(*kc, c.KubeconfigPath)
}

// ServiceAccountKubeconfig writes a kubeconfig that authenticates as the
// ServiceAccount (see ServiceAccountToken), so a test can run the operator
// with exactly the RBAC bound to that account.
func (c *Cluster) ServiceAccountKubeconfig(ctx context.Context, namespace, name string) (string, error) {
	token, err := c.ServiceAccountToken(ctx, namespace, name)
	if err != nil {
		return "", err
	}
	kc := clientcmdapi.NewConfig()
	kc.Clusters["localcluster"] = &clientcmdapi.Cluster{Server: c.APIServerURL, CertificateAuthorityData: c.pki.caPEM}
	kc.AuthInfos[name] = &clientcmdapi.AuthInfo{Token: token}
	kc.Contexts["localcluster"] = &clientcmdapi.Context{Cluster: "localcluster", AuthInfo: name, Namespace: namespace}
	kc.CurrentContext = "localcluster"
	path := filepath.Join(c.Dir, fmt.Sprintf("sa-%s-%s.kubeconfig", namespace, name))
	if err := clientcmd.WriteToFile(*kc, path); err != nil {
		return "", err
	}
	return path, nil
}

// ServiceAccountToken creates the ServiceAccount if needed and returns a
// day-long token for it from the TokenRequest API.
func (c *Cluster) ServiceAccountToken(ctx context.Context, namespace, name string) (string, error) {
	client, err := kubernetes.NewForConfig(c.Config)
	if err != nil {
		return "", err
	}
	_, err = client.CoreV1().ServiceAccounts(namespace).Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{})
	if err != nil && !apierrors.IsAlreadyExists(err) {
		return "", fmt.Errorf("creating ServiceAccount %s/%s: %w", namespace, name, err)
	}
	tr, err := client.CoreV1().ServiceAccounts(namespace).CreateToken(ctx, name, &authenticationv1.TokenRequest{
		Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: ptr.To[int64](24 * 3600)},
	}, metav1.CreateOptions{})
	if err != nil {
		return "", fmt.Errorf("requesting a token for %s/%s: %w", namespace, name, err)
	}
	return tr.Status.Token, nil
}

func resolveBinDir(dir string) (string, error) {
	if dir == "" {
		dir = os.Getenv(BinDirEnv)
	}
	if dir == "" {
		root, err := repoRoot()
		if err != nil {
			return "", err
		}
		dir = filepath.Join(root, "_output", "bin", "k8s-"+KubernetesVersion)
	}
	for _, b := range []string{"etcd", "kube-apiserver"} {
		if _, err := os.Stat(filepath.Join(dir, b)); err != nil {
			return "", fmt.Errorf("control-plane binary %s not found in %s; run hack/build-cluster.sh (make cluster-binaries): %w", b, dir, err)
		}
	}
	return dir, nil
}

// repoRoot finds the directory holding go.mod above the working directory.
func repoRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		if data, err := os.ReadFile(filepath.Join(dir, "go.mod")); err == nil && strings.Contains(string(data), "module github.com/kubelite/memcached-operator\n") {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", fmt.Errorf("no memcached-operator go.mod above the working directory; set %s", BinDirEnv)
		}
		dir = parent
	}
}

// nodeCapacity is what each fake node offers: enough for hundreds of
// memcached Pods.
var nodeCapacity = corev1.ResourceList{
	corev1.ResourceCPU:    resource.MustParse("64"),
	corev1.ResourceMemory: resource.MustParse("512Gi"),
	corev1.ResourcePods:   resource.MustParse("500"),
}
