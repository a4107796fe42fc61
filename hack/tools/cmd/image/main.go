// Command image assembles the operator's OCI image without Docker: the
// static binary, a CA bundle, passwd and group in one layer on an empty
// base, run as distroless's non-root user 65532. `make image` runs it and
// passes the version, commit and commit time from git, so one commit gives
// one image, byte for byte. It writes an OCI layout (-out/oci) and a
// docker-save tarball (-out/memcached-operator.tar) and prints the image's
// reference by digest.
package main

import (
	"flag"
	"fmt"
	"os"
)

func main() {
	fs := flag.NewFlagSet("image", flag.ExitOnError)
	binary := fs.String("binary", "", "The operator's static Linux binary.")
	out := fs.String("out", "_output/image", "Directory to write the OCI layout and the tarball into.")
	var m meta
	m.addFlags(fs)
	_ = fs.Parse(os.Args[1:]) // ExitOnError: Parse exits on bad flags.

	ref, err := run(*binary, *out, m)
	if err != nil {
		fmt.Fprintf(os.Stderr, "image: %v\n", err)
		os.Exit(1)
	}
	// The reference is the command's output, for people and scripts.
	fmt.Fprintln(os.Stdout, ref)
}

// run builds the image and writes it under out. It returns the tag with
// the manifest's digest: the reference to deploy once the OCI layout is
// pushed.
func run(binFile, out string, m meta) (string, error) {
	if err := m.validate(); err != nil {
		return "", err
	}
	binary, err := readBinary(binFile, m.arch)
	if err != nil {
		return "", err
	}
	layerGz, err := layerTarGz(rootfs(binary, caBundle()), m.created)
	if err != nil {
		return "", err
	}
	img, err := newImage(m, layerGz)
	if err != nil {
		return "", err
	}
	if err := write(out, img, m); err != nil {
		return "", err
	}
	digest, err := img.Digest()
	if err != nil {
		return "", fmt.Errorf("computing the image's digest: %w", err)
	}
	tag, err := m.tag()
	if err != nil {
		return "", err
	}
	return tag.String() + "@" + digest.String(), nil
}
