package serving

import (
	"testing"
	"time"
)

func TestHealthReady(t *testing.T) {
	now := time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)
	tests := []struct {
		name        string
		synced      bool
		lastContact time.Time
		wantReady   bool
	}{
		{name: "caches not synced", lastContact: now},
		{name: "apiserver never answered", synced: true},
		{name: "apiserver answered recently", synced: true, lastContact: now.Add(-5 * time.Second), wantReady: true},
		{name: "apiserver silent too long", synced: true, lastContact: now.Add(-staleAfter - time.Second)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := NewHealth(nil)
			h.now = func() time.Time { return now }
			h.synced.Store(tt.synced)
			if !tt.lastContact.IsZero() {
				h.lastContact.Store(tt.lastContact.UnixNano())
			}
			if err := h.ready(); (err == nil) != tt.wantReady {
				t.Errorf("ready() = %v, want ready %v", err, tt.wantReady)
			}
		})
	}
}
