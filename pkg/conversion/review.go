package conversion

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/klog/v2"

	"github.com/kubelite/memcached-operator/pkg/apis/cache/v1alpha1"
	"github.com/kubelite/memcached-operator/pkg/apis/cache/v1beta1"
)

// Path is where the apiserver sends ConversionReviews.
const Path = "/convert"

// maxReviewBytes bounds a request body. The apiserver converts a whole list
// in one review, so this is far above one object's 1.5 MiB etcd limit.
const maxReviewBytes = 64 << 20

// maxConcurrentReviews bounds the reviews decoded at once. The endpoint
// cannot authenticate the apiserver, so anyone who reaches it could
// otherwise make the operator hold many large bodies at once; the
// apiserver's own reviews wait their turn.
const maxConcurrentReviews = 4

// Handler answers ConversionReviews (apiextensions.k8s.io/v1) for
// Memcacheds between v1alpha1 and v1beta1. A review that cannot be read
// gets 400; an object that cannot be converted fails the whole review with
// a reason, which the apiserver passes on to the client.
func Handler() http.Handler {
	slots := make(chan struct{}, maxConcurrentReviews)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		logger := klog.FromContext(r.Context())
		if r.Method != http.MethodPost {
			http.Error(w, "ConversionReviews are POSTed", http.StatusMethodNotAllowed)
			return
		}
		select {
		case slots <- struct{}{}:
			defer func() { <-slots }()
		case <-r.Context().Done():
			return
		}
		body, err := io.ReadAll(io.LimitReader(r.Body, maxReviewBytes+1))
		if err != nil || len(body) > maxReviewBytes {
			http.Error(w, "cannot read the request body", http.StatusBadRequest)
			return
		}
		var review apiextensionsv1.ConversionReview
		if err := json.Unmarshal(body, &review); err != nil || review.Request == nil {
			http.Error(w, fmt.Sprintf("not a ConversionReview: %v", err), http.StatusBadRequest)
			return
		}
		review.Response = convertReview(review.Request)
		review.Request = nil
		if review.Response.Result.Status != metav1.StatusSuccess {
			logger.Info("Refused a conversion", "uid", review.Response.UID, "reason", review.Response.Result.Message)
		}
		w.Header().Set("Content-Type", "application/json")
		if err := json.NewEncoder(w).Encode(&review); err != nil {
			logger.Error(err, "Writing a ConversionReview response")
		}
	})
}

// convertReview converts every object of req, or none.
func convertReview(req *apiextensionsv1.ConversionRequest) *apiextensionsv1.ConversionResponse {
	resp := &apiextensionsv1.ConversionResponse{UID: req.UID}
	converted := make([]runtime.RawExtension, 0, len(req.Objects))
	for i, obj := range req.Objects {
		out, err := convert(obj.Raw, req.DesiredAPIVersion)
		if err != nil {
			resp.Result = metav1.Status{Status: metav1.StatusFailure, Message: fmt.Sprintf("object %d: %v", i, err)}
			return resp
		}
		converted = append(converted, runtime.RawExtension{Raw: out})
	}
	resp.ConvertedObjects = converted
	resp.Result = metav1.Status{Status: metav1.StatusSuccess}
	return resp
}

// convert returns raw, a Memcached in JSON, as desiredAPIVersion.
func convert(raw []byte, desiredAPIVersion string) ([]byte, error) {
	var meta metav1.TypeMeta
	if err := json.Unmarshal(raw, &meta); err != nil {
		return nil, fmt.Errorf("reading apiVersion and kind: %w", err)
	}
	if meta.Kind != "Memcached" {
		return nil, fmt.Errorf("kind %q is not Memcached", meta.Kind)
	}
	from, to := meta.APIVersion, desiredAPIVersion
	alpha, beta := v1alpha1.GroupVersion.String(), v1beta1.GroupVersion.String()
	switch {
	case from == to && (from == alpha || from == beta):
		return raw, nil
	case from == alpha && to == beta:
		var in v1alpha1.Memcached
		if err := json.Unmarshal(raw, &in); err != nil {
			return nil, fmt.Errorf("decoding %s: %w", from, err)
		}
		var out v1beta1.Memcached
		if err := in.ConvertTo(&out); err != nil {
			return nil, err
		}
		return json.Marshal(&out)
	case from == beta && to == alpha:
		var in v1beta1.Memcached
		if err := json.Unmarshal(raw, &in); err != nil {
			return nil, fmt.Errorf("decoding %s: %w", from, err)
		}
		var out v1alpha1.Memcached
		if err := out.ConvertFrom(&in); err != nil {
			return nil, err
		}
		return json.Marshal(&out)
	default:
		return nil, fmt.Errorf("cannot convert %s to %s", from, to)
	}
}
