package conversion

import (
	"bytes"
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"math/big"
	"net"
	"slices"
	"time"

	certutil "k8s.io/client-go/util/cert"
	"k8s.io/client-go/util/keyutil"
)

// Keys of the webhook certificate Secret. tls.crt and tls.key are the
// serving pair, as in any kubernetes.io/tls Secret; ca.crt is the bundle
// the apiserver trusts, newest CA first; ca.key signs serving certificates
// with that newest CA.
const (
	keyCACert = "ca.crt"
	keyCAKey  = "ca.key"
)

// authority is a CA that can sign serving certificates.
type authority struct {
	cert *x509.Certificate
	key  crypto.Signer
}

// newAuthority creates a self-signed CA valid from now for validity.
func newAuthority(now time.Time, validity time.Duration) (*authority, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, fmt.Errorf("generating a CA key: %w", err)
	}
	tmpl := &x509.Certificate{
		SerialNumber:          serial(),
		Subject:               pkix.Name{CommonName: fmt.Sprintf("memcached-operator-webhook-ca@%d", now.Unix())},
		NotBefore:             now.Add(-backdate(validity)),
		NotAfter:              now.Add(validity),
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature,
		BasicConstraintsValid: true,
		IsCA:                  true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, key.Public(), key)
	if err != nil {
		return nil, fmt.Errorf("creating the CA certificate: %w", err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		return nil, err
	}
	return &authority{cert: cert, key: key}, nil
}

// issue signs a serving certificate for the names and IPs, valid from now
// for validity but never beyond the CA.
func (a *authority) issue(now time.Time, validity time.Duration, dnsNames []string, ips []net.IP) (certPEM, keyPEM []byte, err error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, nil, fmt.Errorf("generating a serving key: %w", err)
	}
	cn := "memcached-operator-webhook"
	if len(dnsNames) > 0 {
		cn = dnsNames[0]
	}
	tmpl := &x509.Certificate{
		SerialNumber: serial(),
		Subject:      pkix.Name{CommonName: cn},
		NotBefore:    now.Add(-backdate(validity)),
		NotAfter:     minTime(now.Add(validity), a.cert.NotAfter),
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		DNSNames:     dnsNames,
		IPAddresses:  ips,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, a.cert, key.Public(), a.key)
	if err != nil {
		return nil, nil, fmt.Errorf("signing the serving certificate: %w", err)
	}
	keyDER, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		return nil, nil, err
	}
	return pem.EncodeToMemory(&pem.Block{Type: certutil.CertificateBlockType, Bytes: der}),
		pem.EncodeToMemory(&pem.Block{Type: keyutil.ECPrivateKeyBlockType, Bytes: keyDER}), nil
}

func pemCert(cert *x509.Certificate) []byte {
	return pem.EncodeToMemory(&pem.Block{Type: certutil.CertificateBlockType, Bytes: cert.Raw})
}

func (a *authority) keyPEM() ([]byte, error) {
	der, err := x509.MarshalPKCS8PrivateKey(a.key)
	if err != nil {
		return nil, err
	}
	return pem.EncodeToMemory(&pem.Block{Type: keyutil.PrivateKeyBlockType, Bytes: der}), nil
}

// parseAuthority reads the newest CA of a bundle and its key.
func parseAuthority(bundlePEM, keyPEM []byte) (*authority, error) {
	certs, err := certutil.ParseCertsPEM(bundlePEM)
	if err != nil {
		return nil, fmt.Errorf("parsing %s: %w", keyCACert, err)
	}
	key, err := keyutil.ParsePrivateKeyPEM(keyPEM)
	if err != nil {
		return nil, fmt.Errorf("parsing %s: %w", keyCAKey, err)
	}
	signer, ok := key.(crypto.Signer)
	if !ok {
		return nil, errors.New(keyCAKey + " cannot sign")
	}
	if !publicKeysEqual(certs[0].PublicKey, signer.Public()) {
		return nil, errors.New(keyCAKey + " does not belong to the first certificate of " + keyCACert)
	}
	return &authority{cert: certs[0], key: signer}, nil
}

// usableServingCert returns the leaf of certPEM if keyPEM matches it, one
// of the CAs in roots signed it, it covers the names and IPs, and it is
// valid at now; otherwise nil.
func usableServingCert(certPEM, keyPEM []byte, roots []*x509.Certificate, dnsNames []string, ips []net.IP, now time.Time) *x509.Certificate {
	certs, err := certutil.ParseCertsPEM(certPEM)
	if err != nil {
		return nil
	}
	key, err := keyutil.ParsePrivateKeyPEM(keyPEM)
	if err != nil {
		return nil
	}
	signer, ok := key.(crypto.Signer)
	if !ok || !publicKeysEqual(certs[0].PublicKey, signer.Public()) {
		return nil
	}
	leaf := certs[0]
	pool := x509.NewCertPool()
	for _, root := range roots {
		pool.AddCert(root)
	}
	if _, err := leaf.Verify(x509.VerifyOptions{Roots: pool, CurrentTime: now, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}}); err != nil {
		return nil
	}
	if !slices.Equal(leaf.DNSNames, dnsNames) || len(leaf.IPAddresses) != len(ips) {
		return nil
	}
	for i, ip := range ips {
		if !leaf.IPAddresses[i].Equal(ip) {
			return nil
		}
	}
	return leaf
}

// renewAt is when a certificate valid from notBefore to notAfter is due
// for renewal: once two thirds of its life have passed.
func renewAt(cert *x509.Certificate) time.Time {
	return cert.NotBefore.Add(cert.NotAfter.Sub(cert.NotBefore) * 2 / 3)
}

func publicKeysEqual(a, b crypto.PublicKey) bool {
	ka, err := x509.MarshalPKIXPublicKey(a)
	if err != nil {
		return false
	}
	kb, err := x509.MarshalPKIXPublicKey(b)
	if err != nil {
		return false
	}
	return bytes.Equal(ka, kb)
}

func serial() *big.Int {
	n, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 126))
	if err != nil {
		panic(err) // crypto/rand does not fail on Linux.
	}
	return n
}

// backdate is how far before now a certificate starts, to tolerate clock
// skew with the apiserver: a minute, or a tenth of a short validity.
func backdate(validity time.Duration) time.Duration {
	return min(time.Minute, validity/10)
}

func minTime(a, b time.Time) time.Time {
	if a.Before(b) {
		return a
	}
	return b
}
