package resources

import "testing"

func TestMemoryLimitMiB(t *testing.T) {
	tests := []struct {
		name           string
		memoryMiB      int32
		maxConnections int32
		want           int64
	}{
		{name: "defaults", memoryMiB: 64, maxConnections: 1024, want: 64 + 8 + 16 + 32},
		{name: "docs example", memoryMiB: 1024, maxConnections: 4096, want: 1248},
		{name: "minimums round up", memoryMiB: 16, maxConnections: 1, want: 16 + 2 + 1 + 32},
		{name: "maximums", memoryMiB: 65536, maxConnections: 65536, want: 65536 + 8192 + 1024 + 32},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := MemoryLimitMiB(tt.memoryMiB, tt.maxConnections); got != tt.want {
				t.Errorf("MemoryLimitMiB(%d, %d) = %d, want %d", tt.memoryMiB, tt.maxConnections, got, tt.want)
			}
			if got := MemoryLimitMiB(tt.memoryMiB, tt.maxConnections); got <= int64(tt.memoryMiB) {
				t.Errorf("limit %d MiB does not exceed -m %d", got, tt.memoryMiB)
			}
		})
	}
}
