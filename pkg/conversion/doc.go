// Package conversion serves the CRD conversion webhook: the apiserver sends
// it Memcacheds in one version and gets them back in another. The
// conversion itself is the API package's (v1alpha1's ConvertTo and
// ConvertFrom); this package speaks the ConversionReview protocol and
// keeps the webhook's certificate and the CRD's conversion settings
// current (Certificates).
package conversion
