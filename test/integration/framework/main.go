package framework

import (
	"context"
	"debug/buildinfo"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"runtime/debug"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	clientset "github.com/kubelite/memcached-operator/pkg/generated/clientset/versioned"
	"github.com/kubelite/memcached-operator/pkg/localcluster"
)

// Config says what a package's control plane runs.
type Config struct {
	// Bare starts the control plane only: no artifacts/, no conversion
	// webhook, for tests that install the operator themselves (the Helm
	// chart). The operator's ServiceAccount is still the one the audit
	// log records.
	Bare bool
	// WebhookArgs are added to the package webhook's flags, for example
	// short certificate lifetimes to see them rotate.
	WebhookArgs []string
	// Zones puts the fake nodes in these zones, one node each; without
	// zones there are two nodes and no zone label.
	Zones []string
}

// OperatorNamespace and OperatorServiceAccount are the ServiceAccount
// artifacts/rbac binds, under which every operator of the package runs.
const (
	OperatorNamespace      = "memcached-operator"
	OperatorServiceAccount = "memcached-operator"
)

// OperatorUser is the name the apiserver gives the operator's requests.
const OperatorUser = "system:serviceaccount:" + OperatorNamespace + ":" + OperatorServiceAccount

// env is what Main set up for the package's tests.
var env struct {
	root string
	// tmp holds the package's binaries; it goes when Main returns.
	tmp         string
	cluster     *localcluster.Cluster
	audit       *localcluster.AuditLog
	kube        kubernetes.Interface
	mc          clientset.Interface
	binary      string
	webhookArgs []string

	variantsMu sync.Mutex
	variants   map[string]string
	kubeconfig string
	webhook    *Webhook
}

// setUpTimeout bounds the start of the control plane, and the install of
// artifacts/ once the operator is built.
const setUpTimeout = 5 * time.Minute

// Main runs the package's tests against a control plane of their own and
// exits: call it from TestMain.
func Main(m *testing.M, cfg Config) {
	os.Exit(run(m, cfg))
}

func run(m *testing.M, cfg Config) int {
	flag.Parse()
	var err error
	if env.tmp, err = os.MkdirTemp("", "memcached-operator-it-"); err != nil {
		fmt.Fprintln(os.Stderr, "integration framework:", err)
		return 1
	}
	defer os.RemoveAll(env.tmp)
	if err := setUp(cfg); err != nil {
		fmt.Fprintln(os.Stderr, "integration framework:", err)
		if env.cluster != nil {
			env.cluster.Stop()
		}
		return 1
	}
	defer env.cluster.Stop()
	defer env.webhook.Stop()
	// Ctrl-C or a kill by `go test -timeout` must not leave the cluster
	// directory or the binaries behind; the processes die with us through
	// Pdeathsig.
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, os.Interrupt, syscall.SIGTERM)
	go func() {
		<-sig
		env.cluster.Stop()
		_ = os.RemoveAll(env.tmp)
		os.Exit(1)
	}()
	return m.Run()
}

// setUp bounds each step that waits on the control plane by setUpTimeout;
// the build of the operator, which takes minutes on a cold cache, only by
// go test's -timeout.
func setUp(cfg Config) error {
	root, err := RepoRoot()
	if err != nil {
		return err
	}
	env.root = root
	env.webhookArgs = cfg.WebhookArgs
	// The binary builds while the control plane starts.
	built := make(chan error, 1)
	go func() { built <- buildOperator() }()

	lc := localcluster.Config{
		ControllerManager: true, Scheduler: true, Kwok: true,
		Nodes: 2, Zones: cfg.Zones,
		// Every ServiceAccount's requests: the operator's, and those of
		// the other installs' accounts tests run it under (Operator.User).
		// The control plane's own components authenticate otherwise.
		AuditGroups: []string{"system:serviceaccounts"},
	}
	if len(cfg.Zones) > 0 {
		lc.Nodes = len(cfg.Zones)
	}
	if testing.Verbose() {
		lc.Progress = os.Stderr
	}
	ctx, cancel := context.WithTimeout(context.Background(), setUpTimeout)
	defer cancel()
	if env.cluster, err = localcluster.Start(ctx, lc); err != nil {
		return fmt.Errorf("starting the control plane: %w", err)
	}
	env.audit = env.cluster.AuditLog()
	env.kube = kubernetes.NewForConfigOrDie(env.cluster.Config)
	env.mc = clientset.NewForConfigOrDie(env.cluster.Config)
	if err := <-built; err != nil {
		return err
	}
	if cfg.Bare {
		return nil
	}
	ctx, cancel = context.WithTimeout(context.Background(), setUpTimeout)
	defer cancel()
	if err := env.cluster.ApplyFiles(ctx, Path("artifacts/crd"), Path("artifacts/namespace.yaml"), Path("artifacts/rbac")); err != nil {
		return fmt.Errorf("installing artifacts: %w", err)
	}
	if env.kubeconfig, err = env.cluster.ServiceAccountKubeconfig(ctx, OperatorNamespace, OperatorServiceAccount); err != nil {
		return err
	}
	if env.webhook, err = StartWebhook(); err != nil {
		return fmt.Errorf("starting the conversion webhook: %w", err)
	}
	return nil
}

// BinaryEnv names a race-built operator binary of this tree for the
// package to run instead of building its own: make test builds it once
// for every package.
const BinaryEnv = "MEMCACHED_OPERATOR_BINARY"

// buildOperator builds the operator of this tree once for the package,
// unless BinaryEnv names one.
func buildOperator() (err error) {
	if bin := os.Getenv(BinaryEnv); bin != "" {
		if !filepath.IsAbs(bin) {
			return fmt.Errorf("%s=%s: not an absolute path; each package runs in its own directory", BinaryEnv, bin)
		}
		info, err := buildinfo.ReadFile(bin)
		if err != nil {
			return fmt.Errorf("%s: %w", BinaryEnv, err)
		}
		if !slices.Contains(info.Settings, debug.BuildSetting{Key: "-race", Value: "true"}) {
			return fmt.Errorf("%s=%s: not built with the race detector", BinaryEnv, bin)
		}
		env.binary = bin
		return nil
	}
	env.binary, err = build()
	return err
}

// BuildBinary builds the operator with build tags, once per package and
// set of tags: a test of an operator upgrade runs the build tagged
// renderingnext after the usual one.
func BuildBinary(t *testing.T, tags ...string) string {
	t.Helper()
	key := strings.Join(tags, ",")
	env.variantsMu.Lock()
	defer env.variantsMu.Unlock()
	if bin, ok := env.variants[key]; ok {
		return bin
	}
	bin, err := build(tags...)
	if err != nil {
		t.Fatal(err)
	}
	if env.variants == nil {
		env.variants = map[string]string{}
	}
	env.variants[key] = bin
	return bin
}

// build builds the operator with the race detector, which fails a test
// whose operator raced (Operator's cleanup reads the log for it), into a
// directory of its own. It shares its compiled packages with go test
// -race, which make test runs first; on a cold cache the build takes
// minutes, which go test's -timeout bounds, not the set-up's.
func build(tags ...string) (string, error) {
	dir, err := os.MkdirTemp(env.tmp, "bin-")
	if err != nil {
		return "", err
	}
	bin := filepath.Join(dir, "memcached-operator")
	cmd := exec.Command("go", "build", "-race", "-tags="+strings.Join(tags, ","), "-o", bin, ".")
	cmd.Dir = env.root
	if out, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("building the operator (tags %v): %w\n%s", tags, err, out)
	}
	return bin, nil
}

// Cluster is the package's control plane.
func Cluster() *localcluster.Cluster { return env.cluster }

// Kube is an admin client of the package's control plane.
func Kube() kubernetes.Interface { return env.kube }

// Memcacheds is an admin client of the package's control plane for the
// operator's own API.
func Memcacheds() clientset.Interface { return env.mc }

// Unthrottled returns admin clients without a client-side rate limit, for
// tests that drive the cluster harder than the default 5 QPS allows.
func Unthrottled() (kubernetes.Interface, clientset.Interface) {
	cfg := rest.CopyConfig(env.cluster.Config)
	cfg.QPS, cfg.Burst = -1, 0
	return kubernetes.NewForConfigOrDie(cfg), clientset.NewForConfigOrDie(cfg)
}

// Binary is the path of the race-built operator binary the package runs:
// the one BinaryEnv names, or the one it built.
func Binary() string { return env.binary }

// OperatorKubeconfig authenticates as the operator's ServiceAccount.
func OperatorKubeconfig() string { return env.kubeconfig }

// Path is a path of the repository, given relative to its root.
func Path(rel string) string { return filepath.Join(env.root, rel) }

// RepoRoot finds the repository's root above the working directory.
func RepoRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			if _, err := os.Stat(filepath.Join(dir, "artifacts", "crd")); err == nil {
				return dir, nil
			}
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", fmt.Errorf("no repository root with artifacts/crd above the working directory")
		}
		dir = parent
	}
}
