package localcluster

import (
	"net"
	"testing"
)

// TestFreePortsAvoidTheEphemeralRange checks the property that keeps a
// chosen port from being taken by an outgoing connection: it lies below
// the kernel's ephemeral range, and it can be bound.
func TestFreePortsAvoidTheEphemeralRange(t *testing.T) {
	low := ephemeralLow()
	ports, err := FreePorts(20)
	if err != nil {
		t.Fatal(err)
	}
	seen := map[int]bool{}
	for _, port := range ports {
		if seen[port] {
			t.Errorf("port %d returned twice", port)
		}
		seen[port] = true
		if port < lowestPort || port >= low {
			t.Errorf("port %d outside [%d, %d)", port, lowestPort, low)
		}
		l, err := net.Listen("tcp", hostPort(port))
		if err != nil {
			t.Errorf("port %d cannot be bound: %v", port, err)
			continue
		}
		_ = l.Close()
	}
}
