package framework

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"testing"
)

// release is the operator built as make build builds it, once per package.
var release struct {
	once sync.Once
	bin  string
	err  error
}

// ReleaseBinary builds the operator as make build does: static, without
// the race detector. Tests that measure the process, its resident memory
// against the shipped container limit, its heap, or how fast it converges
// many objects, run it: the race detector's shadow memory and its slowdown
// are no part of what users run. Every other test runs Binary, which fails
// a test whose operator raced.
func ReleaseBinary(t *testing.T) string {
	t.Helper()
	release.once.Do(func() {
		dir, err := os.MkdirTemp(env.tmp, "release-")
		if err != nil {
			release.err = err
			return
		}
		release.bin = filepath.Join(dir, "memcached-operator")
		cmd := exec.CommandContext(context.Background(), "go", "build", "-trimpath", "-o", release.bin, ".")
		cmd.Dir = env.root
		cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
		if out, err := cmd.CombinedOutput(); err != nil {
			release.err = fmt.Errorf("building the operator as make build does: %w\n%s", err, out)
		}
	})
	if release.err != nil {
		t.Fatal(release.err)
	}
	return release.bin
}

// PID is the operator's process ID, for reading what the kernel reports of
// it (/proc/PID/status).
func (op *Operator) PID() int { return op.cmd.Process.Pid }
