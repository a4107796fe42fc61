package childcache

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/pem"
	"maps"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
)

// The Secret and ConfigMap caches keep no data, but of one key, a CA
// bundle's (the transforms' caBundle), they keep which certificates it
// holds, by fingerprint (under caFingerprintsKey), so that an update that
// takes a CA out of the bundle can be told from the old and the new
// cached object: memcached keeps trusting a CA removed from its bundle
// until it restarts, and the operator says so (RemovedCAs).
//
// Worked example of the bound: a bundle of maxCAs distinct certificates,
// the most the cache knows, is kept as 64 fingerprints of 16 hex digits
// joined by commas, 1,087 bytes, whether ca.crt takes 40 KiB or 1 MiB; one
// of more is kept as unknownCAs, 7 bytes.

// maxCAs bounds how many CA certificates of a bundle the caches know. A
// client CA bundle holds a few: the current CA, and the next one during a
// rotation. One with more, such as a trust-manager Bundle of the public
// CAs (about 140), is kept as unknown: what the operator holds of a
// bundle must not be up to whoever writes it.
const maxCAs = 64

// fingerprintBytes is how much of each certificate's SHA-256 digest the
// caches keep. 8 bytes tell the CAs of one bundle apart (two of 64 share
// them with a chance of about 1 in 10^16), and a user finds them at the
// start of what `openssl x509 -noout -fingerprint -sha256` prints.
const fingerprintBytes = 8

// unknownCAs is what the caches keep of a bundle of more than maxCAs
// distinct certificates. No fingerprint list spells it.
const unknownCAs = "unknown"

// caFingerprints returns what the caches keep of a CA bundle: the
// fingerprint of each distinct certificate of its PEM CERTIFICATE blocks
// (the first fingerprintBytes of the SHA-256 digest of the DER, in hex),
// sorted and joined by commas; "" if it has none, unknownCAs if it has more
// than maxCAs. Other blocks, and text between blocks, are skipped. The DER
// is hashed, not parsed, so a bundle costs one pass over it, and at most
// maxCAs+1 fingerprints in memory while it is read; a block that is no
// certificate counts as one.
func caFingerprints(bundle []byte) string {
	seen := map[string]struct{}{}
	for {
		block, rest := pem.Decode(bundle)
		if block == nil {
			break
		}
		bundle = rest
		if block.Type != "CERTIFICATE" {
			continue
		}
		sum := sha256.Sum256(block.Bytes)
		seen[hex.EncodeToString(sum[:fingerprintBytes])] = struct{}{}
		if len(seen) > maxCAs {
			return unknownCAs
		}
	}
	return strings.Join(slices.Sorted(maps.Keys(seen)), ",")
}

// cachedCAs returns what the Secret or ConfigMap transform kept of the CA
// bundle in obj, and whether it kept any: not for an object it did not
// return, nor when the object has no bundle.
func cachedCAs(obj any) (string, bool) {
	switch o := obj.(type) {
	case *corev1.Secret:
		cas, ok := o.Data[caFingerprintsKey]
		return string(cas), ok && isTrimmed(o)
	case *corev1.ConfigMap:
		cas, ok := o.Data[caFingerprintsKey]
		return cas, ok
	}
	return "", false
}

// CAFingerprints returns the fingerprints of the CA certificates in the
// CA bundle (the transform's caBundle) of a Secret or ConfigMap as its
// informer caches it: each the first 8 bytes of the certificate's SHA-256
// digest, as openssl writes them (AB:CD:...), sorted. known is false when
// the cache does not know them: obj has no bundle, or one of more than 64
// certificates.
func CAFingerprints(obj any) (fingerprints []string, known bool) {
	cas, ok := cachedCAs(obj)
	if !ok || cas == unknownCAs {
		return nil, false
	}
	if cas == "" {
		return nil, true
	}
	for fp := range strings.SplitSeq(cas, ",") {
		var b strings.Builder
		for i := 0; i < len(fp); i += 2 {
			if i > 0 {
				b.WriteByte(':')
			}
			b.WriteString(strings.ToUpper(fp[i : i+2]))
		}
		fingerprints = append(fingerprints, b.String())
	}
	return fingerprints, true
}

// RemovedCAs returns the fingerprints (CAFingerprints) of the CAs that an
// update of a cached Secret or ConfigMap took out of its CA bundle,
// sorted; none if the cache does not know the bundle of either version,
// as when the update removed the bundle's key itself.
func RemovedCAs(oldObj, newObj any) []string {
	before, ok := CAFingerprints(oldObj)
	if !ok {
		return nil
	}
	after, ok := CAFingerprints(newObj)
	if !ok {
		return nil
	}
	var removed []string
	for _, fp := range before {
		if _, found := slices.BinarySearch(after, fp); !found {
			removed = append(removed, fp)
		}
	}
	return removed
}
