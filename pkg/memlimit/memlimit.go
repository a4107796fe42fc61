package memlimit

import (
	"math"
	"os"
	"runtime/debug"
	"strconv"

	"k8s.io/klog/v2"
)

// EnvVar names the variable that the shipped Deployment fills with
// the container's memory limit, in bytes, through the downward API.
const EnvVar = "MEMORY_LIMIT"

// goMemoryLimitShare is the share of the container's memory limit that the
// Go runtime's soft limit gets. The runtime counts what it maps, which is
// most but not all of the process's resident memory; the rest of the limit
// is headroom for what it does not count before the kernel's OOM killer
// acts on the whole.
const goMemoryLimitShare = 0.9

// Set gives the Go runtime a soft memory limit below the
// container's, so that the garbage collector runs harder as the process
// nears the limit instead of letting the heap grow to twice the live data
// (GOGC=100) and the kernel kill it. GOMEMLIMIT, if set, wins: the runtime
// has applied it already. It returns the limit it set, or 0.
func Set(logger klog.Logger) int64 {
	if os.Getenv("GOMEMLIMIT") != "" {
		return 0
	}
	value := os.Getenv(EnvVar)
	if value == "" {
		return 0
	}
	container, err := strconv.ParseInt(value, 10, 64)
	if err != nil || container <= 0 {
		logger.Info("Ignoring a memory limit that is not a positive number of bytes", "env", EnvVar, "value", value)
		return 0
	}
	limit := int64(math.Floor(float64(container) * goMemoryLimitShare))
	debug.SetMemoryLimit(limit)
	logger.Info("Set the Go memory limit from the container's", "containerLimitBytes", container, "goMemoryLimitBytes", limit)
	return limit
}
