package memlimit

import (
	"math"
	"runtime/debug"
	"testing"

	"k8s.io/klog/v2/ktesting"
)

func TestSet(t *testing.T) {
	tests := []struct {
		name       string
		goMemLimit string
		container  string
		want       int64
	}{
		{name: "no limit given"},
		{name: "container limit", container: "536870912", want: 483183820},
		{name: "GOMEMLIMIT wins", goMemLimit: "100MiB", container: "536870912"},
		{name: "not a number", container: "512Mi"},
		{name: "zero", container: "0"},
	}
	before := debug.SetMemoryLimit(-1)
	t.Cleanup(func() { debug.SetMemoryLimit(before) })
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			debug.SetMemoryLimit(math.MaxInt64)
			t.Setenv("GOMEMLIMIT", tt.goMemLimit)
			t.Setenv(EnvVar, tt.container)
			logger, _ := ktesting.NewTestContext(t)
			if got := Set(logger); got != tt.want {
				t.Errorf("Set = %d, want %d", got, tt.want)
			}
			want := tt.want
			if want == 0 {
				want = math.MaxInt64
			}
			if got := debug.SetMemoryLimit(-1); got != want {
				t.Errorf("runtime memory limit = %d, want %d", got, want)
			}
		})
	}
}
