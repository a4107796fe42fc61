package main

import (
	"crypto/x509"
	"encoding/pem"
	"os"
	"runtime"
	"testing"
	"time"

	"golang.org/x/crypto/x509roots/fallback/bundle"
)

// TestNewImageIsReproducible builds the image twice from the same binary
// and compares digests: equal inputs must give the same image, and every
// recorded input must change it.
func TestNewImageIsReproducible(t *testing.T) {
	base := meta{
		repository: "registry.example/memcached-operator",
		version:    "v0.1.0",
		revision:   "0123456789abcdef0123456789abcdef01234567",
		created:    time.Unix(1767225600, 0).UTC(),
		arch:       "amd64",
	}
	binary := []byte("stands in for the operator; newImage does not run it")
	tests := []struct {
		name   string
		change func(*meta)
		same   bool
	}{
		{name: "equal inputs", change: func(*meta) {}, same: true},
		{name: "another repository, which only the tag holds", change: func(m *meta) { m.repository = "registry.example/other" }, same: true},
		{name: "another version", change: func(m *meta) { m.version = "v0.2.0" }},
		{name: "another revision", change: func(m *meta) { m.revision = "fedcba9876543210fedcba9876543210fedcba98" }},
		{name: "another commit time", change: func(m *meta) { m.created = m.created.Add(time.Second) }},
		{name: "another architecture", change: func(m *meta) { m.arch = "arm64" }},
	}
	digest := func(t *testing.T, m meta) string {
		t.Helper()
		layer, err := layerTarGz(rootfs(binary, caBundle()), m.created)
		if err != nil {
			t.Fatal(err)
		}
		img, err := newImage(m, layer)
		if err != nil {
			t.Fatal(err)
		}
		d, err := img.Digest()
		if err != nil {
			t.Fatal(err)
		}
		return d.String()
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			other := base
			tc.change(&other)
			first, second := digest(t, base), digest(t, other)
			if (first == second) != tc.same {
				t.Errorf("Digests %s and %s; want equal: %t", first, second, tc.same)
			}
		})
	}
}

// TestCABundle checks that the bundle holds every unconstrained root of
// the NSS store and none of the constrained ones.
func TestCABundle(t *testing.T) {
	inBundle := map[string]bool{}
	rest := caBundle()
	for {
		var block *pem.Block
		if block, rest = pem.Decode(rest); block == nil {
			break
		}
		inBundle[string(block.Bytes)] = true
	}
	constrained := 0
	for root := range bundle.Roots() {
		if root.Constraint != nil {
			constrained++
		}
		cert, err := x509.ParseCertificate(root.Certificate)
		if err != nil {
			t.Fatal(err)
		}
		switch in := inBundle[string(root.Certificate)]; {
		case root.Constraint != nil && in:
			t.Errorf("%s is in the bundle without its constraint", cert.Subject)
		case root.Constraint == nil && !in:
			t.Errorf("%s is missing from the bundle", cert.Subject)
		}
	}
	t.Logf("%d roots, %d left out for their constraints", len(inBundle), constrained)
}

// TestReadBinary checks what readBinary rejects; TestBuiltImage shows it
// accepts the operator's binary.
func TestReadBinary(t *testing.T) {
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	text := t.TempDir() + "/text"
	if err := os.WriteFile(text, []byte("#!/bin/sh\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	otherArch := "s390x"
	if runtime.GOARCH == otherArch {
		otherArch = "amd64"
	}
	tests := []struct {
		name string
		path string
		arch string
	}{
		{name: "a script is not an executable", path: text, arch: "amd64"},
		{name: "another architecture's binary", path: self, arch: otherArch},
		{name: "an unsupported architecture", path: self, arch: "mips"},
		{name: "a missing file", path: t.TempDir() + "/missing", arch: "amd64"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if _, err := readBinary(tc.path, tc.arch); err == nil {
				t.Errorf("readBinary(%s, %s) accepted it", tc.path, tc.arch)
			}
		})
	}
}
