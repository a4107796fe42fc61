package main

import (
	"errors"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	clocktesting "k8s.io/utils/clock/testing"

	cachev1beta1 "github.com/kubelite/memcached-operator/pkg/apis/cache/v1beta1"
)

func TestMemoGenerationClock(t *testing.T) {
	clk := clocktesting.NewFakeClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	m := newMemo(clk)
	mc := &cachev1beta1.Memcached{ObjectMeta: metav1.ObjectMeta{UID: "u", Generation: 2}}
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

	converged := &cachev1beta1.Memcached{ObjectMeta: metav1.ObjectMeta{UID: "v", Generation: 4}}
	converged.Status.ObservedGeneration = 4
	m.sawGeneration(converged)
	if _, ok := m.observedGeneration("v", 4); ok {
		t.Errorf("an already observed generation started a clock")
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

func TestMemoAppliedFields(t *testing.T) {
	m := newMemo(clocktesting.NewFakeClock(time.Now()))
	computed := 0
	digestOf := func(d string) func() (string, error) {
		return func() (string, error) {
			computed++
			return d, nil
		}
	}
	steps := []struct {
		name         string
		kind, hash   string
		compute      func() (string, error)
		want         string
		wantComputed int
		wantErr      bool
	}{
		{name: "first ask computes", kind: "Deployment", hash: "h1", compute: digestOf("d1"), want: "d1", wantComputed: 1},
		{name: "same spec hash is remembered", kind: "Deployment", hash: "h1", compute: digestOf("other"), want: "d1", wantComputed: 1},
		{name: "another kind computes its own", kind: "Service", hash: "h1", compute: digestOf("s1"), want: "s1", wantComputed: 2},
		{name: "a new spec hash computes again", kind: "Deployment", hash: "h2", compute: digestOf("d2"), want: "d2", wantComputed: 3},
		{name: "the other kind is kept", kind: "Service", hash: "h1", compute: digestOf("other"), want: "s1", wantComputed: 3},
		{name: "a failure is not remembered", kind: "Deployment", hash: "h3", compute: func() (string, error) { return "", errors.New("no schema") }, wantErr: true, wantComputed: 3},
		{name: "and the next ask computes", kind: "Deployment", hash: "h3", compute: digestOf("d3"), want: "d3", wantComputed: 4},
	}
	for _, s := range steps {
		got, err := m.appliedFields("u", s.kind, s.hash, s.compute)
		if (err != nil) != s.wantErr || got != s.want || computed != s.wantComputed {
			t.Errorf("%s: got %q, %v after %d computations; want %q, error %t after %d", s.name, got, err, computed, s.want, s.wantErr, s.wantComputed)
		}
	}
	m.forget("u")
	if got, _ := m.appliedFields("u", "Service", "h1", digestOf("s2")); got != "s2" {
		t.Errorf("after forget: got %q, want it computed again", got)
	}
}
