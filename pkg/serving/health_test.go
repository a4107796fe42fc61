package serving

import (
	"errors"
	"testing"
	"time"
)

func TestHealthReady(t *testing.T) {
	now := time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)
	noCertificate := &Listener{name: "webhook", serving: func() error { return errors.New("no serving certificate yet") }}
	serving := &Listener{name: "webhook", serving: func() error { return nil }}
	tests := []struct {
		name   string
		synced bool
		// children is whether every cache but the Memcacheds' has synced;
		// synced implies it.
		children    bool
		waited      time.Duration
		lastContact time.Time
		serves      []*Listener
		wantReady   bool
	}{
		{name: "caches not synced", lastContact: now},
		{name: "Memcached caches not synced", children: true, lastContact: now},
		{name: "Memcached caches not synced within the grace", children: true, waited: syncGrace, lastContact: now, wantReady: true},
		{name: "other caches not synced within the grace", waited: syncGrace, lastContact: now},
		{name: "apiserver never answered", synced: true},
		{name: "apiserver answered recently", synced: true, lastContact: now.Add(-5 * time.Second), wantReady: true},
		{name: "apiserver silent too long", synced: true, lastContact: now.Add(-staleAfter - time.Second)},
		{name: "webhook without its certificate", synced: true, lastContact: now, serves: []*Listener{noCertificate}},
		{name: "webhook without its certificate, past the grace", children: true, waited: syncGrace, lastContact: now, serves: []*Listener{noCertificate}},
		{name: "webhook serving", synced: true, lastContact: now, serves: []*Listener{serving}, wantReady: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := NewHealth(nil)
			h.started = now.Add(-tt.waited)
			h.now = func() time.Time { return now }
			h.synced.Store(tt.synced)
			h.childrenSynced.Store(tt.children || tt.synced)
			if !tt.lastContact.IsZero() {
				h.lastContact.Store(tt.lastContact.UnixNano())
			}
			for _, l := range tt.serves {
				h.Serves(l)
			}
			if err := h.ready(); (err == nil) != tt.wantReady {
				t.Errorf("ready() = %v, want ready %v", err, tt.wantReady)
			}
		})
	}
}
