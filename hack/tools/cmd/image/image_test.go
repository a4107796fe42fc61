package main

import (
	"archive/tar"
	"bytes"
	"context"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"flag"
	"go/build"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/google/go-containerregistry/pkg/v1/types"
	"github.com/google/go-containerregistry/pkg/v1/validate"
)

// make test-image passes where make image wrote and the same metadata
// flags the builder got, so TestBuiltImage expects exactly those.
var (
	imageDir = flag.String("image-dir", "", "Directory make image wrote the OCI layout and the tarball into.")
	want     meta
)

func TestMain(m *testing.M) {
	want.addFlags(flag.CommandLine)
	flag.Parse()
	os.Exit(m.Run())
}

// TestBuiltImage checks the image make image wrote: the OCI layout and the
// tarball hold the same image, its config runs the operator as a non-root
// user and says nothing of the build host, its one layer holds exactly the
// files it should, at the paths the Dockerfile's image has them, and the
// binary, taken out of the layer, runs.
func TestBuiltImage(t *testing.T) {
	if *imageDir == "" {
		t.Fatal("-image-dir is not set: run make test-image, which builds the image and passes the flags")
	}
	if err := want.validate(); err != nil {
		t.Fatalf("make test-image passes the builder's flags: %v", err)
	}
	img := layoutImage(t, filepath.Join(*imageDir, layoutDir))
	root := t.TempDir()
	headers := extract(t, img, root)

	t.Run("the tarball holds the same image under its tag", func(t *testing.T) {
		tag, err := want.tag()
		if err != nil {
			t.Fatal(err)
		}
		// ImageFromPath fails unless the tarball's manifest lists the tag.
		tb, err := tarball.ImageFromPath(filepath.Join(*imageDir, tarballFile), &tag)
		if err != nil {
			t.Fatalf("Opening the tarball as %s: %v", tag, err)
		}
		if err := validate.Image(tb); err != nil {
			t.Fatalf("The tarball's image is not valid: %v", err)
		}
		if inTarball, inLayout := rawConfig(t, tb), rawConfig(t, img); !bytes.Equal(inTarball, inLayout) {
			t.Errorf("The tarball's config differs from the layout's:\n%s\n%s", inTarball, inLayout)
		}
		if inTarball, inLayout := layerDigests(t, tb), layerDigests(t, img); !reflect.DeepEqual(inTarball, inLayout) {
			t.Errorf("The tarball's layers are %v, the layout's %v", inTarball, inLayout)
		}
	})

	t.Run("the config runs the operator as nonroot and holds no host paths", func(t *testing.T) {
		cf, err := img.ConfigFile()
		if err != nil {
			t.Fatal(err)
		}
		if cf.OS != "linux" || cf.Architecture != want.arch {
			t.Errorf("Platform %s/%s, want linux/%s", cf.OS, cf.Architecture, want.arch)
		}
		if !cf.Created.Equal(want.created) {
			t.Errorf("Created %s, want the commit time %s", cf.Created.Time, want.created)
		}
		wantConfig := v1.Config{
			User:       "65532:65532",
			Entrypoint: []string{"/memcached-operator"},
			WorkingDir: "/home/nonroot",
			Env: []string{
				"PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
				"SSL_CERT_FILE=/etc/ssl/certs/ca-certificates.crt",
			},
			Labels: map[string]string{
				"org.opencontainers.image.title":       "memcached-operator",
				"org.opencontainers.image.description": description,
				"org.opencontainers.image.source":      "https://github.com/kubelite/memcached-operator",
				"org.opencontainers.image.version":     want.version,
				"org.opencontainers.image.revision":    want.revision,
				"org.opencontainers.image.created":     want.created.Format(time.RFC3339),
			},
		}
		if !reflect.DeepEqual(cf.Config, wantConfig) {
			t.Errorf("Config\n%+v\nwant\n%+v", cf.Config, wantConfig)
		}
		if len(cf.History) != 1 || !cf.History[0].Created.Equal(want.created) {
			t.Errorf("History %+v, want one entry created at the commit time", cf.History)
		}
		raw := rawConfig(t, img)
		for _, p := range hostPaths(t) {
			if bytes.Contains(raw, []byte(p)) {
				t.Errorf("The config holds the host path %s:\n%s", p, raw)
			}
		}
	})

	t.Run("the layer holds the files at the Dockerfile image's paths", func(t *testing.T) {
		wantFiles := []struct {
			name  string
			mode  int64
			owner int
		}{
			{"etc/", 0o755, 0},
			{"etc/group", 0o644, 0},
			{"etc/passwd", 0o644, 0},
			{"etc/ssl/", 0o755, 0},
			{"etc/ssl/certs/", 0o755, 0},
			{"etc/ssl/certs/ca-certificates.crt", 0o644, 0},
			{"home/", 0o755, 0},
			{"home/nonroot/", 0o700, 65532},
			{"memcached-operator", 0o755, 0},
			{"tmp/", 0o1777, 0},
		}
		if len(headers) != len(wantFiles) {
			t.Errorf("The layer has %d entries, want %d", len(headers), len(wantFiles))
		}
		for i, w := range wantFiles {
			if i >= len(headers) {
				t.Errorf("The layer lacks %s", w.name)
				continue
			}
			h := headers[i]
			if h.Name != w.name || h.Mode != w.mode || h.Uid != w.owner || h.Gid != w.owner {
				t.Errorf("Entry %d is %s mode %o owner %d:%d, want %s mode %o owner %d:%d",
					i, h.Name, h.Mode, h.Uid, h.Gid, w.name, w.mode, w.owner, w.owner)
			}
			if !h.ModTime.Equal(want.created) {
				t.Errorf("%s has mtime %s, want the commit time %s", h.Name, h.ModTime, want.created)
			}
		}
	})

	t.Run("passwd and group name the config's user, and its home exists", func(t *testing.T) {
		passwd := readFile(t, root, "etc/passwd")
		if !slices.Contains(strings.Split(passwd, "\n"), "nonroot:x:65532:65532:nonroot:/home/nonroot:/sbin/nologin") {
			t.Errorf("/etc/passwd has no nonroot entry for 65532:65532:\n%s", passwd)
		}
		if group := readFile(t, root, "etc/group"); !slices.Contains(strings.Split(group, "\n"), "nonroot:x:65532:") {
			t.Errorf("/etc/group has no nonroot group 65532:\n%s", group)
		}
		if fi, err := os.Stat(filepath.Join(root, "home/nonroot")); err != nil || !fi.IsDir() {
			t.Errorf("The home directory of nonroot is missing: %v", err)
		}
	})

	t.Run("the CA bundle holds parseable CA certificates", func(t *testing.T) {
		rest := []byte(readFile(t, root, "etc/ssl/certs/ca-certificates.crt"))
		n := 0
		for {
			var block *pem.Block
			if block, rest = pem.Decode(rest); block == nil {
				break
			}
			cert, err := x509.ParseCertificate(block.Bytes)
			if err != nil {
				t.Fatalf("Certificate %d does not parse: %v", n, err)
			}
			if !cert.IsCA {
				t.Errorf("%s is not a CA", cert.Subject)
			}
			n++
		}
		if len(bytes.TrimSpace(rest)) != 0 {
			t.Errorf("The bundle ends in %d bytes that are not PEM", len(rest))
		}
		// The NSS store held 117 server-auth roots in 2026, one of them
		// constrained and left out.
		if n < 100 {
			t.Errorf("The bundle holds %d certificates, want over 100", n)
		}
	})

	t.Run("the binary is static, holds no host paths, and runs", func(t *testing.T) {
		bin := filepath.Join(root, "memcached-operator")
		data, err := readBinary(bin, want.arch)
		if err != nil {
			t.Fatal(err)
		}
		for _, p := range hostPaths(t) {
			if bytes.Contains(data, []byte(p)) {
				t.Errorf("The binary holds the host path %s; is it built with -trimpath?", p)
			}
		}
		if runtime.GOOS != "linux" || runtime.GOARCH != want.arch {
			t.Skipf("A linux/%s binary does not run on %s/%s", want.arch, runtime.GOOS, runtime.GOARCH)
		}
		ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
		defer cancel()
		cmd := exec.CommandContext(ctx, bin, "--help")
		cmd.Dir = filepath.Join(root, "home/nonroot")
		cmd.Env = []string{} // nothing from the test's environment
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("%s --help: %v\n%s", bin, err, out)
		}
		for _, name := range []string{"--leader-elect", "--webhook-bind-address", "--logging-format"} {
			if !bytes.Contains(out, []byte(name)) {
				t.Errorf("--help does not list %s:\n%s", name, out)
			}
		}
	})
}

// layoutImage opens the OCI layout and returns its one image, after
// checking the index entry that tools pick it by: the platform and the tag.
func layoutImage(t *testing.T, dir string) v1.Image {
	t.Helper()
	idx, err := layout.ImageIndexFromPath(dir)
	if err != nil {
		t.Fatalf("Opening the OCI layout: %v", err)
	}
	im, err := idx.IndexManifest()
	if err != nil {
		t.Fatal(err)
	}
	if len(im.Manifests) != 1 {
		t.Fatalf("The layout's index lists %d manifests, want 1", len(im.Manifests))
	}
	d := im.Manifests[0]
	if d.MediaType != types.OCIManifestSchema1 {
		t.Errorf("Manifest media type %s, want %s", d.MediaType, types.OCIManifestSchema1)
	}
	if d.Platform == nil || d.Platform.OS != "linux" || d.Platform.Architecture != want.arch {
		t.Errorf("Index platform %+v, want linux/%s", d.Platform, want.arch)
	}
	if got := d.Annotations["org.opencontainers.image.ref.name"]; got != want.version {
		t.Errorf("Index ref.name %q, want %q", got, want.version)
	}
	img, err := idx.Image(d.Digest)
	if err != nil {
		t.Fatal(err)
	}
	// Every blob must hash to its digest, and the layer to its diff ID.
	if err := validate.Image(img); err != nil {
		t.Fatalf("The OCI layout's image is not valid: %v", err)
	}
	m, err := img.Manifest()
	if err != nil {
		t.Fatal(err)
	}
	if m.Config.MediaType != types.OCIConfigJSON || len(m.Layers) != 1 || m.Layers[0].MediaType != types.OCILayer {
		t.Errorf("Manifest %+v, want an OCI config and one gzip OCI layer", m)
	}
	return img
}

// extract writes the image's one layer under root and returns its tar
// headers in order. Owners are not applied: the test need not run as root.
func extract(t *testing.T, img v1.Image, root string) []*tar.Header {
	t.Helper()
	layers, err := img.Layers()
	if err != nil {
		t.Fatal(err)
	}
	if len(layers) != 1 {
		t.Fatalf("The image has %d layers, want 1", len(layers))
	}
	rc, err := layers[0].Uncompressed()
	if err != nil {
		t.Fatal(err)
	}
	defer rc.Close()
	var headers []*tar.Header
	tr := tar.NewReader(rc)
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return headers
		}
		if err != nil {
			t.Fatalf("Reading the layer: %v", err)
		}
		headers = append(headers, h)
		if !filepath.IsLocal(h.Name) {
			t.Fatalf("The layer's entry %q leaves its root", h.Name)
		}
		path := filepath.Join(root, h.Name)
		switch h.Typeflag {
		case tar.TypeDir:
			err = os.MkdirAll(path, 0o755)
		case tar.TypeReg:
			var data []byte
			if data, err = io.ReadAll(tr); err == nil {
				err = os.WriteFile(path, data, 0o600)
			}
		default:
			t.Fatalf("%s has tar type %q; the layer holds only files and directories", h.Name, h.Typeflag)
		}
		if err == nil {
			err = os.Chmod(path, h.FileInfo().Mode())
		}
		if err != nil {
			t.Fatalf("Extracting %s: %v", h.Name, err)
		}
	}
}

// hostPaths are directories of this machine that must not reach the
// image: the checkout, GOPATH (the module cache) and GOROOT.
func hostPaths(t *testing.T) []string {
	t.Helper()
	checkout, err := filepath.Abs("../../../..")
	if err != nil {
		t.Fatal(err)
	}
	var paths []string
	for _, p := range []string{checkout, build.Default.GOPATH, build.Default.GOROOT} {
		if p != "" {
			paths = append(paths, p)
		}
	}
	return paths
}

func rawConfig(t *testing.T, img v1.Image) []byte {
	t.Helper()
	raw, err := img.RawConfigFile()
	if err != nil {
		t.Fatal(err)
	}
	return raw
}

// layerDigests lists each layer's digest and diff ID.
func layerDigests(t *testing.T, img v1.Image) []v1.Hash {
	t.Helper()
	layers, err := img.Layers()
	if err != nil {
		t.Fatal(err)
	}
	var hashes []v1.Hash
	for _, l := range layers {
		digest, err := l.Digest()
		if err != nil {
			t.Fatal(err)
		}
		diffID, err := l.DiffID()
		if err != nil {
			t.Fatal(err)
		}
		hashes = append(hashes, digest, diffID)
	}
	return hashes
}

func readFile(t *testing.T, root, name string) string {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(root, name))
	if err != nil {
		t.Fatal(err)
	}
	return string(data)
}
