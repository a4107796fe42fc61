package resources

import "testing"

func TestMemoryLimitMiB(t *testing.T) {
	tests := []struct {
		name           string
		memoryMB       int32
		maxConnections int32
		want           int64
	}{
		{name: "defaults", memoryMB: 64, maxConnections: 1024, want: 64 + 8 + 16 + 32},
		{name: "docs example", memoryMB: 1024, maxConnections: 4096, want: 1248},
		{name: "minimums round up", memoryMB: 16, maxConnections: 1, want: 16 + 2 + 1 + 32},
		{name: "maximums", memoryMB: 65536, maxConnections: 65536, want: 65536 + 8192 + 1024 + 32},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := MemoryLimitMiB(tt.memoryMB, tt.maxConnections); got != tt.want {
				t.Errorf("MemoryLimitMiB(%d, %d) = %d, want %d", tt.memoryMB, tt.maxConnections, got, tt.want)
			}
			if got := MemoryLimitMiB(tt.memoryMB, tt.maxConnections); got <= int64(tt.memoryMB) {
				t.Errorf("limit %d MiB does not exceed -m %d", got, tt.memoryMB)
			}
		})
	}
}
