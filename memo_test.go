package main

import (
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	clocktesting "k8s.io/utils/clock/testing"

	cachev1alpha1 "github.com/kubelite/memcached-operator/pkg/apis/cache/v1alpha1"
)

func TestMemoGenerationClock(t *testing.T) {
	clk := clocktesting.NewFakeClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	m := newMemo(clk)
	mc := &cachev1alpha1.Memcached{ObjectMeta: metav1.ObjectMeta{UID: "u", Generation: 2}}
	mc.Status.ObservedGeneration = 1

	m.sawGeneration(mc)
	clk.Step(time.Second)
	mc.Generation = 3
	m.sawGeneration(mc)
	clk.Step(time.Second)
	if _, ok := m.observedGeneration("u", 2); ok {
		t.Errorf("observing generation 2 closed the clock of generation 3")
	}
	clk.Step(3 * time.Second)
	d, ok := m.observedGeneration("u", 3)
	if !ok || d != 5*time.Second {
		t.Errorf("observed = %s, %v; want 5s from the first unobserved change", d, ok)
	}
	if _, ok := m.observedGeneration("u", 3); ok {
		t.Errorf("a generation was observed twice")
	}

	converged := &cachev1alpha1.Memcached{ObjectMeta: metav1.ObjectMeta{UID: "v", Generation: 4}}
	converged.Status.ObservedGeneration = 4
	m.sawGeneration(converged)
	if _, ok := m.observedGeneration("v", 4); ok {
		t.Errorf("an already observed generation started a clock")
	}
}

func TestMemoDesiredKeepsOnlyBusyObjects(t *testing.T) {
	clk := clocktesting.NewFakeClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	m := newMemo(clk)
	mc := newMemcached("cache")
	entry := desiredEntry{selector: "s"}

	m.offerDesired(mc, entry)
	if _, ok := m.desired(mc); ok {
		t.Fatalf("an entry built once was stored")
	}
	m.offerDesired(mc, entry)
	if _, ok := m.desired(mc); !ok {
		t.Fatalf("an entry built twice for the same generation was not stored")
	}

	next := mc.DeepCopy()
	next.Generation++
	if _, ok := m.desired(next); ok {
		t.Errorf("an entry of an older generation was returned")
	}

	clk.Step(desiredIdleTTL / 2)
	m.desired(mc)
	clk.Step(desiredIdleTTL/2 + time.Second)
	m.expireDesired()
	if m.desiredEntries() != 1 {
		t.Errorf("an entry used within the TTL was expired")
	}
	clk.Step(desiredIdleTTL + time.Second)
	m.expireDesired()
	if m.desiredEntries() != 0 {
		t.Errorf("an entry idle for longer than the TTL was kept")
	}
	m.offerDesired(mc, entry)
	if m.desiredEntries() != 0 {
		t.Errorf("a built-once mark survived expiry: one rebuild stored an entry")
	}
	m.expireDesired()
	if len(m.entries) != 0 {
		t.Errorf("%d entries left empty by expiry were kept", len(m.entries))
	}
}

// TestMemoForget checks the one purge path: a deleted Memcached leaves
// nothing behind, whatever it had stored.
func TestMemoForget(t *testing.T) {
	m := newMemo(clocktesting.NewFakeClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)))
	mc := newMemcached("cache")
	mc.Generation, mc.Status.ObservedGeneration = 2, 1
	m.sawGeneration(mc)
	m.wroteStatus(mc.UID, "7")
	m.offerDesired(mc, desiredEntry{})
	m.offerDesired(mc, desiredEntry{})

	m.forget(mc.UID)
	if len(m.entries) != 0 {
		t.Errorf("%d entries left after forget", len(m.entries))
	}
	if m.statusWrittenFrom(mc.UID, "7") {
		t.Errorf("the status write survived forget")
	}
	if _, ok := m.observedGeneration(mc.UID, 2); ok {
		t.Errorf("the generation clock survived forget")
	}
}

// desiredEntries counts the memoized children.
func (m *memo) desiredEntries() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	n := 0
	for _, e := range m.entries {
		if e.desired != nil {
			n++
		}
	}
	return n
}
