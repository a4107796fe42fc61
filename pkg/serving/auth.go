package serving

import (
	"context"
	"crypto/sha256"
	"errors"
	"net/http"
	"strings"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	utilcache "k8s.io/apimachinery/pkg/util/cache"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
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
//
// Anyone who can reach the port can make the operator send a TokenReview,
// one per token it has not seen, and random tokens never repeat. So what
// one request may cost the apiserver is bounded three times: reviews run
// in two lanes of a few slots each, the client that sends them has its
// own rate limit (ReviewQPS, ReviewBurst), and verdicts are cached, the
// allowed apart from the denied.
const (
	// reviewTimeout bounds each TokenReview and SubjectAccessReview.
	reviewTimeout = 10 * time.Second
	// reviewCacheTTL is how long a verdict, allowed or denied, is reused,
	// so that a scrape every few seconds does not cost two API calls each
	// and a client that repeats a bad token costs one review per TTL. The
	// apiserver's delegating authenticator and authorizer default to the
	// same 10s, for both answers.
	reviewCacheTTL = 10 * time.Second
	// allowedCacheSize bounds the allowed verdicts kept: a handful of
	// scrapers each read a few paths.
	allowedCacheSize = 1024
	// deniedCacheSize bounds the denied verdicts kept. A flood of random
	// tokens cycles through it; it serves clients that repeat a token,
	// such as a scraper whose token has expired.
	deniedCacheSize = 1024

	// readerTTL is how long a token stays a reader's after its last
	// allowed verdict, to be reviewed again in the reader lane. Projected
	// ServiceAccount tokens live an hour by default.
	readerTTL = time.Hour
	// readerCacheSize bounds the readers' tokens kept.
	readerCacheSize = 256

	// maxReviews is how many reviews of tokens not known as a reader's run
	// at once, and maxReaderReviews how many re-reviews of readers' tokens
	// do. The review client's rate limit, not these, sets how many reviews
	// a second the apiserver gets; the slots bound how many requests wait
	// on that limiter, and so how long a reader's review waits behind
	// others in it: at most maxReviews reviews of two calls each, 0.8s at
	// ReviewQPS.
	maxReviews       = 8
	maxReaderReviews = 2
	// slotWait is how long a request waits for a free slot before it is
	// refused: long enough to ride out a few scrapers whose verdicts
	// expire together, short against Prometheus's default 10s scrape
	// timeout.
	slotWait = time.Second
)

// The review client's rate limit: ReviewQPS calls a second after a burst
// of ReviewBurst. A handful of scrapers, each reading a few paths and
// reviewed once per reviewCacheTTL at two calls a verdict, need about 2
// calls a second; a flood gets ReviewQPS, however many clients it has.
// Example: 300 clients sending random tokens back to back
// for 25s cost the apiserver at most 40 + 20 * 25 = 540 TokenReviews,
// where unbounded they cost as many as the operator can forward.
const (
	ReviewQPS   = 20
	ReviewBurst = 40
)

// ReviewConfig returns a copy of cfg for the client that sends the
// reviews, with a rate limiter of its own at ReviewQPS and ReviewBurst,
// whatever --kube-api-qps says: reviews are bounded, and draw on no
// limiter that the Lease renewals or the controller use.
func ReviewConfig(cfg *rest.Config) *rest.Config {
	cfg = rest.CopyConfig(cfg)
	cfg.QPS, cfg.Burst, cfg.RateLimiter = ReviewQPS, ReviewBurst, nil
	return cfg
}

// DelegatedAuth admits a request when the apiserver authenticates its
// bearer token (TokenReview) and authorizes the token's user to get the
// request's path as a non-resource URL (SubjectAccessReview). It answers
// 401 to a request without a valid token, 403 to a user without access,
// 500 when the apiserver cannot be asked (an error is never cached), and
// 429 with Retry-After when every slot of its lane stayed busy for
// slotWait.
//
// Why 429: Prometheus counts any status but 2xx as a failed scrape and
// tries again at the next interval, ignoring Retry-After, so for it the
// code only names the cause in the target's last error; 429 with
// Retry-After is what the apiserver itself answers when its
// priority-and-fairness queues are full, and what client-go-based clients
// wait on and retry.
//
// Reviews run in two lanes. A token that had an allowed verdict within
// readerTTL (a reader's) is reviewed again in a lane of its own, which
// tokens that were never allowed cannot enter: when a flood of random
// tokens fills the other lane, a reader still gets its verdict renewed
// every reviewCacheTTL. And only allowed verdicts go into the cache that
// serves readers, so a flood of denied ones cannot evict them.
type DelegatedAuth struct {
	kube kubernetes.Interface
	// allowed holds 200 verdicts, denied 401 and 403 ones, both by
	// verdictKey; readers holds the token hashes of allowed verdicts.
	allowed, denied, readers *utilcache.LRUExpireCache
	// slots and readerSlots are the two lanes: a review holds a token of
	// one for as long as it runs.
	slots, readerSlots chan struct{}
	// slotWait is how long a request waits for a slot.
	slotWait time.Duration
}

// NewDelegatedAuth returns a DelegatedAuth that asks the apiserver through
// kube, built with ReviewConfig; the caller needs create on tokenreviews
// and subjectaccessreviews.
func NewDelegatedAuth(kube kubernetes.Interface) *DelegatedAuth {
	return &DelegatedAuth{
		kube:        kube,
		allowed:     utilcache.NewLRUExpireCache(allowedCacheSize),
		denied:      utilcache.NewLRUExpireCache(deniedCacheSize),
		readers:     utilcache.NewLRUExpireCache(readerCacheSize),
		slots:       make(chan struct{}, maxReviews),
		readerSlots: make(chan struct{}, maxReaderReviews),
		slotWait:    slotWait,
	}
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
		code, err := a.verdict(r.Context(), token, key)
		switch {
		case errors.Is(err, errNoSlot):
			w.Header().Set("Retry-After", "1")
			http.Error(w, "Too many requests: the operator is reviewing as many tokens as it may; try again", http.StatusTooManyRequests)
			return
		case err != nil && r.Context().Err() != nil:
			// The client has gone while its request waited: nobody reads
			// an answer, and a flood that gives up is no error of ours.
			return
		case err != nil:
			klog.FromContext(r.Context()).Error(err, "Could not review a request", "path", key.path)
			http.Error(w, "Internal error: the apiserver could not review the request", http.StatusInternalServerError)
			return
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

// errNoSlot is verdict's answer when no review slot came free in time.
var errNoSlot = errors.New("no review slot free")

// verdict returns the HTTP status of the verdict on key, from the caches
// or from a review in the token's lane, which it caches. It returns
// errNoSlot if the lane stayed full for slotWait.
func (a *DelegatedAuth) verdict(ctx context.Context, token string, key verdictKey) (int, error) {
	if _, ok := a.allowed.Get(key); ok {
		return http.StatusOK, nil
	}
	if code, ok := a.denied.Get(key); ok {
		return code.(int), nil
	}
	lane := a.slots
	if _, ok := a.readers.Get(key.token); ok {
		lane = a.readerSlots
	}
	timer := time.NewTimer(a.slotWait)
	defer timer.Stop()
	select {
	case lane <- struct{}{}:
		defer func() { <-lane }()
	case <-timer.C:
		return 0, errNoSlot
	case <-ctx.Done():
		return 0, context.Cause(ctx)
	}
	code, err := a.review(ctx, token, key)
	if err != nil {
		return 0, err
	}
	if code == http.StatusOK {
		a.allowed.Add(key, struct{}{}, reviewCacheTTL)
		a.readers.Add(key.token, struct{}{}, readerTTL)
	} else {
		a.denied.Add(key, code, reviewCacheTTL)
	}
	return code, nil
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
