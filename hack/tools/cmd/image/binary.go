package main

import (
	"bytes"
	"debug/elf"
	"fmt"
	"os"
)

// readBinary reads the operator's binary and checks that it can run in the
// image: a Linux executable for arch, statically linked. The image has no
// dynamic loader and no libc, so a cgo build would start on the build host
// and fail in the container with only "no such file or directory".
func readBinary(path, arch string) ([]byte, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("reading the binary: %w", err)
	}
	f, err := elf.NewFile(bytes.NewReader(data))
	if err != nil {
		return nil, fmt.Errorf("%s is not a Linux executable: %w", path, err)
	}
	want, ok := elfMachine(arch)
	if !ok {
		return nil, fmt.Errorf("architecture %q is not supported", arch)
	}
	if f.Machine != want {
		return nil, fmt.Errorf("%s is built for %s, want %s (%s)", path, f.Machine, want, arch)
	}
	for _, p := range f.Progs {
		if p.Type == elf.PT_INTERP {
			return nil, fmt.Errorf("%s is dynamically linked; build it with CGO_ENABLED=0", path)
		}
	}
	return data, nil
}

// elfMachine maps a GOARCH to the ELF machine of its binaries, for the
// architectures Kubernetes nodes run.
func elfMachine(arch string) (elf.Machine, bool) {
	switch arch {
	case "amd64":
		return elf.EM_X86_64, true
	case "arm64":
		return elf.EM_AARCH64, true
	case "ppc64le":
		return elf.EM_PPC64, true
	case "s390x":
		return elf.EM_S390, true
	}
	return 0, false
}
