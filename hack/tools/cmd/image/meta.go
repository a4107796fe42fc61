package main

import (
	"errors"
	"flag"
	"fmt"
	"runtime"
	"strconv"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
)

// meta is what the image records about its build. make image takes every
// field from git and the Go toolchain, never from the clock, so one commit
// gives one image.
type meta struct {
	repository string    // where the image is pushed, without a tag
	version    string    // the tag: the release the manifests install
	revision   string    // the commit; git rev-parse HEAD
	created    time.Time // the commit time, to the second
	arch       string    // GOARCH the binary was built for; the OS is linux
}

// addFlags registers the flags that fill m. The test registers the same
// ones, so that it expects exactly what make image was given.
func (m *meta) addFlags(fs *flag.FlagSet) {
	fs.StringVar(&m.repository, "repository", "ghcr.io/kubelite/memcached-operator", "Repository of the image's tag; artifacts/deploy/deployment.yaml uses this one.")
	fs.StringVar(&m.version, "version", "", "Version: the tag, and the org.opencontainers.image.version label.")
	fs.StringVar(&m.revision, "revision", "", "Commit the image is built from, for the org.opencontainers.image.revision label.")
	fs.Func("created", "Creation time in seconds since the Unix epoch (the commit time): the config's created field, the label, and every file's mtime.", func(s string) error {
		sec, err := strconv.ParseInt(s, 10, 64)
		if err != nil {
			return fmt.Errorf("not a number of seconds: %w", err)
		}
		m.created = time.Unix(sec, 0).UTC()
		return nil
	})
	fs.StringVar(&m.arch, "arch", runtime.GOARCH, "GOARCH of the binary and the image's platform architecture.")
}

// validate reports every missing field at once.
func (m *meta) validate() error {
	var errs []error
	if m.version == "" {
		errs = append(errs, errors.New("-version is required"))
	}
	if m.revision == "" {
		errs = append(errs, errors.New("-revision is required"))
	}
	if m.created.IsZero() {
		errs = append(errs, errors.New("-created is required"))
	}
	if _, err := m.tag(); err != nil {
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}

// tag is the reference the tarball is tagged with, and what docker load
// names the image.
func (m *meta) tag() (name.Tag, error) {
	t, err := name.NewTag(m.repository + ":" + m.version)
	if err != nil {
		return name.Tag{}, fmt.Errorf("-repository and -version do not make an image reference: %w", err)
	}
	return t, nil
}
