package conversion

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/kubelite/memcached-operator/pkg/apis/cache/v1alpha1"
	"github.com/kubelite/memcached-operator/pkg/apis/cache/v1beta1"
)

func alphaRaw(t *testing.T, name string, memoryMB int32) []byte {
	t.Helper()
	raw, err := json.Marshal(&v1alpha1.Memcached{
		TypeMeta:   metav1.TypeMeta{APIVersion: v1alpha1.GroupVersion.String(), Kind: "Memcached"},
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default"},
		Spec:       v1alpha1.MemcachedSpec{MemoryMB: memoryMB},
	})
	if err != nil {
		t.Fatal(err)
	}
	return raw
}

func reviewBody(t *testing.T, desired string, objects ...[]byte) []byte {
	t.Helper()
	req := &apiextensionsv1.ConversionRequest{UID: "review-uid", DesiredAPIVersion: desired}
	for _, raw := range objects {
		req.Objects = append(req.Objects, runtime.RawExtension{Raw: raw})
	}
	body, err := json.Marshal(&apiextensionsv1.ConversionReview{
		TypeMeta: metav1.TypeMeta{APIVersion: reviewAPIVersion, Kind: "ConversionReview"},
		Request:  req,
	})
	if err != nil {
		t.Fatal(err)
	}
	return body
}

func TestHandlerConverts(t *testing.T) {
	beta := v1beta1.GroupVersion.String()
	two := reviewBody(t, beta, alphaRaw(t, "a", 64), alphaRaw(t, "b", 128))
	// The same review with the objects before the desired version, which
	// the apiserver does not send but JSON allows.
	objectsFirst := fmt.Sprintf(`{"kind":"ConversionReview","apiVersion":%q,"request":{"objects":[%s,%s],"uid":"review-uid","desiredAPIVersion":%q}}`,
		reviewAPIVersion, alphaRaw(t, "a", 64), alphaRaw(t, "b", 128), beta)
	wrongKind := reviewBody(t, beta, alphaRaw(t, "a", 64), []byte(`{"apiVersion":"v1","kind":"ConfigMap"}`))

	tests := []struct {
		name        string
		body        []byte
		wantStatus  string
		wantMemory  []string
		wantMessage string
	}{
		{name: "every object converted, in order", body: two, wantStatus: metav1.StatusSuccess, wantMemory: []string{"64Mi", "128Mi"}},
		{name: "objects before the desired version", body: []byte(objectsFirst), wantStatus: metav1.StatusSuccess, wantMemory: []string{"64Mi", "128Mi"}},
		{name: "one bad object fails the review", body: wrongKind, wantStatus: metav1.StatusFailure, wantMessage: `object 1: kind "ConfigMap" is not Memcached`},
		{name: "no objects", body: reviewBody(t, beta), wantStatus: metav1.StatusSuccess},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rec := httptest.NewRecorder()
			Handler().ServeHTTP(rec, httptest.NewRequest(http.MethodPost, Path, bytes.NewReader(tt.body)))
			if rec.Code != http.StatusOK {
				t.Fatalf("status %d: %s", rec.Code, rec.Body)
			}
			var out apiextensionsv1.ConversionReview
			if err := json.Unmarshal(rec.Body.Bytes(), &out); err != nil {
				t.Fatalf("the answer is not JSON: %v\n%s", err, rec.Body)
			}
			if out.APIVersion != reviewAPIVersion || out.Kind != "ConversionReview" || out.Response == nil || out.Response.UID != "review-uid" {
				t.Fatalf("answer %s", rec.Body)
			}
			if got := out.Response.Result; got.Status != tt.wantStatus || got.Message != tt.wantMessage {
				t.Errorf("result %+v, want status %q message %q", got, tt.wantStatus, tt.wantMessage)
			}
			if len(out.Response.ConvertedObjects) != len(tt.wantMemory) {
				t.Fatalf("%d converted objects, want %d", len(out.Response.ConvertedObjects), len(tt.wantMemory))
			}
			for i, obj := range out.Response.ConvertedObjects {
				var mc v1beta1.Memcached
				if err := json.Unmarshal(obj.Raw, &mc); err != nil {
					t.Fatal(err)
				}
				if mc.APIVersion != beta || mc.Spec.Memory == nil || mc.Spec.Memory.String() != tt.wantMemory[i] {
					t.Errorf("object %d: %s %v, want %s memory %s", i, mc.APIVersion, mc.Spec.Memory, beta, tt.wantMemory[i])
				}
			}
		})
	}
}

// chunked hides a body's length, as a client sending it chunked does.
type chunked struct{ io.Reader }

func TestHandlerRefuses(t *testing.T) {
	valid := reviewBody(t, v1beta1.GroupVersion.String(), alphaRaw(t, "a", 64))
	// large is a well-formed review of more than maxReviewBytes.
	object := `{"apiVersion":"cache.kubelite.io/v1alpha1","kind":"Memcached"}`
	large := []byte(fmt.Sprintf(`{"kind":"ConversionReview","apiVersion":%q,"request":{"uid":"u","desiredAPIVersion":"cache.kubelite.io/v1beta1","objects":[%s%s]}}`,
		reviewAPIVersion, strings.Repeat(object+",", maxReviewBytes/len(object)), object))

	tests := []struct {
		name string
		req  *http.Request
		// heldBy takes this many bytes of the budget first, as reviews in
		// flight would.
		heldBy   int64
		wantCode int
	}{
		{name: "GET", req: httptest.NewRequest(http.MethodGet, Path, nil), wantCode: http.StatusMethodNotAllowed},
		{name: "not JSON", req: httptest.NewRequest(http.MethodPost, Path, strings.NewReader("hello")), wantCode: http.StatusBadRequest},
		{name: "no request", req: httptest.NewRequest(http.MethodPost, Path, strings.NewReader(`{"kind":"ConversionReview"}`)), wantCode: http.StatusBadRequest},
		{name: "declared length over the limit", req: httptest.NewRequest(http.MethodPost, Path, bytes.NewReader(large)), wantCode: http.StatusRequestEntityTooLarge},
		{name: "undeclared length over the limit", req: httptest.NewRequest(http.MethodPost, Path, chunked{bytes.NewReader(large)}), wantCode: http.StatusRequestEntityTooLarge},
		{name: "declared length over what is free", req: httptest.NewRequest(http.MethodPost, Path, bytes.NewReader(valid)), heldBy: inFlightBytes - int64(len(valid)) + 1, wantCode: http.StatusServiceUnavailable},
		{name: "undeclared length over what is free", req: httptest.NewRequest(http.MethodPost, Path, chunked{bytes.NewReader(valid)}), heldBy: inFlightBytes - 10, wantCode: http.StatusServiceUnavailable},
		{name: "room for the body but not its conversion", req: httptest.NewRequest(http.MethodPost, Path, bytes.NewReader(valid)), heldBy: inFlightBytes - int64(len(valid)), wantCode: http.StatusServiceUnavailable},
		{name: "room for the body and its conversion", req: httptest.NewRequest(http.MethodPost, Path, bytes.NewReader(valid)), heldBy: inFlightBytes - 2*int64(len(valid)), wantCode: http.StatusOK},
		{name: "data after the review", req: httptest.NewRequest(http.MethodPost, Path, bytes.NewReader(append(append([]byte{}, valid...), []byte(`{}`)...))), wantCode: http.StatusBadRequest},
		{name: "desiredAPIVersion twice", req: httptest.NewRequest(http.MethodPost, Path, strings.NewReader(`{"request":{"uid":"u","desiredAPIVersion":"cache.kubelite.io/v1beta1","desiredAPIVersion":"cache.kubelite.io/v1alpha1","objects":[]}}`)), wantCode: http.StatusBadRequest},
		{name: "unused values are skipped", req: httptest.NewRequest(http.MethodPost, Path, strings.NewReader(`{"extra":{"a":[1,{"b":null}],"c":"d"},"request":{"uid":"u","more":[[],{}],"desiredAPIVersion":"cache.kubelite.io/v1beta1","objects":[]}}`)), wantCode: http.StatusOK},
		{name: "a null request", req: httptest.NewRequest(http.MethodPost, Path, strings.NewReader(`{"kind":"ConversionReview","request":null}`)), wantCode: http.StatusBadRequest},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			// Bytes held are those of reviews whose bodies have arrived
			// but that are not answered yet.
			held := newBudget(inFlightBytes)
			held.take(tt.heldBy)
			h := handler(held)
			rec := httptest.NewRecorder()
			h.ServeHTTP(rec, tt.req)
			if rec.Code != tt.wantCode {
				t.Errorf("status %d, want %d: %s", rec.Code, tt.wantCode, rec.Body)
			}
			if free := held.free; free != inFlightBytes-tt.heldBy {
				t.Errorf("%d bytes free once answered, want the %d free before", free, inFlightBytes-tt.heldBy)
			}
			if tt.wantCode == http.StatusServiceUnavailable && rec.Header().Get("Retry-After") == "" {
				t.Error("a busy webhook answers without Retry-After")
			}
		})
	}
}
