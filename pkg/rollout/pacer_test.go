package rollout

import (
	"slices"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/utils/ptr"
)

// deploymentAt is a Deployment of generation gen with three replicas,
// complete when complete is set, else one replica short of its template.
func deploymentAt(gen int64, complete bool) *appsv1.Deployment {
	d := &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Generation: gen},
		Spec:       appsv1.DeploymentSpec{Replicas: ptr.To[int32](3)},
		Status: appsv1.DeploymentStatus{
			ObservedGeneration: gen, Replicas: 3, UpdatedReplicas: 3, AvailableReplicas: 3,
		},
	}
	if !complete {
		d.Status.UpdatedReplicas = 2
		d.Status.Replicas = 4
	}
	return d
}

func TestRollouts(t *testing.T) {
	a, b, c := cache.ObjectName{Namespace: "ns", Name: "a"}, cache.ObjectName{Namespace: "ns", Name: "b"}, cache.ObjectName{Namespace: "ns", Name: "c"}
	type step struct {
		do   func(r *Pacer)
		want map[cache.ObjectName]bool // acquire results to check after do
	}
	tests := []struct {
		name  string
		limit int
		steps []step
		// wantWoken are the keys woken, in order.
		wantWoken []cache.ObjectName
	}{{
		name:  "the limit holds, and the first in line goes next",
		limit: 1,
		steps: []step{
			{want: map[cache.ObjectName]bool{a: true}},
			{do: func(r *Pacer) { r.Started(a, 2) }, want: map[cache.ObjectName]bool{b: false, c: false}},
			// The cache still shows the generation before the apply.
			{do: func(r *Pacer) { r.Observe(a, a, deploymentAt(1, true)) }, want: map[cache.ObjectName]bool{c: false}},
			{do: func(r *Pacer) { r.Observe(a, a, deploymentAt(2, false)) }, want: map[cache.ObjectName]bool{c: false}},
			{do: func(r *Pacer) { r.Observe(a, a, deploymentAt(2, true)) }, want: map[cache.ObjectName]bool{c: false, b: true}},
		},
		wantWoken: []cache.ObjectName{b},
	}, {
		name:  "a slot granted to an apply in flight is not freed by the cache",
		limit: 1,
		steps: []step{
			{want: map[cache.ObjectName]bool{a: true}},
			{do: func(r *Pacer) { r.Observe(a, a, deploymentAt(5, true)) }, want: map[cache.ObjectName]bool{b: false}},
			{do: func(r *Pacer) { r.Withdraw(a) }, want: map[cache.ObjectName]bool{b: true}},
		},
		wantWoken: []cache.ObjectName{b},
	}, {
		name:  "a rollout the operator did not start counts, until it completes",
		limit: 1,
		steps: []step{
			{do: func(r *Pacer) { r.Observe(a, a, deploymentAt(3, false)) }, want: map[cache.ObjectName]bool{b: false}},
			{do: func(r *Pacer) { r.Observe(a, a, deploymentAt(3, true)) }, want: map[cache.ObjectName]bool{b: true}},
		},
		wantWoken: []cache.ObjectName{b},
	}, {
		name:  "a paused or stalled rollout the operator did not start does not count",
		limit: 1,
		steps: []step{
			{do: func(r *Pacer) {
				paused := deploymentAt(3, false)
				paused.Spec.Paused = true
				r.Observe(a, a, paused)
				stalled := deploymentAt(3, false)
				stalled.Status.Conditions = []appsv1.DeploymentCondition{{Type: appsv1.DeploymentProgressing, Status: corev1.ConditionFalse, Reason: "ProgressDeadlineExceeded"}}
				r.Observe(b, b, stalled)
			}, want: map[cache.ObjectName]bool{c: true}},
		},
	}, {
		name:  "a Pod that is down without a rollout does not count",
		limit: 1,
		steps: []step{
			{do: func(r *Pacer) {
				down := deploymentAt(3, true)
				down.Status.AvailableReplicas = 2
				r.Observe(a, a, down)
			}, want: map[cache.ObjectName]bool{b: true}},
		},
	}, {
		name:  "a rollout the operator did not start frees its slot when it stalls",
		limit: 1,
		steps: []step{
			{do: func(r *Pacer) { r.Observe(a, a, deploymentAt(3, false)) }, want: map[cache.ObjectName]bool{b: false}},
			{do: func(r *Pacer) {
				stalled := deploymentAt(3, false)
				stalled.Status.Conditions = []appsv1.DeploymentCondition{{Type: appsv1.DeploymentProgressing, Status: corev1.ConditionFalse, Reason: "ProgressDeadlineExceeded"}}
				r.Observe(a, a, stalled)
			}, want: map[cache.ObjectName]bool{b: true}},
		},
	}, {
		name:  "a rollout that completed before its apply was recorded frees its slot",
		limit: 1,
		steps: []step{
			{want: map[cache.ObjectName]bool{a: true}},
			// The completion arrives while the slot is only granted, and
			// is read again from the cache once the apply is recorded.
			{do: func(r *Pacer) { r.Observe(a, a, deploymentAt(2, true)); r.Started(a, 2) }, want: map[cache.ObjectName]bool{b: false}},
			{do: func(r *Pacer) { r.Observe(a, a, deploymentAt(2, true)) }, want: map[cache.ObjectName]bool{b: true}},
		},
	}, {
		name:  "a stalled rollout the operator started keeps its slot",
		limit: 1,
		steps: []step{
			{want: map[cache.ObjectName]bool{a: true}},
			{do: func(r *Pacer) {
				r.Started(a, 2)
				stalled := deploymentAt(2, false)
				stalled.Status.Conditions = []appsv1.DeploymentCondition{{Type: appsv1.DeploymentProgressing, Status: corev1.ConditionFalse, Reason: "ProgressDeadlineExceeded"}}
				r.Observe(a, a, stalled)
			}, want: map[cache.ObjectName]bool{b: false}},
		},
	}, {
		name:  "a Memcached that leaves the line lets the next one go",
		limit: 2,
		steps: []step{
			{want: map[cache.ObjectName]bool{a: true}},
			{do: func(r *Pacer) { r.Started(a, 2); r.Observe(b, b, deploymentAt(7, false)) }, want: map[cache.ObjectName]bool{c: false}},
			{do: func(r *Pacer) { r.Forget(b) }, want: map[cache.ObjectName]bool{c: true}},
		},
		wantWoken: []cache.ObjectName{c},
	}, {
		name:  "a deleted Deployment frees the slot",
		limit: 1,
		steps: []step{
			{want: map[cache.ObjectName]bool{a: true}},
			{do: func(r *Pacer) { r.Started(a, 2); r.Observe(a, a, nil) }, want: map[cache.ObjectName]bool{b: true}},
		},
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var woken []cache.ObjectName
			r := NewPacer(tt.limit, func(k cache.ObjectName) {
				if !slices.Contains(woken, k) {
					woken = append(woken, k)
				}
			})
			for i, s := range tt.steps {
				if s.do != nil {
					s.do(r)
				}
				// Ask in a fixed order: the line is first come first.
				for _, k := range []cache.ObjectName{a, b, c} {
					want, ask := s.want[k]
					if !ask {
						continue
					}
					if got, _ := r.Acquire(k, k, "inputs"); got != want {
						t.Fatalf("step %d: acquire(%s) = %t, want %t", i, k, got, want)
					}
				}
			}
			if tt.wantWoken != nil && !slices.Equal(woken, tt.wantWoken) {
				t.Errorf("woken %v, want %v", woken, tt.wantWoken)
			}
		})
	}
}

func TestRolloutsWaitInOrder(t *testing.T) {
	r := NewPacer(1, func(cache.ObjectName) {})
	keys := []cache.ObjectName{{Name: "holder"}, {Name: "first"}, {Name: "second"}}
	if ok, _ := r.Acquire(keys[0], keys[0], "inputs"); !ok {
		t.Fatal("the first acquire did not get the free slot")
	}
	r.Started(keys[0], 1)
	for _, k := range keys[1:] {
		if ok, holders := r.Acquire(k, k, "inputs"); ok || !slices.Equal(holders, keys[:1]) {
			t.Fatalf("acquire(%s) = %t, holders %v; want false, held by %v", k, ok, holders, keys[0])
		}
	}
	r.Observe(keys[0], keys[0], deploymentAt(1, true))
	if ok, _ := r.Acquire(keys[2], keys[2], "inputs"); ok {
		t.Error("the second in line got the slot before the first")
	}
	if ok, _ := r.Acquire(keys[1], keys[1], "inputs"); !ok {
		t.Error("the first in line did not get the freed slot")
	}
}

// TestRolloutsPacePoolsOfOneMemcached checks that the zone pools of one
// Memcached take a slot each: with one slot, the second pool waits for the
// first to complete, its Memcached is woken then, and withdrawing the
// Memcached gives back what it was granted and leaves the line.
func TestRolloutsPacePoolsOfOneMemcached(t *testing.T) {
	owner := cache.ObjectName{Namespace: "ns", Name: "cache"}
	zoneA := cache.ObjectName{Namespace: "ns", Name: "cache-a"}
	zoneB := cache.ObjectName{Namespace: "ns", Name: "cache-b"}
	var woken []cache.ObjectName
	r := NewPacer(1, func(k cache.ObjectName) { woken = append(woken, k) })
	if ok, _ := r.Acquire(zoneA, owner, "inputs"); !ok {
		t.Fatal("the first pool did not get the free slot")
	}
	r.Started(zoneA, 2)
	if ok, holders := r.Acquire(zoneB, owner, "inputs"); ok || !slices.Equal(holders, []cache.ObjectName{zoneA}) {
		t.Fatalf("the second pool: acquire = %t, holders %v; want false, held by %v", ok, holders, zoneA)
	}
	r.Observe(zoneA, owner, deploymentAt(2, true))
	if !slices.Equal(woken, []cache.ObjectName{owner}) {
		t.Errorf("woken %v when the first pool completed, want its Memcached", woken)
	}
	if ok, _ := r.Acquire(zoneB, owner, "inputs"); !ok {
		t.Fatal("the second pool did not get the freed slot")
	}
	other := cache.ObjectName{Namespace: "ns", Name: "other"}
	if ok, _ := r.Acquire(other, other, "inputs"); ok {
		t.Fatal("another Memcached got the slot the second pool was granted")
	}
	r.WithdrawOwner(owner)
	if ok, _ := r.Acquire(other, other, "inputs"); !ok {
		t.Error("withdrawing the Memcached kept the slot granted to its pool")
	}
}

// TestDescribeHoldersNamesNoOtherNamespace: an Event on a Memcached names
// the holders of its own namespace and only counts the others'.
func TestDescribeHoldersNamesNoOtherNamespace(t *testing.T) {
	holders := []cache.ObjectName{
		{Namespace: "team-a", Name: "a1"}, {Namespace: "team-b", Name: "secret-project"},
		{Namespace: "team-a", Name: "a2"}, {Namespace: "team-c", Name: "c1"},
	}
	tests := []struct {
		name, namespace, want string
	}{
		{name: "own and others'", namespace: "team-a", want: "Deployment a1, a2 and 2 Deployment(s) in other namespaces"},
		{name: "others' only", namespace: "team-d", want: "4 Deployment(s) in other namespaces"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := DescribeHolders(tt.namespace, holders)
			if got != tt.want {
				t.Errorf("describeHolders = %q, want %q", got, tt.want)
			}
			if strings.Contains(got, "team-b") || strings.Contains(got, "secret-project") {
				t.Errorf("describeHolders = %q names another namespace's Deployment", got)
			}
		})
	}
}

// stuckAt is a Deployment of generation gen one replica short of its
// template that missed its progress deadline.
func stuckAt(gen int64) *appsv1.Deployment {
	d := deploymentAt(gen, false)
	d.Status.Conditions = []appsv1.DeploymentCondition{{Type: appsv1.DeploymentProgressing, Status: corev1.ConditionFalse, Reason: "ProgressDeadlineExceeded"}}
	return d
}

// TestRolloutHalt: an operator rollout past its progress deadline keeps
// its slot and is halted; the Memcached's next change of its template
// inputs, or the admin's deferral, frees the slot for the next in line.
func TestRolloutHalt(t *testing.T) {
	a, b := cache.ObjectName{Namespace: "ns", Name: "a"}, cache.ObjectName{Namespace: "other", Name: "b"}
	tests := []struct {
		name string
		// end ends the halt of a, or leaves it when nil.
		end      func(r *Pacer)
		wantFree bool
	}{
		{name: "nothing: the halt holds the line"},
		{name: "a sync with the same template inputs, a scale say: still halted", end: func(r *Pacer) { r.TakeOver(a, "inputs", stuckAt(2)) }},
		{name: "a change of the template inputs takes the rollout over", end: func(r *Pacer) { r.TakeOver(a, "changed", stuckAt(2)) }, wantFree: true},
		{name: "the admin defers the operator's rollouts", end: func(r *Pacer) { r.Release(a, stuckAt(2)) }, wantFree: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var woken []cache.ObjectName
			r := NewPacer(1, func(k cache.ObjectName) { woken = append(woken, k) })
			if ok, _ := r.Acquire(a, a, "inputs"); !ok {
				t.Fatal("the slot was not free")
			}
			r.Started(a, 2)
			r.Observe(a, a, stuckAt(2))
			if !r.Halted(a, stuckAt(2)) {
				t.Fatal("an operator rollout past its deadline is not halted")
			}
			if ok, _ := r.Acquire(b, b, "inputs"); ok {
				t.Fatal("the halted rollout gave up its slot")
			}
			if tt.end != nil {
				tt.end(r)
			}
			if r.Halted(a, stuckAt(2)) == tt.wantFree {
				t.Errorf("halted = %t, want %t", !tt.wantFree, !tt.wantFree)
			}
			if ok, _ := r.Acquire(b, b, "inputs"); ok != tt.wantFree {
				t.Errorf("the next in line got the slot: %t, want %t", ok, tt.wantFree)
			}
			if tt.wantFree && !slices.Contains(woken, b) {
				t.Errorf("woken %v, want the next in line, %s", woken, b)
			}
		})
	}
	for name, handOver := range map[string]func(r *Pacer){
		"a spec change":                         func(r *Pacer) { r.TakeOver(a, "changed", deploymentAt(2, false)) },
		"the admin deferring operator rollouts": func(r *Pacer) { r.Release(a, deploymentAt(2, false)) },
	} {
		t.Run(name+" during a rollout that goes on keeps its slot", func(t *testing.T) {
			r := NewPacer(1, func(cache.ObjectName) {})
			if ok, _ := r.Acquire(a, a, "inputs"); !ok {
				t.Fatal("the slot was not free")
			}
			r.Started(a, 2)
			handOver(r)
			if ok, _ := r.Acquire(b, b, "inputs"); ok {
				t.Fatal("a rollout still replacing Pods gave its slot away: two roll at once")
			}
			r.Observe(a, a, deploymentAt(2, true))
			if ok, _ := r.Acquire(b, b, "inputs"); !ok {
				t.Error("the slot stayed taken after the rollout completed")
			}
		})
	}
	t.Run("a user's rollout past its deadline is no halt", func(t *testing.T) {
		r := NewPacer(1, func(cache.ObjectName) {})
		r.Observe(a, a, deploymentAt(2, false))
		if r.Halted(a, stuckAt(2)) {
			t.Error("a rollout the operator did not start is halted")
		}
	})
}

// TestRolloutsOverTheLimitGrantNothing: a Deployment whose own rollout, a
// scale-up say, holds a slot while the operator's rollout of another holds
// the only one is not granted the operator's template on the strength of
// the slot it holds. Once it is within the limit it is, and its slot
// becomes the operator's: it leaves the line, and a template that then
// misses its progress deadline halts there.
func TestRolloutsOverTheLimitGrantNothing(t *testing.T) {
	halted := cache.ObjectName{Namespace: "ns", Name: "halted"}
	scaled := cache.ObjectName{Namespace: "ns", Name: "scaled"}
	other := cache.ObjectName{Namespace: "ns", Name: "other"}
	r := NewPacer(1, func(cache.ObjectName) {})
	if ok, _ := r.Acquire(halted, halted, "inputs"); !ok {
		t.Fatal("the first Deployment did not get the free slot")
	}
	r.Started(halted, 2)
	r.Observe(scaled, scaled, deploymentAt(3, false))
	if ok, _ := r.Acquire(scaled, scaled, "inputs"); ok {
		t.Fatal("a Deployment rolling on its own over the limit was granted the operator's template")
	}
	if ok, _ := r.Acquire(other, other, "inputs"); ok {
		t.Fatal("a third Deployment got a slot")
	}
	r.Observe(halted, halted, deploymentAt(2, true))
	if ok, _ := r.Acquire(scaled, scaled, "inputs"); !ok {
		t.Fatal("a Deployment rolling on its own within the limit was not granted the operator's template")
	}
	if slices.Contains(r.waiting, waiter{deployment: scaled, owner: scaled}) {
		t.Errorf("the granted Deployment stayed in line: %v", r.waiting)
	}
	r.Started(scaled, 4)
	r.Observe(scaled, scaled, stuckAt(4))
	if !r.Halted(scaled, stuckAt(4)) {
		t.Error("the operator's template past its deadline in a slot taken over from the Deployment's own rollout is no halt")
	}
	if ok, _ := r.Acquire(other, other, "inputs"); ok {
		t.Error("the next cache got the operator's template past a halt")
	}
}
