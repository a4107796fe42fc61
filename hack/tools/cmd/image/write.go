package main

import (
	"fmt"
	"os"
	"path/filepath"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
)

// The outputs' names under -out.
const (
	layoutDir   = "oci"
	tarballFile = "memcached-operator.tar"
)

// write stores img under out twice: as an OCI image layout, which crane
// push and skopeo read and which keeps the manifest's digest, and as a
// docker-save tarball for docker load. Each goes to a temporary name first
// and is renamed into place, so a failed build leaves no half-written
// output for a later push or test to pick up.
func write(out string, img v1.Image, m meta) error {
	tag, err := m.tag()
	if err != nil {
		return err
	}
	if err := os.MkdirAll(out, 0o755); err != nil {
		return fmt.Errorf("creating %s: %w", out, err)
	}

	dir := filepath.Join(out, layoutDir)
	tmpDir := dir + ".tmp"
	if err := os.RemoveAll(tmpDir); err != nil {
		return fmt.Errorf("removing %s: %w", tmpDir, err)
	}
	p, err := layout.Write(tmpDir, empty.Index)
	if err != nil {
		return fmt.Errorf("creating the OCI layout: %w", err)
	}
	// ref.name is the tag by the image-spec's convention for layouts.
	err = p.AppendImage(img,
		layout.WithAnnotations(map[string]string{"org.opencontainers.image.ref.name": m.version}),
		layout.WithPlatform(v1.Platform{OS: "linux", Architecture: m.arch}))
	if err != nil {
		return fmt.Errorf("writing the OCI layout: %w", err)
	}
	if err := os.RemoveAll(dir); err != nil {
		return fmt.Errorf("removing the previous %s: %w", dir, err)
	}
	if err := os.Rename(tmpDir, dir); err != nil {
		return fmt.Errorf("moving the OCI layout into place: %w", err)
	}

	file := filepath.Join(out, tarballFile)
	if err := tarball.WriteToFile(file+".tmp", tag, img); err != nil {
		return fmt.Errorf("writing the tarball: %w", err)
	}
	if err := os.Rename(file+".tmp", file); err != nil {
		return fmt.Errorf("moving the tarball into place: %w", err)
	}
	return nil
}
