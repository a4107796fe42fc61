package localcluster

import (
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"strconv"
	"strings"
)

// Ports are picked below the kernel's ephemeral range. A port the kernel
// hands to bind(":0") is also one it hands to outgoing connections, and a
// control plane makes many of those between the moment a port is chosen and
// the moment its binary binds it (kube-controller-manager starts seconds
// after the apiserver; a restarted apiserver rebinds its old port). CI once
// failed exactly so: kube-controller-manager found its port taken.
const (
	lowestPort           = 10000
	defaultEphemeralLow  = 32768
	ephemeralRangeSysctl = "/proc/sys/net/ipv4/ip_local_port_range"
)

// FreePorts returns n distinct ports on 127.0.0.1 that were free a moment
// ago and that the kernel will not give to an outgoing connection. The
// listeners that prove them free are held until all are chosen.
func FreePorts(n int) ([]int, error) {
	high := ephemeralLow()
	var listeners []net.Listener
	defer func() {
		for _, l := range listeners {
			_ = l.Close()
		}
	}()
	ports := make([]int, 0, n)
	for attempts := 0; len(ports) < n; attempts++ {
		if attempts == 1000 {
			return nil, fmt.Errorf("no free port in [%d, %d) after %d tries", lowestPort, high, attempts)
		}
		addr := "127.0.0.1:0"
		if high > lowestPort {
			addr = hostPort(lowestPort + rand.IntN(high-lowestPort)) //nolint:gosec // Spreading test ports, not a secret.
		}
		l, err := net.Listen("tcp", addr)
		if err != nil {
			continue
		}
		listeners = append(listeners, l)
		ports = append(ports, l.Addr().(*net.TCPAddr).Port)
	}
	return ports, nil
}

// FreePort is FreePorts for one port.
func FreePort() (int, error) {
	ports, err := FreePorts(1)
	if err != nil {
		return 0, err
	}
	return ports[0], nil
}

// ephemeralLow is the first port of the kernel's ephemeral range, or the
// Linux default when the range cannot be read.
func ephemeralLow() int {
	data, err := os.ReadFile(ephemeralRangeSysctl)
	if err != nil {
		return defaultEphemeralLow
	}
	fields := strings.Fields(string(data))
	if len(fields) != 2 {
		return defaultEphemeralLow
	}
	low, err := strconv.Atoi(fields[0])
	if err != nil {
		return defaultEphemeralLow
	}
	return low
}
