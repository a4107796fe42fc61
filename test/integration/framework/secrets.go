package framework

import (
	"context"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// CreateTLSSecret creates a kubernetes.io/tls Secret. The apiserver checks
// only that both keys are there; the bytes stand for a certificate and
// key, which no container reads under kwok. Secrets of different versions
// hold different bytes.
func CreateTLSSecret(t *testing.T, ns, name, version string) {
	t.Helper()
	_, err := env.kube.CoreV1().Secrets(ns).Create(context.Background(), &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Type:       corev1.SecretTypeTLS,
		Data: map[string][]byte{
			corev1.TLSCertKey:       []byte("certificate " + version),
			corev1.TLSPrivateKeyKey: []byte("key " + version),
		},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
}
