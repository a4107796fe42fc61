package serving

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/fake"
	authenticationv1client "k8s.io/client-go/kubernetes/typed/authentication/v1"
	"k8s.io/client-go/rest"
	k8stesting "k8s.io/client-go/testing"
	"k8s.io/client-go/util/flowcontrol"
)

// fakeAPIServer answers TokenReviews and SubjectAccessReviews from two
// tables and records what it was asked.
type fakeAPIServer struct {
	users   map[string]authenticationv1.UserInfo // token -> user
	allowed map[string]bool                      // user + " " + verb + " " + path
	fail    error

	tokenReviews, accessReviews int
	lastAccess                  authorizationv1.SubjectAccessReviewSpec
}

func (f *fakeAPIServer) client() *fake.Clientset {
	c := fake.NewClientset()
	c.PrependReactor("create", "tokenreviews", func(a k8stesting.Action) (bool, runtime.Object, error) {
		f.tokenReviews++
		if f.fail != nil {
			return true, nil, f.fail
		}
		tr := a.(k8stesting.CreateAction).GetObject().(*authenticationv1.TokenReview)
		user, ok := f.users[tr.Spec.Token]
		tr.Status = authenticationv1.TokenReviewStatus{Authenticated: ok, User: user}
		return true, tr, nil
	})
	c.PrependReactor("create", "subjectaccessreviews", func(a k8stesting.Action) (bool, runtime.Object, error) {
		f.accessReviews++
		sar := a.(k8stesting.CreateAction).GetObject().(*authorizationv1.SubjectAccessReview)
		f.lastAccess = sar.Spec
		attrs := sar.Spec.NonResourceAttributes
		sar.Status.Allowed = attrs != nil && f.allowed[sar.Spec.User+" "+attrs.Verb+" "+attrs.Path]
		return true, sar, nil
	})
	return c
}

func TestDelegatedAuth(t *testing.T) {
	reader := authenticationv1.UserInfo{Username: "system:serviceaccount:monitoring:prometheus", Groups: []string{"system:serviceaccounts"}}
	other := authenticationv1.UserInfo{Username: "system:serviceaccount:default:default"}
	tests := []struct {
		name       string
		header     string
		method     string
		path       string
		fail       error
		wantCode   int
		wantServed bool
	}{
		{name: "no token", path: "/metrics", wantCode: http.StatusUnauthorized},
		{name: "basic auth is not a token", header: "Basic dXNlcjpwYXNz", path: "/metrics", wantCode: http.StatusUnauthorized},
		{name: "token the apiserver does not know", header: "Bearer forged", path: "/metrics", wantCode: http.StatusUnauthorized},
		{name: "user without access", header: "Bearer other-token", path: "/metrics", wantCode: http.StatusForbidden},
		{name: "reader on another path", header: "Bearer reader-token", path: "/debug/pprof/", wantCode: http.StatusForbidden},
		{name: "reader with another verb", header: "Bearer reader-token", method: http.MethodPost, path: "/metrics", wantCode: http.StatusForbidden},
		{name: "reader", header: "Bearer reader-token", path: "/metrics", wantCode: http.StatusOK, wantServed: true},
		{name: "scheme is case-insensitive", header: "bearer reader-token", path: "/metrics", wantCode: http.StatusOK, wantServed: true},
		{name: "apiserver unreachable", header: "Bearer reader-token", path: "/metrics", fail: errors.New("connection refused"), wantCode: http.StatusInternalServerError},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			api := &fakeAPIServer{
				users:   map[string]authenticationv1.UserInfo{"reader-token": reader, "other-token": other},
				allowed: map[string]bool{reader.Username + " get /metrics": true},
				fail:    tt.fail,
			}
			served := false
			h := NewDelegatedAuth(api.client()).Wrap(http.HandlerFunc(func(http.ResponseWriter, *http.Request) { served = true }))
			method := tt.method
			if method == "" {
				method = http.MethodGet
			}
			req := httptest.NewRequest(method, tt.path, nil)
			if tt.header != "" {
				req.Header.Set("Authorization", tt.header)
			}
			rec := httptest.NewRecorder()
			h.ServeHTTP(rec, req)
			if rec.Code != tt.wantCode || served != tt.wantServed {
				t.Errorf("code %d served %v, want %d served %v (body %q)", rec.Code, served, tt.wantCode, tt.wantServed, rec.Body.String())
			}
		})
	}
}

// TestDelegatedAuthCachesVerdicts checks that repeated scrapes reuse the
// apiserver's verdict, that the access review names the user, groups, verb
// and path, that a new path is reviewed anew, and that an error is not
// remembered.
func TestDelegatedAuthCachesVerdicts(t *testing.T) {
	reader := authenticationv1.UserInfo{Username: "prometheus", UID: "u-1", Groups: []string{"monitoring"}, Extra: map[string]authenticationv1.ExtraValue{"scopes": {"a"}}}
	api := &fakeAPIServer{
		users:   map[string]authenticationv1.UserInfo{"t": reader},
		allowed: map[string]bool{"prometheus get /metrics": true},
	}
	h := NewDelegatedAuth(api.client()).Wrap(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {}))
	do := func(path string) int {
		req := httptest.NewRequest(http.MethodGet, path, nil)
		req.Header.Set("Authorization", "Bearer t")
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		return rec.Code
	}

	api.fail = errors.New("timeout")
	if code := do("/metrics"); code != http.StatusInternalServerError {
		t.Fatalf("with the apiserver failing: %d, want 500", code)
	}
	api.fail = nil
	for i := range 3 {
		if code := do("/metrics"); code != http.StatusOK {
			t.Fatalf("scrape %d: %d, want 200", i, code)
		}
	}
	if api.tokenReviews != 2 || api.accessReviews != 1 {
		t.Errorf("reviews after a failure and 3 scrapes: %d token, %d access; want 2 and 1", api.tokenReviews, api.accessReviews)
	}
	spec := api.lastAccess
	if spec.User != "prometheus" || spec.UID != "u-1" || len(spec.Groups) != 1 || spec.Groups[0] != "monitoring" ||
		len(spec.Extra["scopes"]) != 1 || spec.NonResourceAttributes == nil ||
		spec.NonResourceAttributes.Verb != "get" || spec.NonResourceAttributes.Path != "/metrics" {
		t.Errorf("SubjectAccessReview spec = %+v", spec)
	}
	if code := do("/debug/pprof/"); code != http.StatusForbidden {
		t.Errorf("another path: %d, want 403", code)
	}
	if api.accessReviews != 2 {
		t.Errorf("access reviews after a new path: %d, want 2", api.accessReviews)
	}
}

// serve sends one GET of path with the bearer token through h and returns
// the recorded answer.
func serve(t *testing.T, h http.Handler, token, path string) *httptest.ResponseRecorder {
	t.Helper()
	req := httptest.NewRequest(http.MethodGet, path, nil)
	req.Header.Set("Authorization", "Bearer "+token)
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	return rec
}

// readerAPIServer knows one reader, allowed to get /metrics, and one
// other user, allowed nothing.
func readerAPIServer() *fakeAPIServer {
	return &fakeAPIServer{
		users: map[string]authenticationv1.UserInfo{
			"reader-token": {Username: "prometheus"},
			"other-token":  {Username: "someone"},
		},
		allowed: map[string]bool{"prometheus get /metrics": true},
	}
}

var okHandler = http.HandlerFunc(func(http.ResponseWriter, *http.Request) {})

// TestDelegatedAuthCachesDeniedVerdicts checks that a token the apiserver
// rejected, or a user it denied, is not reviewed again for every request
// that repeats it, and that the denied verdict is still served.
func TestDelegatedAuthCachesDeniedVerdicts(t *testing.T) {
	tests := []struct {
		name                            string
		token                           string
		wantCode                        int
		wantTokenReviews, wantAccessRvs int
	}{
		{name: "unknown token", token: "forged", wantCode: http.StatusUnauthorized, wantTokenReviews: 1},
		{name: "user without access", token: "other-token", wantCode: http.StatusForbidden, wantTokenReviews: 1, wantAccessRvs: 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			api := readerAPIServer()
			h := NewDelegatedAuth(api.client()).Wrap(okHandler)
			for i := range 5 {
				if rec := serve(t, h, tt.token, "/metrics"); rec.Code != tt.wantCode {
					t.Fatalf("request %d: %d, want %d", i, rec.Code, tt.wantCode)
				}
			}
			if api.tokenReviews != tt.wantTokenReviews || api.accessReviews != tt.wantAccessRvs {
				t.Errorf("5 requests cost %d token and %d access reviews, want %d and %d",
					api.tokenReviews, api.accessReviews, tt.wantTokenReviews, tt.wantAccessRvs)
			}
		})
	}
}

// TestDelegatedAuthFloodKeepsReaders floods the cache with denied
// verdicts, several times its size, and checks that the reader's allowed
// verdict survives: the reader's next scrape costs no review.
func TestDelegatedAuthFloodKeepsReaders(t *testing.T) {
	tests := []struct {
		name  string
		flood func(i int) (token, path string)
	}{
		{name: "random tokens", flood: func(i int) (string, string) { return fmt.Sprintf("random-%d", i), "/metrics" }},
		{name: "a valid token on random paths", flood: func(i int) (string, string) { return "other-token", fmt.Sprintf("/x/%d", i) }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			api := readerAPIServer()
			h := NewDelegatedAuth(api.client()).Wrap(okHandler)
			if rec := serve(t, h, "reader-token", "/metrics"); rec.Code != http.StatusOK {
				t.Fatalf("reader before the flood: %d, want 200", rec.Code)
			}
			for i := range 3 * deniedCacheSize {
				token, path := tt.flood(i)
				if rec := serve(t, h, token, path); rec.Code == http.StatusOK {
					t.Fatalf("flood request %d was served", i)
				}
			}
			before := api.tokenReviews
			if rec := serve(t, h, "reader-token", "/metrics"); rec.Code != http.StatusOK {
				t.Fatalf("reader after the flood: %d, want 200", rec.Code)
			}
			if api.tokenReviews != before {
				t.Errorf("the reader was reviewed again after the flood: its verdict was evicted")
			}
		})
	}
}

// TestDelegatedAuthLanes fills review lanes by hand and checks who still
// gets a review: a reader's token, when only the other lane is full; a
// request that a slot frees up for within the wait; and nobody else, who
// gets 429 with Retry-After without the apiserver being asked.
func TestDelegatedAuthLanes(t *testing.T) {
	tests := []struct {
		name string
		// fillLane and fillReaderLane take every slot of the lane.
		fillLane, fillReaderLane bool
		// freeAfter, if not zero, gives one slot back after this long.
		freeAfter  time.Duration
		token      string
		wantCode   int
		wantReview bool
	}{
		{name: "free lanes", token: "forged", wantCode: http.StatusUnauthorized, wantReview: true},
		{name: "unknown token, lane full", fillLane: true, token: "forged", wantCode: http.StatusTooManyRequests},
		{name: "reader, the other lane full", fillLane: true, token: "reader-token", wantCode: http.StatusOK, wantReview: true},
		{name: "reader, both lanes full", fillLane: true, fillReaderLane: true, token: "reader-token", wantCode: http.StatusTooManyRequests},
		{name: "a slot frees within the wait", fillLane: true, freeAfter: 20 * time.Millisecond, token: "forged", wantCode: http.StatusUnauthorized, wantReview: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			api := readerAPIServer()
			a := NewDelegatedAuth(api.client())
			// A full lane is waited out, so its cases wait briefly; the
			// freed slot must come within the wait however slow the
			// machine, so that case waits far longer than it takes.
			a.slotWait = 200 * time.Millisecond
			if tt.freeAfter > 0 {
				a.slotWait = time.Minute
			}
			h := a.Wrap(okHandler)
			// Make the reader known, then forget its verdict, as after
			// reviewCacheTTL.
			if rec := serve(t, h, "reader-token", "/metrics"); rec.Code != http.StatusOK {
				t.Fatalf("priming the reader: %d, want 200", rec.Code)
			}
			a.allowed.RemoveAll(func(any) bool { return true })
			fill := func(lane chan struct{}) {
				for range cap(lane) {
					lane <- struct{}{}
				}
			}
			if tt.fillLane {
				fill(a.slots)
			}
			if tt.fillReaderLane {
				fill(a.readerSlots)
			}
			if tt.freeAfter > 0 {
				time.AfterFunc(tt.freeAfter, func() { <-a.slots })
			}
			before := api.tokenReviews
			rec := serve(t, h, tt.token, "/metrics")
			if rec.Code != tt.wantCode {
				t.Errorf("code %d, want %d (body %q)", rec.Code, tt.wantCode, rec.Body.String())
			}
			if reviewed := api.tokenReviews > before; reviewed != tt.wantReview {
				t.Errorf("reviewed %v, want %v", reviewed, tt.wantReview)
			}
			if tt.wantCode == http.StatusTooManyRequests && rec.Header().Get("Retry-After") == "" {
				t.Errorf("429 without Retry-After")
			}
		})
	}
}

// gatedClient holds every TokenReview of a token with the prefix "flood-"
// until gate is closed, and counts how many are held at once.
type gatedClient struct {
	*fake.Clientset
	gate           chan struct{}
	inFlight, peak atomic.Int32
}

func (g *gatedClient) AuthenticationV1() authenticationv1client.AuthenticationV1Interface {
	return gatedAuthentication{g.Clientset.AuthenticationV1(), g}
}

type gatedAuthentication struct {
	authenticationv1client.AuthenticationV1Interface
	g *gatedClient
}

func (a gatedAuthentication) TokenReviews() authenticationv1client.TokenReviewInterface {
	return gatedTokenReviews{a.AuthenticationV1Interface.TokenReviews(), a.g}
}

type gatedTokenReviews struct {
	authenticationv1client.TokenReviewInterface
	g *gatedClient
}

func (r gatedTokenReviews) Create(ctx context.Context, tr *authenticationv1.TokenReview, opts metav1.CreateOptions) (*authenticationv1.TokenReview, error) {
	if strings.HasPrefix(tr.Spec.Token, "flood-") {
		n := r.g.inFlight.Add(1)
		defer r.g.inFlight.Add(-1)
		for p := r.g.peak.Load(); n > p && !r.g.peak.CompareAndSwap(p, n); p = r.g.peak.Load() {
		}
		select {
		case <-r.g.gate:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
	return r.TokenReviewInterface.Create(ctx, tr, opts)
}

// TestDelegatedAuthBoundsConcurrentReviews sends many more random tokens
// at once than there are slots, with the apiserver slow to answer them:
// no more than maxReviews TokenReviews may be in flight, the rest are
// refused with 429, and a reader is still served meanwhile.
func TestDelegatedAuthBoundsConcurrentReviews(t *testing.T) {
	api := readerAPIServer()
	g := &gatedClient{Clientset: api.client(), gate: make(chan struct{})}
	a := NewDelegatedAuth(g)
	a.slotWait = 100 * time.Millisecond
	h := a.Wrap(okHandler)
	if rec := serve(t, h, "reader-token", "/metrics"); rec.Code != http.StatusOK {
		t.Fatalf("priming the reader: %d, want 200", rec.Code)
	}
	a.allowed.RemoveAll(func(any) bool { return true })

	const flood = 10 * maxReviews
	codes := make(chan int, flood)
	var wg sync.WaitGroup
	for i := range flood {
		wg.Go(func() { codes <- serve(t, h, fmt.Sprintf("flood-%d", i), "/metrics").Code })
	}
	// The refused ones answer after slotWait; the held ones wait on gate.
	deadline := time.Now().Add(10 * time.Second)
	for len(codes) < flood-maxReviews && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	if rec := serve(t, h, "reader-token", "/metrics"); rec.Code != http.StatusOK {
		t.Errorf("reader during the flood: %d, want 200", rec.Code)
	}
	close(g.gate)
	wg.Wait()
	close(codes)

	got := map[int]int{}
	for c := range codes {
		got[c]++
	}
	want := map[int]int{http.StatusUnauthorized: maxReviews, http.StatusTooManyRequests: flood - maxReviews}
	if !maps.Equal(got, want) {
		t.Errorf("answers by code %v, want %v", got, want)
	}
	if p := g.peak.Load(); p > maxReviews {
		t.Errorf("%d TokenReviews in flight at once, want at most %d", p, maxReviews)
	}
}

// TestReviewConfig checks that the review client gets a rate limiter of
// its own, whatever the operator's client has.
func TestReviewConfig(t *testing.T) {
	tests := []struct {
		name string
		cfg  *rest.Config
	}{
		{name: "no client-side limit", cfg: &rest.Config{QPS: -1}},
		{name: "a generous limit", cfg: &rest.Config{QPS: 500, Burst: 1000, UserAgent: "memcached-operator"}},
		{name: "a shared limiter", cfg: &rest.Config{RateLimiter: flowcontrol.NewTokenBucketRateLimiter(1000, 1000)}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := ReviewConfig(tt.cfg)
			if got.QPS != ReviewQPS || got.Burst != ReviewBurst || got.RateLimiter != nil {
				t.Errorf("QPS %v, burst %d, limiter %v; want %d, %d and a limiter of its own", got.QPS, got.Burst, got.RateLimiter, ReviewQPS, ReviewBurst)
			}
			if got == tt.cfg {
				t.Errorf("ReviewConfig returned the operator's own configuration, not a copy")
			}
		})
	}
}
