package main

import (
	"bytes"
	"encoding/pem"

	"golang.org/x/crypto/x509roots/fallback/bundle"
)

// caBundle returns the Mozilla NSS roots that golang.org/x/crypto pins, as
// one PEM file in the form Go's crypto/x509 reads from
// /etc/ssl/certs/ca-certificates.crt. Taking them from a module rather than
// the build host keeps the image reproducible: go.sum fixes the bundle.
//
// A root with a Constraint is left out. Its constraint (today a
// distrust-after date) cannot be written into a PEM file, and trusting the
// root without it would accept certificates that Mozilla no longer trusts;
// leaving it out only rejects certificates it issued before that date.
func caBundle() []byte {
	var buf bytes.Buffer
	for root := range bundle.Roots() {
		if root.Constraint != nil {
			continue
		}
		// Writing a PEM block to a bytes.Buffer cannot fail.
		_ = pem.Encode(&buf, &pem.Block{Type: "CERTIFICATE", Bytes: root.Certificate})
	}
	return buf.Bytes()
}
