package localcluster

import (
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"time"
)

// pki is the per-run key material: a CA, the apiserver's serving
// certificate, an admin client certificate in system:masters, and the
// service-account signing key pair. Nothing is reused between runs.
type pki struct {
	caFile, caKeyFile                string
	servingCert, servingKey          string
	adminCert, adminKey              string
	saPublicKey, saPrivateKey        string
	caPEM, adminCertPEM, adminKeyPEM []byte
}

func newPKI(dir string) (*pki, error) {
	p := &pki{
		caFile:       filepath.Join(dir, "ca.crt"),
		caKeyFile:    filepath.Join(dir, "ca.key"),
		servingCert:  filepath.Join(dir, "apiserver.crt"),
		servingKey:   filepath.Join(dir, "apiserver.key"),
		adminCert:    filepath.Join(dir, "admin.crt"),
		adminKey:     filepath.Join(dir, "admin.key"),
		saPublicKey:  filepath.Join(dir, "sa.pub"),
		saPrivateKey: filepath.Join(dir, "sa.key"),
	}

	caKey, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		return nil, fmt.Errorf("generating CA key: %w", err)
	}
	now := time.Now()
	caTmpl := &x509.Certificate{
		SerialNumber:          big.NewInt(1),
		Subject:               pkix.Name{CommonName: "memcached-operator-localcluster-ca"},
		NotBefore:             now.Add(-time.Hour),
		NotAfter:              now.Add(24 * time.Hour),
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature | x509.KeyUsageKeyEncipherment,
		BasicConstraintsValid: true,
		IsCA:                  true,
	}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	if err != nil {
		return nil, fmt.Errorf("creating CA certificate: %w", err)
	}
	caCert, err := x509.ParseCertificate(caDER)
	if err != nil {
		return nil, err
	}
	p.caPEM = pemEncode("CERTIFICATE", caDER)
	if err := writeFiles(map[string][]byte{
		p.caFile:    p.caPEM,
		p.caKeyFile: pemEncode("RSA PRIVATE KEY", x509.MarshalPKCS1PrivateKey(caKey)),
	}); err != nil {
		return nil, err
	}

	servingDER, servingKey, err := signLeaf(caCert, caKey, &x509.Certificate{
		SerialNumber: big.NewInt(2),
		Subject:      pkix.Name{CommonName: "kube-apiserver"},
		NotBefore:    now.Add(-time.Hour),
		NotAfter:     now.Add(24 * time.Hour),
		KeyUsage:     x509.KeyUsageDigitalSignature | x509.KeyUsageKeyEncipherment,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		IPAddresses:  []net.IP{net.ParseIP("127.0.0.1"), net.ParseIP("10.0.0.1")},
		DNSNames:     []string{"localhost", "kubernetes", "kubernetes.default", "kubernetes.default.svc"},
	})
	if err != nil {
		return nil, fmt.Errorf("creating serving certificate: %w", err)
	}
	adminDER, adminKey, err := signLeaf(caCert, caKey, &x509.Certificate{
		SerialNumber: big.NewInt(3),
		Subject:      pkix.Name{CommonName: "localcluster-admin", Organization: []string{"system:masters"}},
		NotBefore:    now.Add(-time.Hour),
		NotAfter:     now.Add(24 * time.Hour),
		KeyUsage:     x509.KeyUsageDigitalSignature | x509.KeyUsageKeyEncipherment,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
	})
	if err != nil {
		return nil, fmt.Errorf("creating admin certificate: %w", err)
	}
	saKey, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		return nil, fmt.Errorf("generating service-account key: %w", err)
	}
	saPub, err := x509.MarshalPKIXPublicKey(&saKey.PublicKey)
	if err != nil {
		return nil, err
	}

	p.adminCertPEM = pemEncode("CERTIFICATE", adminDER)
	p.adminKeyPEM = pemEncode("RSA PRIVATE KEY", x509.MarshalPKCS1PrivateKey(adminKey))
	return p, writeFiles(map[string][]byte{
		p.servingCert:  pemEncode("CERTIFICATE", servingDER),
		p.servingKey:   pemEncode("RSA PRIVATE KEY", x509.MarshalPKCS1PrivateKey(servingKey)),
		p.adminCert:    p.adminCertPEM,
		p.adminKey:     p.adminKeyPEM,
		p.saPublicKey:  pemEncode("PUBLIC KEY", saPub),
		p.saPrivateKey: pemEncode("RSA PRIVATE KEY", x509.MarshalPKCS1PrivateKey(saKey)),
	})
}

func signLeaf(ca *x509.Certificate, caKey *rsa.PrivateKey, tmpl *x509.Certificate) ([]byte, *rsa.PrivateKey, error) {
	key, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		return nil, nil, err
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca, &key.PublicKey, caKey)
	return der, key, err
}

func pemEncode(kind string, der []byte) []byte {
	return pem.EncodeToMemory(&pem.Block{Type: kind, Bytes: der})
}

func writeFiles(files map[string][]byte) error {
	for path, data := range files {
		if err := os.WriteFile(path, data, 0o600); err != nil {
			return err
		}
	}
	return nil
}
