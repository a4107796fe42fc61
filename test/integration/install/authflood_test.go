//go:build integration

package install

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/tls"
	"encoding/base64"
	"fmt"
	"io"
	"net/http"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/utils/ptr"

	"github.com/kubelite/memcached-operator/pkg/metrics/scrape"
	"github.com/kubelite/memcached-operator/pkg/serving"

	"github.com/kubelite/memcached-operator/test/integration/framework"
)

// The flood of TestIntegrationMetricsTokenFlood: a few hundred clients,
// each sending random bearer tokens back to back, for longer than two
// verdict lifetimes of the authorized scraper, so that its verdict has to
// be renewed in the middle of the flood. (A thousand clients overload the
// 2-core machine itself, whatever the operator does: docs/operations.md.)
const (
	floodClients  = 300
	floodDuration = 25 * time.Second
)

// TestIntegrationMetricsTokenFlood floods the leader's secure /metrics
// with random bearer tokens, each of which the operator can only judge by
// asking the apiserver. Meanwhile the leader must keep its Lease (same
// holder, renewed after the flood, no exit), an authorized scraper must
// keep getting 200, and the TokenReviews that reach the apiserver must
// stay within the operator's client-side bound. The lease timings are
// short so that renewals pushed past the deadline show within the flood:
// a leader that cannot renew for its renew deadline gives up the Lease
// and exits. It logs the longest gap between renewals, and how long the
// ServiceAccounts' requests waited in the apiserver's queues.
//
// The operator is the release build (framework.ReleaseBinary): whether it
// keeps up with the flood is a matter of its CPU, and the race detector's
// slowdown, several times over on every TLS handshake, is no part of what
// users run. Under it, on 2 cores with one kept busy (make test-flakes)
// and other tests beside, the leader once failed to renew within its 4 s
// deadline.
//
// It does not run in parallel: the flood takes the machine's cores, and
// the TokenReviews it counts are the apiserver's, which other tests' secure
// scrapes would add to.
func TestIntegrationMetricsTokenFlood(t *testing.T) {
	const (
		leaseNamespace = framework.OperatorNamespace
		leaseDuration  = 6 * time.Second
	)
	ns := framework.NewNamespace(t)
	leaseName := leaseFor(t, ns)
	op := framework.StartOperatorBinary(t, framework.ReleaseBinary(t), ns, "--leader-elect=true", "--metrics-secure=true",
		"--leader-election-namespace="+leaseNamespace, "--leader-election-id="+leaseName,
		"--leader-elect-lease-duration="+leaseDuration.String(), "--leader-elect-renew-deadline=4s", "--leader-elect-retry-period=1s")
	leases := framework.Kube().CoordinationV1().Leases(leaseNamespace)

	var holder string
	framework.Eventually(t, framework.WaitLong, "the operator holds the Lease", func(ctx context.Context) (bool, string) {
		lease, err := leases.Get(ctx, leaseName, metav1.GetOptions{})
		if err != nil {
			return false, err.Error()
		}
		holder = ptr.Deref(lease.Spec.HolderIdentity, "")
		return holder != "", "no holder"
	})
	// The scraper's verdict is cached from here on; the flood must outlive
	// it, so that it is reviewed again under the flood.
	if _, err := op.Metrics(); err != nil {
		t.Fatalf("scrape before the flood: %v", err)
	}

	before := readAPIServerLoad(t)
	ctx, stop := context.WithTimeout(context.Background(), floodDuration)
	defer stop()
	var wg sync.WaitGroup

	counts := &floodCounts{}
	floodTransport := &http.Transport{
		TLSClientConfig:     &tls.Config{InsecureSkipVerify: true}, //nolint:gosec // The operator's generated certificate.
		MaxIdleConnsPerHost: floodClients,
	}
	defer floodTransport.CloseIdleConnections()
	for range floodClients {
		wg.Go(func() { floodWithRandomTokens(ctx, floodTransport, "https://"+op.MetricsAddr+"/metrics", counts) })
	}

	// The scraper, once a second as an impatient Prometheus would.
	var scrapes []string
	scrapesOK := 0
	wg.Go(func() {
		tick := time.NewTicker(time.Second)
		defer tick.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-tick.C:
			}
			start := time.Now()
			_, err := op.Metrics()
			if err == nil {
				scrapesOK++
				continue
			}
			scrapes = append(scrapes, fmt.Sprintf("%s after %s: %v", start.Format("15:04:05.000"), time.Since(start).Round(time.Millisecond), err))
		}
	})

	// Every renewal of the Lease, from a watch through the admin's exempt
	// flow: each one is an update, so the gaps come from the renewTimes
	// the operator wrote, however late the events arrive. The watch runs
	// on until the first renewal after the flood.
	floodEnd := time.Now().Add(floodDuration)
	var leaseProblems []string
	var longestGap time.Duration
	wg.Go(func() {
		lease, err := leases.Get(context.Background(), leaseName, metav1.GetOptions{})
		if err != nil || lease.Spec.RenewTime == nil {
			leaseProblems = append(leaseProblems, fmt.Sprintf("reading the Lease: %v", err))
			return
		}
		rv, last := lease.ResourceVersion, lease.Spec.RenewTime.Time
		watchCtx, stopWatch := context.WithTimeout(context.Background(), floodDuration+leaseDuration)
		defer stopWatch()
		for watchCtx.Err() == nil && !last.After(floodEnd) {
			w, err := leases.Watch(watchCtx, metav1.ListOptions{
				FieldSelector:   fields.OneTermEqualSelector("metadata.name", leaseName).String(),
				ResourceVersion: rv,
			})
			if err != nil {
				time.Sleep(100 * time.Millisecond)
				continue
			}
			for ev := range w.ResultChan() {
				lease, ok := ev.Object.(*coordinationv1.Lease)
				if !ok || lease.Spec.RenewTime == nil {
					continue
				}
				rv = lease.ResourceVersion
				if h := ptr.Deref(lease.Spec.HolderIdentity, ""); h != holder {
					leaseProblems = append(leaseProblems, fmt.Sprintf("holder %q, want %q", h, holder))
				}
				renewed := lease.Spec.RenewTime.Time
				longestGap = max(longestGap, renewed.Sub(last))
				last = renewed
				if last.After(floodEnd) {
					w.Stop()
				}
			}
		}
		if !last.After(floodEnd) {
			longestGap = max(longestGap, time.Since(last))
			leaseProblems = append(leaseProblems, "no renewal after the flood")
		}
	})
	wg.Wait()

	load := readAPIServerLoad(t).since(before)
	reviews := load.tokenReviews
	t.Logf("flood of %d clients for %s: %d responses (%s); %.0f TokenReviews reached the apiserver (%.0f/s); ServiceAccount requests waited %.1f ms on average in the apiserver's queues (%.0f requests), %.0f were rejected; the longest gap between Lease renewals was %s; %d of %d scrapes succeeded",
		floodClients, floodDuration, counts.total.Load(), counts, reviews, reviews/floodDuration.Seconds(),
		1000*load.queueWaitSeconds/max(load.queued, 1), load.queued, load.rejected, longestGap.Round(time.Millisecond), scrapesOK, scrapesOK+len(scrapes))

	if !op.Running() {
		t.Fatalf("the operator exited during the flood")
	}
	if len(leaseProblems) > 0 {
		t.Errorf("the leader did not keep its Lease through the flood: %v", leaseProblems)
	}
	if len(scrapes) > 0 {
		t.Errorf("the authorized scraper failed %d of %d scrapes during the flood: %v", len(scrapes), scrapesOK+len(scrapes), scrapes)
	}
	if counts.total.Load() == 0 {
		t.Fatal("the flood got no answer at all; the test proves nothing")
	}
	// What the operator's review client may send in the flood: its burst,
	// then its rate (serving.ReviewQPS, ReviewBurst), with one second of
	// slack for the reviews in flight at either end.
	if bound := reviewBoundFor(floodDuration + time.Second); reviews > bound {
		t.Errorf("%.0f TokenReviews reached the apiserver in %s, want at most %.0f", reviews, floodDuration, bound)
	}
}

// floodCounts counts the flood's answers by status code.
type floodCounts struct {
	total                                    atomic.Int64
	unauthorized, tooMany, unavailable, fail atomic.Int64
	other                                    atomic.Int64
}

func (c *floodCounts) String() string {
	return fmt.Sprintf("401: %d, 429: %d, 503: %d, other: %d, transport errors: %d",
		c.unauthorized.Load(), c.tooMany.Load(), c.unavailable.Load(), c.other.Load(), c.fail.Load())
}

// floodWithRandomTokens GETs url with a fresh random bearer token, back to
// back, until ctx ends.
func floodWithRandomTokens(ctx context.Context, rt http.RoundTripper, url string, counts *floodCounts) {
	client := &http.Client{Transport: rt, Timeout: 10 * time.Second}
	raw := make([]byte, 32)
	for ctx.Err() == nil {
		_, _ = rand.Read(raw)
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
		if err != nil {
			return
		}
		req.Header.Set("Authorization", "Bearer "+base64.RawURLEncoding.EncodeToString(raw))
		resp, err := client.Do(req)
		if err != nil {
			if ctx.Err() == nil {
				counts.total.Add(1)
				counts.fail.Add(1)
				// A refused connection would otherwise spin.
				time.Sleep(10 * time.Millisecond)
			}
			continue
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		_ = resp.Body.Close()
		counts.total.Add(1)
		switch resp.StatusCode {
		case http.StatusUnauthorized:
			counts.unauthorized.Add(1)
		case http.StatusTooManyRequests:
			counts.tooMany.Add(1)
		case http.StatusServiceUnavailable:
			counts.unavailable.Add(1)
		default:
			counts.other.Add(1)
		}
	}
}

// apiServerLoad is what the apiserver's own /metrics count: TokenReviews
// answered, whatever their code, and for the ServiceAccounts' FlowSchema
// the requests that went through its queues, their total wait and the
// requests it rejected.
type apiServerLoad struct {
	tokenReviews, queued, queueWaitSeconds, rejected float64
}

func (l apiServerLoad) since(before apiServerLoad) apiServerLoad {
	return apiServerLoad{
		tokenReviews:     l.tokenReviews - before.tokenReviews,
		queued:           l.queued - before.queued,
		queueWaitSeconds: l.queueWaitSeconds - before.queueWaitSeconds,
		rejected:         l.rejected - before.rejected,
	}
}

// readAPIServerLoad reads the apiserver's counters.
func readAPIServerLoad(t *testing.T) apiServerLoad {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	raw, err := framework.Kube().CoreV1().RESTClient().Get().AbsPath("/metrics").DoRaw(ctx)
	if err != nil {
		t.Fatalf("reading the apiserver's metrics: %v", err)
	}
	m, err := scrape.Parse(bytes.NewReader(raw))
	if err != nil {
		t.Fatalf("parsing the apiserver's metrics: %v", err)
	}
	load := apiServerLoad{
		tokenReviews: m.Sum("apiserver_request_total", map[string]string{"resource": "tokenreviews"}),
		rejected:     m.Sum("apiserver_flowcontrol_rejected_requests_total", map[string]string{"flow_schema": "service-accounts"}),
	}
	if mf, ok := m["apiserver_flowcontrol_request_wait_duration_seconds"]; ok {
		for _, s := range mf.GetMetric() {
			for _, l := range s.GetLabel() {
				if l.GetName() == "flow_schema" && l.GetValue() == "service-accounts" {
					load.queued += float64(s.GetHistogram().GetSampleCount())
					load.queueWaitSeconds += s.GetHistogram().GetSampleSum()
				}
			}
		}
	}
	return load
}

// reviewBoundFor is the most TokenReviews the operator's review client
// lets through in d: its burst, then its rate.
func reviewBoundFor(d time.Duration) float64 {
	return float64(serving.ReviewBurst) + serving.ReviewQPS*d.Seconds()
}

// TestIntegrationLeaseRenewalsFlowSchema installs the shipped FlowSchema
// and checks, from the apiserver's own classification headers, that the
// operator's Lease requests are served at leader-election priority while
// its other requests, the TokenReviews of the metrics listener among
// them, stay in the flow of every ServiceAccount.
func TestIntegrationLeaseRenewalsFlowSchema(t *testing.T) {
	t.Parallel()
	const file = "artifacts/flowcontrol/leader_election_flowschema.yaml"
	ctx := context.Background()
	if err := framework.Cluster().ApplyFiles(ctx, framework.Path(file)); err != nil {
		t.Fatalf("the apiserver refused %s: %v", file, err)
	}
	schemas := framework.Kube().FlowcontrolV1().FlowSchemas()
	t.Cleanup(func() {
		_ = schemas.Delete(context.Background(), "memcached-operator-leader-election", metav1.DeleteOptions{})
	})
	levels := framework.Kube().FlowcontrolV1().PriorityLevelConfigurations()
	uid := func(get func() (metav1.Object, error)) string {
		t.Helper()
		o, err := get()
		if err != nil {
			t.Fatal(err)
		}
		return string(o.GetUID())
	}
	ours := uid(func() (metav1.Object, error) {
		return schemas.Get(ctx, "memcached-operator-leader-election", metav1.GetOptions{})
	})
	leaderElection := uid(func() (metav1.Object, error) { return levels.Get(ctx, "leader-election", metav1.GetOptions{}) })
	serviceAccounts := uid(func() (metav1.Object, error) { return schemas.Get(ctx, "service-accounts", metav1.GetOptions{}) })

	// As the operator's ServiceAccount, recording how the apiserver
	// classified each answer.
	var mu sync.Mutex
	classified := map[string][2]string{}
	cfg, err := clientcmd.BuildConfigFromFlags("", framework.OperatorKubeconfig())
	if err != nil {
		t.Fatal(err)
	}
	cfg.Wrap(func(rt http.RoundTripper) http.RoundTripper {
		return roundTripFunc(func(req *http.Request) (*http.Response, error) {
			resp, err := rt.RoundTrip(req)
			if err == nil {
				mu.Lock()
				classified[req.Method+" "+req.URL.Path] = [2]string{resp.Header.Get("X-Kubernetes-PF-FlowSchema-UID"), resp.Header.Get("X-Kubernetes-PF-PriorityLevel-UID")}
				mu.Unlock()
			}
			return resp, err
		})
	})
	operatorKube := kubernetes.NewForConfigOrDie(cfg)
	const leasePath = "/apis/coordination.k8s.io/v1/namespaces/memcached-operator/leases/flowschema-probe"
	// The apiserver's flow-control configuration follows the FlowSchema
	// through an informer; the GET of the Lease (NotFound is fine) is
	// classified by it once that has caught up.
	framework.Eventually(t, framework.WaitLong, "the operator's Lease GET is classified by the shipped FlowSchema", func(ctx context.Context) (bool, string) {
		_, _ = operatorKube.CoordinationV1().Leases("memcached-operator").Get(ctx, "flowschema-probe", metav1.GetOptions{})
		mu.Lock()
		defer mu.Unlock()
		got := classified["GET "+leasePath]
		return got == [2]string{ours, leaderElection}, fmt.Sprintf("flow schema %q, priority level %q", got[0], got[1])
	})
	_, err = operatorKube.AuthenticationV1().TokenReviews().Create(ctx, &authenticationv1.TokenReview{Spec: authenticationv1.TokenReviewSpec{Token: "not-a-token"}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	defer mu.Unlock()
	if got := classified["POST /apis/authentication.k8s.io/v1/tokenreviews"]; got[0] != serviceAccounts {
		t.Errorf("the TokenReview was classified by flow schema %q, want service-accounts (%q)", got[0], serviceAccounts)
	}
}

// roundTripFunc is an http.RoundTripper from a function.
type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(req *http.Request) (*http.Response, error) { return f(req) }
