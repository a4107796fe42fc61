package conversion

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/klog/v2"

	"github.com/kubelite/memcached-operator/pkg/apis/cache/v1alpha1"
	"github.com/kubelite/memcached-operator/pkg/apis/cache/v1beta1"
)

// Path is where the apiserver sends ConversionReviews.
const Path = "/convert"

// writeTimeout bounds how long an answer may take to write. The apiserver
// gives up on a webhook after at most 30 s.
const writeTimeout = 30 * time.Second

// reviewAPIVersion is the only ConversionReview version the CRD asks for
// (conversionReviewVersions).
const reviewAPIVersion = "apiextensions.k8s.io/v1"

// Handler answers ConversionReviews (apiextensions.k8s.io/v1) for
// Memcacheds between v1alpha1 and v1beta1. A review that cannot be read
// gets 400; an object that cannot be converted fails the whole review with
// a reason, which the apiserver passes on to the client.
//
// The endpoint cannot authenticate the apiserver, so anyone who reaches it
// may send it anything. What a review costs is therefore bounded in bytes:
// a body over maxReviewBytes gets 413, and one that would take the bodies
// in flight over inFlightBytes gets 503 with Retry-After. The review is
// read and answered as a stream, each object converted as it is read and
// written out as it was converted, so that the webhook holds the body's
// objects once, converted, beside the one being read and converted, and
// not the body, the decoded review, the converted review and the encoded
// answer at the same time. The budget counts the bytes of the bodies and
// of the converted objects; the heap holds a few times what it counts of
// the one object each review is reading.
func Handler() http.Handler { return handler(newBudget(inFlightBytes)) }

// handler answers reviews, charging their bodies to held.
func handler(held *budget) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodPost {
			http.Error(w, "ConversionReviews are POSTed", http.StatusMethodNotAllowed)
			return
		}
		// A declared length is checked before anything is read; a body
		// without one is charged as it arrives.
		switch {
		case r.ContentLength > maxReviewBytes:
			refuse(w, errReviewTooLarge)
			return
		case r.ContentLength > 0 && !held.fits(r.ContentLength):
			refuse(w, errWebhookBusy)
			return
		}
		body := &chargedReader{r: r.Body, budget: held, limit: maxReviewBytes}
		defer body.release()
		// A caller that does not read the answer would otherwise hold its
		// bytes for as long as it likes: the server has no write timeout,
		// for the sake of pprof on the metrics listener.
		_ = http.NewResponseController(w).SetWriteDeadline(time.Now().Add(writeTimeout))

		review := reviewReader{dec: json.NewDecoder(body), body: body}
		if err := review.read(); err != nil {
			refuse(w, err)
			return
		}
		if review.failure != nil {
			klog.FromContext(r.Context()).Info("Refused a conversion", "uid", review.uid, "reason", review.failure.Error())
		}
		w.Header().Set("Content-Type", "application/json")
		if err := review.writeResponse(w); err != nil {
			klog.FromContext(r.Context()).Error(err, "Writing a ConversionReview response")
		}
	})
}

// refuse answers a review that could not be read, with the status that
// tells its sender whether to send it again.
func refuse(w http.ResponseWriter, err error) {
	switch {
	case errors.Is(err, errReviewTooLarge):
		http.Error(w, fmt.Sprintf("%v: at most %d bytes", err, maxReviewBytes), http.StatusRequestEntityTooLarge)
	case errors.Is(err, errWebhookBusy):
		w.Header().Set("Retry-After", "1")
		http.Error(w, err.Error(), http.StatusServiceUnavailable)
	default:
		http.Error(w, fmt.Sprintf("not a ConversionReview: %v", err), http.StatusBadRequest)
	}
}

// reviewReader reads a ConversionReview token by token and converts each
// object of its request as soon as both it and the desired version have
// been read. The apiserver writes desiredAPIVersion before objects; objects
// that come first wait in pending.
type reviewReader struct {
	dec  *json.Decoder
	body *chargedReader

	uid        types.UID
	desired    string
	sawRequest bool
	pending    []json.RawMessage
	converted  []json.RawMessage
	// failure is the first object that could not be converted; the review
	// is still read to the end, for its UID, but nothing more is converted.
	failure error
}

// read reads the whole review.
func (rr *reviewReader) read() error {
	if err := rr.delim('{'); err != nil {
		return err
	}
	for rr.dec.More() {
		key, err := rr.key()
		if err != nil {
			return err
		}
		if key == "request" {
			err = rr.request()
		} else {
			err = rr.skip()
		}
		if err != nil {
			return err
		}
	}
	if err := rr.delim('}'); err != nil {
		return err
	}
	if _, err := rr.dec.Token(); err != io.EOF {
		return errors.New("data after the review")
	}
	if !rr.sawRequest {
		return errors.New("no request")
	}
	if rr.desired == "" {
		return errors.New("no desiredAPIVersion")
	}
	return nil
}

// request reads the review's request.
func (rr *reviewReader) request() error {
	if null, err := rr.open('{'); null || err != nil {
		return err
	}
	rr.sawRequest = true
	for rr.dec.More() {
		key, err := rr.key()
		if err != nil {
			return err
		}
		switch key {
		case "uid":
			err = rr.dec.Decode(&rr.uid)
		case "desiredAPIVersion":
			if rr.desired != "" {
				return errors.New("desiredAPIVersion given twice")
			}
			if err = rr.dec.Decode(&rr.desired); err == nil {
				pending := rr.pending
				rr.pending = nil
				for _, raw := range pending {
					if err = rr.add(raw); err != nil {
						break
					}
				}
			}
		case "objects":
			err = rr.objects()
		default:
			err = rr.skip()
		}
		if err != nil {
			return err
		}
	}
	return rr.delim('}')
}

// objects reads the request's objects one at a time.
func (rr *reviewReader) objects() error {
	if null, err := rr.open('['); null || err != nil {
		return err
	}
	for rr.dec.More() {
		var raw json.RawMessage
		if err := rr.dec.Decode(&raw); err != nil {
			return err
		}
		if err := rr.add(raw); err != nil {
			return err
		}
	}
	return rr.delim(']')
}

// add converts one object, or keeps it until the desired version is known.
// The converted object is charged in place of the one read.
func (rr *reviewReader) add(raw json.RawMessage) error {
	switch {
	case rr.failure != nil:
	case rr.desired == "":
		rr.pending = append(rr.pending, raw)
	default:
		out, err := convert(raw, rr.desired)
		if err != nil {
			rr.failure = fmt.Errorf("object %d: %w", len(rr.converted), err)
			rr.converted = nil
			return nil
		}
		if err := rr.body.swap(int64(len(raw)), int64(len(out))); err != nil {
			return err
		}
		rr.converted = append(rr.converted, out)
	}
	return nil
}

func (rr *reviewReader) delim(want json.Delim) error {
	null, err := rr.open(want)
	if err == nil && null {
		err = fmt.Errorf("want %q, got null", want)
	}
	return err
}

// open reads the delimiter want, or a null in its place.
func (rr *reviewReader) open(want json.Delim) (null bool, err error) {
	tok, err := rr.dec.Token()
	if err != nil {
		return false, err
	}
	if tok == nil {
		return true, nil
	}
	if d, ok := tok.(json.Delim); !ok || d != want {
		return false, fmt.Errorf("want %q, got %v", want, tok)
	}
	return false, nil
}

func (rr *reviewReader) key() (string, error) {
	tok, err := rr.dec.Token()
	if err != nil {
		return "", err
	}
	key, ok := tok.(string)
	if !ok {
		return "", fmt.Errorf("want a key, got %v", tok)
	}
	return key, nil
}

// skip reads past a value the webhook does not use, token by token, so
// that it is never held whole.
func (rr *reviewReader) skip() error {
	depth := 0
	for {
		tok, err := rr.dec.Token()
		if err != nil {
			return err
		}
		switch tok {
		case json.Delim('{'), json.Delim('['):
			depth++
		case json.Delim('}'), json.Delim(']'):
			depth--
		}
		if depth == 0 {
			return nil
		}
	}
}

// writeResponse writes the ConversionReview answering what was read, each
// converted object as it is, without encoding them again into one buffer.
func (rr *reviewReader) writeResponse(w io.Writer) error {
	result := metav1.Status{Status: metav1.StatusSuccess}
	if rr.failure != nil {
		result = metav1.Status{Status: metav1.StatusFailure, Message: rr.failure.Error()}
	}
	uid, err := json.Marshal(rr.uid)
	if err != nil {
		return err
	}
	status, err := json.Marshal(&result)
	if err != nil {
		return err
	}
	bw := bufio.NewWriter(w)
	fmt.Fprintf(bw, `{"apiVersion":%q,"kind":"ConversionReview","response":{"uid":%s,"result":%s`, reviewAPIVersion, uid, status)
	if rr.failure == nil {
		bw.WriteString(`,"convertedObjects":[`)
		for i, obj := range rr.converted {
			if i > 0 {
				bw.WriteByte(',')
			}
			bw.Write(obj)
		}
		bw.WriteByte(']')
	}
	bw.WriteString("}}\n")
	return bw.Flush()
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
