package main

import (
	"fmt"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	clocktesting "k8s.io/utils/clock/testing"

	cachev1beta1 "github.com/kubelite/memcached-operator/pkg/apis/cache/v1beta1"
)

func TestMemoGenerationClock(t *testing.T) {
	clk := clocktesting.NewFakeClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	m := newMemo(clk)
	mc := &cachev1beta1.Memcached{ObjectMeta: metav1.ObjectMeta{UID: "u", Generation: 2}}
	mc.Status.ObservedGeneration = 1

	m.generations.saw(mc)
	clk.Step(time.Second)
	mc.Generation = 3
	m.generations.saw(mc)
	clk.Step(time.Second)
	if _, ok := m.generations.observed("u", 2); ok {
		t.Errorf("observing generation 2 closed the clock of generation 3")
	}
	clk.Step(3 * time.Second)
	d, ok := m.generations.observed("u", 3)
	if !ok || d != 5*time.Second {
		t.Errorf("observed = %s, %v; want 5s from the first unobserved change", d, ok)
	}
	if _, ok := m.generations.observed("u", 3); ok {
		t.Errorf("a generation was observed twice")
	}

	converged := &cachev1beta1.Memcached{ObjectMeta: metav1.ObjectMeta{UID: "v", Generation: 4}}
	converged.Status.ObservedGeneration = 4
	m.generations.saw(converged)
	if _, ok := m.generations.observed("v", 4); ok {
		t.Errorf("an already observed generation started a clock")
	}
}

// TestMemoForget checks the one purge path: a deleted Memcached leaves
// nothing behind, whatever it had stored.
func TestMemoForget(t *testing.T) {
	m := newMemo(clocktesting.NewFakeClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)))
	mc := newMemcached("cache")
	mc.Generation, mc.Status.ObservedGeneration = 2, 1
	mc.ResourceVersion = "7"
	m.generations.saw(mc)
	m.writes.wrote(mc.UID, mc, mc)
	m.deploymentWaits.remaining(mc.UID, 1, true, time.Second)
	m.appliedFields.remember(mc.UID, "Deployment", "h", "d")

	m.forget(mc.UID)
	left := len(m.generations.entries.m) + len(m.writes.m) + len(m.deploymentWaits.entries.m) + len(m.appliedFields.m)
	if left != 0 {
		t.Errorf("%d entries left after forget", left)
	}
	if m.writes.stale(mc.UID, mc) {
		t.Errorf("the status write survived forget")
	}
	if _, ok := m.generations.observed(mc.UID, 2); ok {
		t.Errorf("the generation clock survived forget")
	}
}

func TestMemoAppliedFields(t *testing.T) {
	m := newMemo(clocktesting.NewFakeClock(time.Now()))
	steps := []struct {
		name       string
		set        *appliedFields
		kind, hash string
		want       string
		wantOK     bool
	}{
		{name: "nothing recorded", kind: "Deployment", hash: "h1"},
		{name: "recorded", set: &appliedFields{"Deployment", "h1", "d1"}, kind: "Deployment", hash: "h1", want: "d1", wantOK: true},
		{name: "another spec hash", kind: "Deployment", hash: "h2"},
		{name: "another kind", kind: "Service", hash: "h1"},
		{name: "another kind recorded", set: &appliedFields{"Service", "h1", "s1"}, kind: "Service", hash: "h1", want: "s1", wantOK: true},
		{name: "a new spec hash replaces the kind's", set: &appliedFields{"Deployment", "h2", "d2"}, kind: "Deployment", hash: "h1"},
		{name: "and answers for itself", kind: "Deployment", hash: "h2", want: "d2", wantOK: true},
		{name: "the other kind is kept", kind: "Service", hash: "h1", want: "s1", wantOK: true},
	}
	for _, s := range steps {
		if s.set != nil {
			m.appliedFields.remember("u", s.set.child, s.set.specHash, s.set.digest)
		}
		if got, ok := m.appliedFields.lookup("u", s.kind, s.hash); got != s.want || ok != s.wantOK {
			t.Errorf("%s: got %q, %t; want %q, %t", s.name, got, ok, s.want, s.wantOK)
		}
	}
	m.forget("u")
	if _, ok := m.appliedFields.lookup("u", "Service", "h1"); ok {
		t.Errorf("a digest survived forget")
	}

	for i := range maxAppliedFields + 1 {
		m.appliedFields.remember("u", fmt.Sprintf("Deployment/cache-%d", i), "h", "d")
	}
	if _, ok := m.appliedFields.lookup("u", "Deployment/cache-0", "h"); ok {
		t.Errorf("kept the digests of more than %d children", maxAppliedFields)
	}
	if _, ok := m.appliedFields.lookup("u", fmt.Sprintf("Deployment/cache-%d", maxAppliedFields), "h"); !ok {
		t.Errorf("the last child's digest is gone")
	}
}

// TestPendingWrites: after an update, the cache has not caught up while it
// shows the version the write was made from, or any of an older generation
// than the write's answer, such as a status write of the Deployment
// controller made between the operator's apply and its pause; it has once
// it shows the answer's generation. After a DELETE it has not while it
// shows the object at all. Each object's last write counts, of the last
// maxPendingWrites.
func TestPendingWrites(t *testing.T) {
	at := func(uid types.UID, rv string, gen int64) *appsv1.Deployment {
		return &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{UID: uid, ResourceVersion: rv, Generation: gen}}
	}
	tests := []struct {
		name            string
		cached          *appsv1.Deployment
		wantStale, gone bool
	}{
		{name: "the version the write was made from", cached: at("dep", "10", 3), wantStale: true},
		{name: "a status write between the apply and the pause", cached: at("dep", "11", 3), wantStale: true},
		{name: "the version from before the apply", cached: at("dep", "9", 2), wantStale: true},
		{name: "the write's answer", cached: at("dep", "12", 4)},
		{name: "a status write after the pause", cached: at("dep", "13", 4)},
		{name: "another object", cached: at("other", "10", 3)},
		{name: "a deleted object, as the cache still shows it", cached: at("deleted", "5", 1), gone: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var p pendingWrites
			p.wrote("mc", at("dep", "10", 3), at("dep", "12", 4))
			p.deleted("mc", at("deleted", "5", 1))
			if got := p.stale("mc", tt.cached); got != tt.wantStale {
				t.Errorf("stale = %t, want %t", got, tt.wantStale)
			}
			if got := p.gone("mc", tt.cached); got != tt.gone {
				t.Errorf("gone = %t, want %t", got, tt.gone)
			}
			if p.stale("another Memcached", tt.cached) || p.gone("another Memcached", tt.cached) {
				t.Errorf("a write of one Memcached counted for another")
			}
		})
	}
	t.Run("the last write of an object counts", func(t *testing.T) {
		var p pendingWrites
		p.deleted("mc", at("dep", "10", 3))
		p.wrote("mc", at("dep", "10", 3), at("dep", "12", 4))
		if p.gone("mc", at("dep", "10", 3)) || !p.stale("mc", at("dep", "10", 3)) {
			t.Errorf("an earlier DELETE outlived the update after it")
		}
	})
	t.Run("the last maxPendingWrites are kept", func(t *testing.T) {
		var p pendingWrites
		for i := range maxPendingWrites + 1 {
			p.deleted("mc", at(types.UID(fmt.Sprint(i)), "1", 1))
		}
		if p.gone("mc", at("0", "1", 1)) || !p.gone("mc", at("1", "1", 1)) || !p.gone("mc", at(types.UID(fmt.Sprint(maxPendingWrites)), "1", 1)) {
			t.Errorf("kept %d writes, want the last %d", len(p.m["mc"]), maxPendingWrites)
		}
	})
}
