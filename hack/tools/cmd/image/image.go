package main

import (
	"bytes"
	"fmt"
	"io"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

// Labels that do not change from one build to the next.
const (
	title       = "memcached-operator"
	description = "Kubernetes operator that runs memcached: a Deployment and a headless Service for each Memcached object."
	source      = "https://github.com/kubelite/memcached-operator"
)

// newImage assembles the image: one layer on an empty base, with OCI media
// types throughout. Its config agrees with the Dockerfile's image, built
// on distroless static nonroot: the same user, entrypoint, working
// directory and environment. The environment is distroless's, constant,
// so nothing of the build host reaches the image.
func newImage(m meta, layerGz []byte) (v1.Image, error) {
	layer, err := tarball.LayerFromOpener(func() (io.ReadCloser, error) {
		return io.NopCloser(bytes.NewReader(layerGz)), nil
	}, tarball.WithMediaType(types.OCILayer))
	if err != nil {
		return nil, fmt.Errorf("reading the layer: %w", err)
	}
	created := v1.Time{Time: m.created}
	img := mutate.MediaType(empty.Image, types.OCIManifestSchema1)
	img = mutate.ConfigMediaType(img, types.OCIConfigJSON)
	img, err = mutate.Append(img, mutate.Addendum{
		Layer: layer,
		History: v1.History{
			Created:   created,
			CreatedBy: "make image",
			Comment:   "the operator, a CA bundle, passwd and group",
		},
	})
	if err != nil {
		return nil, fmt.Errorf("adding the layer: %w", err)
	}
	cf, err := img.ConfigFile()
	if err != nil {
		return nil, fmt.Errorf("reading the config: %w", err)
	}
	cf = cf.DeepCopy()
	cf.Created = created
	cf.OS = "linux"
	cf.Architecture = m.arch
	cf.Config = v1.Config{
		User:       fmt.Sprintf("%d:%d", nonrootUID, nonrootUID),
		Entrypoint: []string{binaryPath},
		WorkingDir: nonrootHome,
		Env: []string{
			"PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
			"SSL_CERT_FILE=" + caBundlePath,
		},
		Labels: map[string]string{
			"org.opencontainers.image.title":       title,
			"org.opencontainers.image.description": description,
			"org.opencontainers.image.source":      source,
			"org.opencontainers.image.version":     m.version,
			"org.opencontainers.image.revision":    m.revision,
			"org.opencontainers.image.created":     m.created.Format(time.RFC3339),
		},
	}
	img, err = mutate.ConfigFile(img, cf)
	if err != nil {
		return nil, fmt.Errorf("setting the config: %w", err)
	}
	return img, nil
}
