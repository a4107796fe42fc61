package main

import (
	"errors"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/spf13/pflag"
	"k8s.io/client-go/tools/clientcmd"
	logsapi "k8s.io/component-base/logs/api/v1"

	"github.com/kubelite/memcached-operator/pkg/conversion"
	"github.com/kubelite/memcached-operator/pkg/rollout"
)

// options are the command-line flags.
type options struct {
	kubeconfig   string
	masterURL    string
	workers      int
	qps          float64
	burst        int
	resyncPeriod time.Duration
	// maxRetryDelay caps the per-Memcached backoff (newRateLimiter).
	maxRetryDelay time.Duration
	// maxConcurrentRollouts bounds the Memcacheds rolling at once for a
	// change the operator caused (rollout.Pacer).
	maxConcurrentRollouts int
	// extstoreClaimGrace is how long an extstore claim may be Pending
	// before the status reports it (Controller.stuckClaims).
	extstoreClaimGrace time.Duration
	namespaces         []string

	leaderElect             bool
	leaderElectionNamespace string
	leaderElectionID        string
	leaseDuration           time.Duration
	renewDeadline           time.Duration
	retryPeriod             time.Duration

	metricsBindAddress     string
	metricsSecure          bool
	metricsCertFile        string
	metricsKeyFile         string
	healthProbeBindAddress string
	enableProfiling        bool

	webhookBindAddress  string
	webhookURL          string
	webhookCertDir      string
	webhookNamespace    string
	webhookSecret       string
	webhookService      string
	webhookCAValidity   time.Duration
	webhookCertValidity time.Duration

	shutdownTimeout time.Duration

	logging *logsapi.LoggingConfiguration
}

// serviceAccountNamespaceFile holds the Pod's namespace when running
// in-cluster.
const serviceAccountNamespaceFile = "/var/run/secrets/kubernetes.io/serviceaccount/namespace"

func newOptions() *options {
	o := &options{logging: logsapi.NewLoggingConfiguration()}
	return o
}

// The client-side rate limit defaults: no limit, and the burst a limit
// set with --kube-api-qps alone gets.
const (
	defaultKubeAPIQPS   = -1
	defaultKubeAPIBurst = 400
)

func (o *options) addFlags(fs *pflag.FlagSet) {
	fs.StringVar(&o.kubeconfig, "kubeconfig", "", "Path to a kubeconfig. Defaults to $KUBECONFIG, then to the in-cluster configuration.")
	fs.StringVar(&o.masterURL, "master", "", "The address of the Kubernetes API server. Overrides any value in kubeconfig.")
	fs.IntVar(&o.workers, "workers", 4, "Number of Memcached objects synced in parallel.")
	// No client-side limit by default, as SIG API Machinery advises since
	// API Priority and Fairness: a client limit set the pace of a mass
	// create at 10,000 Memcacheds (1.75 times as long at 200 a second),
	// while --workers already bounds how many requests are in flight and
	// the apiserver's priority and fairness decides how fast they are
	// served (docs/operations.md, "Client rate limit").
	fs.Float64Var(&o.qps, "kube-api-qps", defaultKubeAPIQPS, "Queries per second to the API server. A negative value disables client-side rate limiting, the default.")
	fs.IntVar(&o.burst, "kube-api-burst", defaultKubeAPIBurst, "Burst of queries to the API server above a positive --kube-api-qps.")
	fs.DurationVar(&o.extstoreClaimGrace, "extstore-claim-grace", defaultClaimGrace, "How long the claim of a Pod's extstore volume (spec.extstore) may be Pending before the Memcached reports it, Degraded with reason ExtstoreClaimPending. Raise it for a provisioner that takes longer to make a volume.")
	fs.DurationVar(&o.maxRetryDelay, "max-retry-delay", defaultMaxRetryDelay, "The longest a failing Memcached waits between retries: its backoff doubles from 5ms up to this. It bounds how long a Memcached stays stuck after a cause that raises no event (RBAC, a policy, a webhook) is gone, however many failed together.")
	fs.IntVar(&o.maxConcurrentRollouts, "max-concurrent-rollouts", rollout.DefaultMaxConcurrent, "How many Deployments (one per Memcached, or one per zone pool with spec.zones) may roll their Pods at once for a Pod template the operator renders differently (after an operator upgrade), cluster-wide; every restarted Pod empties its part of a cache. Deployments rolling for a change to their own Memcached's spec, which is applied at once, count towards it. The next starts when one has completed.")
	fs.DurationVar(&o.resyncPeriod, "resync-period", 10*time.Hour, "How often every Memcached is synced again without a change, from the informer cache (no relist). Syncs of converged objects send no writes. 0 disables it.")
	fs.StringSliceVar(&o.namespaces, "namespace", nil, "Watch only these namespaces; repeat the flag or give a comma-separated list. Default: all namespaces.")

	fs.BoolVar(&o.leaderElect, "leader-elect", true, "Elect a leader through a Lease so only one replica reconciles. Defaults to true in-cluster and false when a kubeconfig is given.")
	fs.StringVar(&o.leaderElectionNamespace, "leader-election-namespace", "", "Namespace of the leader-election Lease. Defaults to the Pod's namespace in-cluster, else memcached-operator.")
	fs.StringVar(&o.leaderElectionID, "leader-election-id", "memcached-operator", "Name of the leader-election Lease.")
	fs.DurationVar(&o.leaseDuration, "leader-elect-lease-duration", 15*time.Second, "How long followers wait after the last renewal before taking over.")
	fs.DurationVar(&o.renewDeadline, "leader-elect-renew-deadline", 10*time.Second, "How long the leader keeps trying to renew before it gives up leadership.")
	fs.DurationVar(&o.retryPeriod, "leader-elect-retry-period", 2*time.Second, "How often candidates try to acquire or renew the Lease.")

	fs.StringVar(&o.metricsBindAddress, "metrics-bind-address", ":8443", "Address of the /metrics listener; 0 disables it.")
	fs.BoolVar(&o.metricsSecure, "metrics-secure", true, "Serve /metrics (and pprof) over HTTPS to requests whose bearer token the API server authenticates (TokenReview) and authorizes for the path (SubjectAccessReview). false serves plain HTTP to anyone, for local development only.")
	fs.StringVar(&o.metricsCertFile, "metrics-tls-cert-file", "", "PEM certificate of the secure metrics listener, reloaded when it changes. Default: a self-signed certificate generated in memory at start.")
	fs.StringVar(&o.metricsKeyFile, "metrics-tls-private-key-file", "", "PEM private key matching --metrics-tls-cert-file.")
	fs.StringVar(&o.healthProbeBindAddress, "health-probe-bind-address", ":8081", "Address of the /healthz and /readyz listener; 0 disables it.")
	fs.BoolVar(&o.enableProfiling, "enable-profiling", false, "Serve pprof under /debug/pprof/ on the metrics listener.")
	fs.StringVar(&o.webhookBindAddress, "webhook-bind-address", ":9443", "Address of the CRD conversion webhook listener (HTTPS, "+conversion.Path+"); every replica serves it. 0 disables it on this replica; without any replica serving it, only the storage version of Memcached can be read. Defaults to 0 with --namespace: a namespaced install leaves conversion to the cluster-wide one.")
	fs.StringVar(&o.webhookURL, "webhook-url", "", "Where the apiserver calls the conversion webhook when the operator runs outside the cluster, e.g. https://192.0.2.10:9443/convert. Empty: the in-cluster Service --webhook-service.")
	fs.StringVar(&o.webhookCertDir, "webhook-cert-dir", "", "Serve the conversion webhook with tls.crt and tls.key from this directory (cert-manager), reloaded when they change; the operator then leaves the CRD's conversion settings and CA bundle alone. Empty: the operator keeps its own CA and certificate in --webhook-secret and writes the CA bundle into the CRD.")
	fs.StringVar(&o.webhookNamespace, "webhook-namespace", "", "Namespace of --webhook-secret and --webhook-service. Defaults to the Pod's namespace in-cluster, else memcached-operator.")
	fs.StringVar(&o.webhookSecret, "webhook-secret", "memcached-operator-webhook-cert", "Secret that holds the conversion webhook's CA and serving certificate.")
	fs.StringVar(&o.webhookService, "webhook-service", "memcached-operator-webhook", "Service in front of the conversion webhook, on port 443.")
	fs.DurationVar(&o.webhookCAValidity, "webhook-ca-validity", 10*365*24*time.Hour, "Lifetime of the conversion webhook's self-made CA; a new one is made after two thirds of it.")
	fs.DurationVar(&o.webhookCertValidity, "webhook-cert-validity", 365*24*time.Hour, "Lifetime of the conversion webhook's serving certificate; it is renewed after two thirds of it.")
	fs.DurationVar(&o.shutdownTimeout, "shutdown-timeout", 30*time.Second, "How long in-flight syncs may run after SIGTERM before they are cancelled.")

	logsapi.AddFlags(o.logging, fs)
}

// complete fills in defaults that depend on other flags or the environment.
func (o *options) complete(fs *pflag.FlagSet) {
	if !fs.Changed("leader-elect") {
		o.leaderElect = o.kubeconfig == "" && os.Getenv(clientcmd.RecommendedConfigPathEnvVar) == "" && o.masterURL == ""
	}
	ownNamespace := "memcached-operator"
	if data, err := os.ReadFile(serviceAccountNamespaceFile); err == nil && len(strings.TrimSpace(string(data))) > 0 {
		ownNamespace = strings.TrimSpace(string(data))
	}
	if o.leaderElectionNamespace == "" {
		o.leaderElectionNamespace = ownNamespace
	}
	if o.webhookNamespace == "" {
		o.webhookNamespace = ownNamespace
	}
	var namespaces []string
	for _, ns := range o.namespaces {
		if ns = strings.TrimSpace(ns); ns != "" {
			namespaces = append(namespaces, ns)
		}
	}
	o.namespaces = namespaces
	// A namespaced install leaves conversion to the cluster-wide one
	// (docs/operations.md, "Watching only some namespaces"): its RBAC has
	// no grant on the CRD, so its webhook could only fail and retry.
	if !fs.Changed("webhook-bind-address") && len(o.namespaces) > 0 {
		o.webhookBindAddress = "0"
	}
}

func (o *options) validate() error {
	var errs []error
	if o.workers < 1 {
		errs = append(errs, fmt.Errorf("--workers must be at least 1, got %d", o.workers))
	}
	// client-go reads a QPS of 0 as its own default of 5, which nobody
	// asking for 0 means.
	if o.qps == 0 {
		errs = append(errs, fmt.Errorf("--kube-api-qps must be positive, or negative for no client-side limit, got 0"))
	}
	if o.qps > 0 && o.burst < 1 {
		errs = append(errs, fmt.Errorf("--kube-api-burst must be at least 1, got %d", o.burst))
	}
	if o.extstoreClaimGrace <= 0 {
		errs = append(errs, fmt.Errorf("--extstore-claim-grace must be positive, got %s", o.extstoreClaimGrace))
	}
	if o.maxRetryDelay <= 0 {
		errs = append(errs, fmt.Errorf("--max-retry-delay must be positive, got %s", o.maxRetryDelay))
	}
	if o.maxConcurrentRollouts < 1 {
		errs = append(errs, fmt.Errorf("--max-concurrent-rollouts must be at least 1, got %d", o.maxConcurrentRollouts))
	}
	if o.resyncPeriod < 0 {
		errs = append(errs, fmt.Errorf("--resync-period must not be negative, got %s", o.resyncPeriod))
	}
	if o.shutdownTimeout <= 0 {
		errs = append(errs, fmt.Errorf("--shutdown-timeout must be positive, got %s", o.shutdownTimeout))
	}
	if (o.metricsCertFile == "") != (o.metricsKeyFile == "") {
		errs = append(errs, errors.New("--metrics-tls-cert-file and --metrics-tls-private-key-file must be given together"))
	}
	if !o.metricsSecure && (o.metricsCertFile != "" || o.metricsKeyFile != "") {
		errs = append(errs, errors.New("--metrics-tls-cert-file and --metrics-tls-private-key-file need --metrics-secure"))
	}
	if o.webhookCAValidity < 3*o.webhookCertValidity/2 {
		errs = append(errs, fmt.Errorf("--webhook-ca-validity (%s) must be at least 1.5 times --webhook-cert-validity (%s), so that a new CA is trusted before it signs", o.webhookCAValidity, o.webhookCertValidity))
	}
	if o.webhookCertValidity < 30*time.Second {
		errs = append(errs, fmt.Errorf("--webhook-cert-validity must be at least 30s, got %s", o.webhookCertValidity))
	}
	if o.leaderElect && !(o.leaseDuration > o.renewDeadline && o.renewDeadline > o.retryPeriod && o.retryPeriod > 0) {
		errs = append(errs, fmt.Errorf("leader election needs lease duration (%s) > renew deadline (%s) > retry period (%s) > 0", o.leaseDuration, o.renewDeadline, o.retryPeriod))
	}
	return errors.Join(errs...)
}
