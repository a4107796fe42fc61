package serving

import (
	"errors"
	"net/http"
	"net/http/httptest"
	"testing"

	authenticationv1 "k8s.io/api/authentication/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
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
