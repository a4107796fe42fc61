package serving

import (
	"context"
	"crypto/sha256"
	"net/http"
	"strings"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	utilcache "k8s.io/apimachinery/pkg/util/cache"
	"k8s.io/client-go/kubernetes"
	"k8s.io/klog/v2"
)

// Delegated authentication and authorization, as kube-controller-manager
// and kube-scheduler apply to their /metrics: the apiserver judges every
// request. The apiserver's own implementation (k8s.io/apiserver's
// authenticatorfactory and authorizerfactory) is not used because it
// links gRPC, OpenTelemetry and CEL into the operator: measured, the
// binary grew from 47 to 66 MB and its idle RSS by 16 MiB, against a
// 256 MiB limit that N = 10,000 already fills to 246 MiB. The protocol is
// two API calls, written out below.
const (
	// reviewTimeout bounds each TokenReview and SubjectAccessReview.
	reviewTimeout = 10 * time.Second
	// reviewCacheTTL is how long a verdict is reused, so that a scrape
	// every few seconds does not cost two API calls each. The apiserver's
	// delegating authenticator and authorizer default to the same 10s.
	reviewCacheTTL = 10 * time.Second
	// reviewCacheSize bounds the verdicts kept: a handful of scrapers
	// each read a few paths.
	reviewCacheSize = 1024
)

// DelegatedAuth admits a request when the apiserver authenticates its
// bearer token (TokenReview) and authorizes the token's user to get the
// request's path as a non-resource URL (SubjectAccessReview). It answers
// 401 to a request without a valid token, 403 to a user without access,
// and 500 when the apiserver cannot be asked; an error is never cached.
type DelegatedAuth struct {
	kube     kubernetes.Interface
	verdicts *utilcache.LRUExpireCache
}

// NewDelegatedAuth returns a DelegatedAuth that asks the apiserver through
// kube; the caller needs create on tokenreviews and subjectaccessreviews.
func NewDelegatedAuth(kube kubernetes.Interface) *DelegatedAuth {
	return &DelegatedAuth{kube: kube, verdicts: utilcache.NewLRUExpireCache(reviewCacheSize)}
}

// verdictKey identifies a token and a request without keeping the token
// itself in memory longer than the request.
type verdictKey struct {
	token      [sha256.Size]byte
	verb, path string
}

// Wrap guards h.
func (a *DelegatedAuth) Wrap(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		token, ok := bearerToken(r)
		if !ok {
			http.Error(w, "Unauthorized: a bearer token is required", http.StatusUnauthorized)
			return
		}
		key := verdictKey{token: sha256.Sum256([]byte(token)), verb: verbOf(r), path: r.URL.Path}
		code, ok := a.verdicts.Get(key)
		if !ok {
			var err error
			if code, err = a.review(r.Context(), token, key); err != nil {
				klog.FromContext(r.Context()).Error(err, "Could not review a request", "path", key.path)
				http.Error(w, "Internal error: the apiserver could not review the request", http.StatusInternalServerError)
				return
			}
			a.verdicts.Add(key, code, reviewCacheTTL)
		}
		switch code {
		case http.StatusOK:
			h.ServeHTTP(w, r)
		case http.StatusUnauthorized:
			http.Error(w, "Unauthorized: the apiserver did not accept the token", http.StatusUnauthorized)
		default:
			http.Error(w, "Forbidden: the token's user may not "+key.verb+" "+key.path, http.StatusForbidden)
		}
	})
}

// review asks the apiserver who the token belongs to and whether that user
// may do what key describes, and returns the HTTP status of the verdict.
func (a *DelegatedAuth) review(ctx context.Context, token string, key verdictKey) (int, error) {
	ctx, cancel := context.WithTimeout(ctx, reviewTimeout)
	defer cancel()
	tr, err := a.kube.AuthenticationV1().TokenReviews().Create(ctx, &authenticationv1.TokenReview{
		Spec: authenticationv1.TokenReviewSpec{Token: token},
	}, metav1.CreateOptions{})
	if err != nil {
		return 0, err
	}
	if !tr.Status.Authenticated {
		return http.StatusUnauthorized, nil
	}
	user := tr.Status.User
	extra := make(map[string]authorizationv1.ExtraValue, len(user.Extra))
	for k, v := range user.Extra {
		extra[k] = authorizationv1.ExtraValue(v)
	}
	sar, err := a.kube.AuthorizationV1().SubjectAccessReviews().Create(ctx, &authorizationv1.SubjectAccessReview{
		Spec: authorizationv1.SubjectAccessReviewSpec{
			User:                  user.Username,
			UID:                   user.UID,
			Groups:                user.Groups,
			Extra:                 extra,
			NonResourceAttributes: &authorizationv1.NonResourceAttributes{Path: key.path, Verb: key.verb},
		},
	}, metav1.CreateOptions{})
	if err != nil {
		return 0, err
	}
	if !sar.Status.Allowed || sar.Status.Denied {
		return http.StatusForbidden, nil
	}
	return http.StatusOK, nil
}

// bearerToken returns the token of an "Authorization: Bearer" header.
func bearerToken(r *http.Request) (string, bool) {
	scheme, token, ok := strings.Cut(r.Header.Get("Authorization"), " ")
	if !ok || !strings.EqualFold(scheme, "Bearer") {
		return "", false
	}
	token = strings.TrimSpace(token)
	return token, token != ""
}

// verbOf maps the HTTP method to the verb RBAC checks for a non-resource
// URL, as the apiserver does: GET and HEAD are "get", POST "create" and so
// on.
func verbOf(r *http.Request) string {
	switch r.Method {
	case http.MethodGet, http.MethodHead:
		return "get"
	case http.MethodPost:
		return "create"
	case http.MethodPut:
		return "update"
	case http.MethodPatch:
		return "patch"
	case http.MethodDelete:
		return "delete"
	default:
		return strings.ToLower(r.Method)
	}
}
