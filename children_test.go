package main

import (
	"context"
	"errors"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	k8sfake "k8s.io/client-go/kubernetes/fake"
	core "k8s.io/client-go/testing"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2/ktesting"
	"k8s.io/utils/ptr"

	cachev1beta1 "github.com/kubelite/memcached-operator/pkg/apis/cache/v1beta1"
	"github.com/kubelite/memcached-operator/pkg/resources"
)

// TestSyncCreateIsCreateOnly covers a child the cache does not show but the
// apiserver has: a foreign object, invisible to the label-filtered
// informers, or one created after the informer's last event. The create
// carries a resourceVersion no object has, so the apiserver refuses it
// instead of merging into the other object; the sync then reads the object
// and reports it as foreign.
func TestSyncCreateIsCreateOnly(t *testing.T) {
	mc := newMemcached("cache")
	f := newFixture(t)
	f.addMemcached(mc)
	// In the apiserver only, not in the cache.
	f.kubeObjects = append(f.kubeObjects, &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Name: "cache", Namespace: mc.Namespace}})
	_, ctx := ktesting.NewTestContext(t)
	c := f.newController(ctx)
	var sent []string
	f.kubeClient.PrependReactor("patch", "deployments", func(action core.Action) (bool, runtime.Object, error) {
		sent = append(sent, string(action.(core.PatchAction).GetPatch()))
		return true, nil, apierrors.NewConflict(schema.GroupResource{Group: "apps", Resource: "deployments"}, "cache", errors.New("the object has been modified"))
	})
	o := c.syncHandler(ctx, cache.MetaObjectToName(mc))
	if !isRequeue(o, foreignRecheckInterval) {
		t.Fatalf("sync error = %v, want a requeue after %s", o, foreignRecheckInterval)
	}
	if len(sent) != 1 || !strings.Contains(sent[0], `"resourceVersion":"`+createOnlyResourceVersion+`"`) {
		t.Errorf("creating apply = %v, want one carrying resourceVersion %q", sent, createOnlyResourceVersion)
	}

	// Blocked already: the recheck reads and sends no write.
	blocked, err := f.client.CacheV1beta1().Memcacheds(mc.Namespace).Get(ctx, mc.Name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	f2 := newFixture(t)
	f2.addMemcached(blocked)
	f2.kubeObjects = append(f2.kubeObjects, &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Name: "cache", Namespace: mc.Namespace}})
	svc, _ := f.kubeClient.CoreV1().Services(mc.Namespace).Get(ctx, mc.Name, metav1.GetOptions{})
	f2.addService(svc)
	pdb, _ := f.kubeClient.PolicyV1().PodDisruptionBudgets(mc.Namespace).Get(ctx, mc.Name, metav1.GetOptions{})
	f2.addPDB(pdb)
	actions, o := f2.run(cache.MetaObjectToName(blocked))
	if !isRequeue(o, foreignRecheckInterval) {
		t.Fatalf("recheck error = %v, want a requeue after %s", o, foreignRecheckInterval)
	}
	checkActions(t, []expectedAction{getDeployment}, actions)
}

// TestSyncBlockedMemcachedCreatesOnceForeignObjectIsGone covers the
// recheck of a Memcached blocked by a foreign object: once the object is
// gone, the read finds nothing and the child is created.
func TestSyncBlockedMemcachedCreatesOnceForeignObjectIsGone(t *testing.T) {
	mc := newMemcached("cache")
	mc.Status.Conditions = []metav1.Condition{{
		Type: cachev1beta1.ConditionDegraded, Status: metav1.ConditionTrue, Reason: cachev1beta1.ReasonResourceExists,
	}}
	f := newFixture(t)
	f.addMemcached(mc)
	_, ctx := ktesting.NewTestContext(t)
	c := f.newController(ctx)
	key := cache.MetaObjectToName(mc)
	if o := c.syncHandler(ctx, key); o.err != nil {
		t.Fatalf("sync: %v", o.err)
	}
	checkActions(t, []expectedAction{getDeployment, applyDeployment, getService, applyService, getPDB, applyPDB}, append(filterInformerActions(f.client.Actions()), filterInformerActions(f.kubeClient.Actions())...))
	// The status waits for the new Deployment to catch up (syncStatus).
	f.clock.Step(deploymentControllerWait)
	if o := c.syncHandler(ctx, key); o.err != nil {
		t.Fatalf("sync after the wait: %v", o.err)
	}
	got, err := f.client.CacheV1beta1().Memcacheds(mc.Namespace).Get(context.Background(), mc.Name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if c := meta.FindStatusCondition(got.Status.Conditions, cachev1beta1.ConditionDegraded); c == nil || c.Status != metav1.ConditionFalse {
		t.Errorf("Degraded = %+v, want False once the children exist", c)
	}
}

func TestSyncRepairsDrift(t *testing.T) {
	tests := []struct {
		name    string
		drift   func(*appsv1.Deployment, *corev1.Service) (*appsv1.Deployment, *corev1.Service)
		want    []expectedAction
		check   func(t *testing.T, dep *appsv1.Deployment, svc *corev1.Service)
		wantEvt string
	}{
		{
			name: "replicas edited",
			drift: func(d *appsv1.Deployment, s *corev1.Service) (*appsv1.Deployment, *corev1.Service) {
				d.Spec.Replicas = ptr.To[int32](7)
				return d, s
			},
			want: []expectedAction{getDeployment, applyDeployment},
			check: func(t *testing.T, d *appsv1.Deployment, _ *corev1.Service) {
				if got := ptr.Deref(d.Spec.Replicas, -1); got != 2 {
					t.Errorf("replicas = %d, want 2", got)
				}
			},
			wantEvt: "DriftRepaired Restored spec.replicas of Deployment",
		},
		{
			name: "image edited",
			drift: func(d *appsv1.Deployment, s *corev1.Service) (*appsv1.Deployment, *corev1.Service) {
				d.Spec.Template.Spec.Containers[0].Image = "memcached:evil"
				return d, s
			},
			want: []expectedAction{getDeployment, applyDeployment},
			check: func(t *testing.T, d *appsv1.Deployment, _ *corev1.Service) {
				if got := d.Spec.Template.Spec.Containers[0].Image; got != cachev1beta1.DefaultImage {
					t.Errorf("image = %q, want %q", got, cachev1beta1.DefaultImage)
				}
			},
			wantEvt: "DriftRepaired Restored spec.template.spec.containers[0].image of Deployment",
		},
		{
			name: "operator label removed",
			drift: func(d *appsv1.Deployment, s *corev1.Service) (*appsv1.Deployment, *corev1.Service) {
				delete(s.Labels, resources.LabelManagedBy)
				return d, s
			},
			want:    []expectedAction{getService, applyService},
			wantEvt: "DriftRepaired Restored metadata.labels[app.kubernetes.io/managed-by] of Service",
		},
		{
			name: "service deleted",
			drift: func(d *appsv1.Deployment, _ *corev1.Service) (*appsv1.Deployment, *corev1.Service) {
				return d, nil
			},
			want: []expectedAction{applyService},
		},
		{
			name: "restart annotation and foreign label added",
			drift: func(d *appsv1.Deployment, s *corev1.Service) (*appsv1.Deployment, *corev1.Service) {
				if d.Spec.Template.Annotations == nil {
					d.Spec.Template.Annotations = map[string]string{}
				}
				d.Spec.Template.Annotations["kubectl.kubernetes.io/restartedAt"] = "2026-01-01T00:00:00Z"
				d.Labels["team"] = "web"
				return d, s
			},
			want: nil,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			mc, dep, svc, pdb := converge(t, newMemcached("cache"))
			dep, svc = editedBy(t, "kubectl-edit", dep, svc, tt.drift)

			f := newFixture(t)
			f.seed(mc, dep, svc, pdb)
			actions, o := f.run(cache.MetaObjectToName(mc))
			if o.err != nil {
				t.Fatalf("sync: %v", o.err)
			}
			checkActions(t, tt.want, actions)
			if tt.check != nil {
				ctx := context.Background()
				d, _ := f.kubeClient.AppsV1().Deployments(mc.Namespace).Get(ctx, mc.Name, metav1.GetOptions{})
				s, _ := f.kubeClient.CoreV1().Services(mc.Namespace).Get(ctx, mc.Name, metav1.GetOptions{})
				tt.check(t, d, s)
			}
			checkEvent(t, f.recorder, tt.wantEvt)
		})
	}
}

// editedBy applies edit to copies of a converged Deployment and Service and
// writes what it returns as field manager manager would with an update,
// the way kubectl edit does: the result's managedFields then say who owns
// each changed field. A nil result stands for a deleted object.
func editedBy(t *testing.T, manager string, dep *appsv1.Deployment, svc *corev1.Service,
	edit func(*appsv1.Deployment, *corev1.Service) (*appsv1.Deployment, *corev1.Service)) (*appsv1.Deployment, *corev1.Service) {
	t.Helper()
	ctx := context.Background()
	client := k8sfake.NewClientset(dep, svc)
	d, s := edit(dep.DeepCopy(), svc.DeepCopy())
	opts := metav1.UpdateOptions{FieldManager: manager}
	var err error
	if d != nil {
		if d, err = client.AppsV1().Deployments(d.Namespace).Update(ctx, d, opts); err != nil {
			t.Fatalf("editing the Deployment: %v", err)
		}
	}
	if s != nil {
		if s, err = client.CoreV1().Services(s.Namespace).Update(ctx, s, opts); err != nil {
			t.Fatalf("editing the Service: %v", err)
		}
	}
	return d, s
}

func TestSyncForeignChild(t *testing.T) {
	tests := []struct {
		name  string
		owner []metav1.OwnerReference
	}{
		{name: "no owner and no operator labels"},
		{name: "controlled by another kind", owner: []metav1.OwnerReference{{
			APIVersion: "example.com/v1", Kind: "Other", Name: "cache", UID: "other", Controller: ptr.To(true),
		}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			mc := newMemcached("cache")
			f := newFixture(t)
			f.addMemcached(mc)
			foreign := &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{
				Name: "cache", Namespace: mc.Namespace, ResourceVersion: "3", OwnerReferences: tt.owner,
			}}
			f.addDeployment(foreign)

			actions, o := f.run(cache.MetaObjectToName(mc))
			if !isRequeue(o, foreignRecheckInterval) {
				t.Fatalf("sync error = %v, want a requeue after %s", o, foreignRecheckInterval)
			}
			for _, a := range writes(actions) {
				if a.GetResource() == deploymentsResource {
					t.Errorf("foreign Deployment was written: %v", describe([]core.Action{a}))
				}
			}
			got, _ := f.client.CacheV1beta1().Memcacheds(mc.Namespace).Get(context.Background(), mc.Name, metav1.GetOptions{})
			cond := meta.FindStatusCondition(got.Status.Conditions, cachev1beta1.ConditionDegraded)
			if cond == nil || cond.Status != metav1.ConditionTrue || cond.Reason != cachev1beta1.ReasonResourceExists {
				t.Errorf("Degraded = %+v, want True/%s", cond, cachev1beta1.ReasonResourceExists)
			}
			checkEvent(t, f.recorder, cachev1beta1.ReasonResourceExists)
		})
	}
}

func TestSyncForeignChildWarnsOnce(t *testing.T) {
	mc, _, _, pdb := converge(t, newMemcached("cache"))
	// Degraded is already ResourceExists: syncing again must not repeat the
	// Event or write the status.
	mc.Status.Conditions = nil
	f := newFixture(t)
	f.addMemcached(mc)
	f.addDeployment(&appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Name: "cache", Namespace: mc.Namespace}})
	_, o := f.run(cache.MetaObjectToName(mc))
	if !isRequeue(o, foreignRecheckInterval) {
		t.Fatalf("sync error = %v, want a requeue after %s", o, foreignRecheckInterval)
	}
	mc, _ = f.client.CacheV1beta1().Memcacheds(mc.Namespace).Get(context.Background(), mc.Name, metav1.GetOptions{})

	f2 := newFixture(t)
	f2.addMemcached(mc)
	f2.addDeployment(&appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Name: "cache", Namespace: mc.Namespace}})
	svc, _ := f.kubeClient.CoreV1().Services(mc.Namespace).Get(context.Background(), mc.Name, metav1.GetOptions{})
	f2.addService(svc)
	f2.addPDB(pdb)
	actions, o := f2.run(cache.MetaObjectToName(mc))
	if !isRequeue(o, foreignRecheckInterval) {
		t.Fatalf("second sync error = %v, want a requeue after %s", o, foreignRecheckInterval)
	}
	checkActions(t, nil, writes(actions))
	checkEvent(t, f2.recorder, "")
}

func TestSyncAdoptsOrphan(t *testing.T) {
	mc, dep, svc, pdb := converge(t, newMemcached("cache"))
	orphanDep := dep.DeepCopy()
	orphanDep.OwnerReferences = nil

	f := newFixture(t)
	f.seed(mc, nil, svc, pdb)
	f.addDeployment(orphanDep)
	actions, o := f.run(cache.MetaObjectToName(mc))
	if o.err != nil {
		t.Fatalf("sync: %v", o.err)
	}
	// The orphan is read whole (the cache holds its metadata only), the
	// apply takes ownership, the update removes what the operator would
	// not have created.
	checkActions(t, []expectedAction{getMemcached, getDeployment, applyDeployment, updateDeployment}, actions)
	got, _ := f.kubeClient.AppsV1().Deployments(mc.Namespace).Get(context.Background(), mc.Name, metav1.GetOptions{})
	if ref := metav1.GetControllerOf(got); ref == nil || ref.UID != mc.UID {
		t.Errorf("controller reference after adoption = %+v, want UID %s", ref, mc.UID)
	}
	checkEvent(t, f.recorder, "Adopted")
}

func TestSyncDoesNotAdoptForReplacedMemcached(t *testing.T) {
	mc, dep, svc, pdb := converge(t, newMemcached("cache"))
	orphanDep := dep.DeepCopy()
	orphanDep.OwnerReferences = nil

	f := newFixture(t)
	f.memcachedLister = append(f.memcachedLister, mc)
	replacement := mc.DeepCopy()
	replacement.UID = "uid-2"
	f.objects = append(f.objects, replacement)
	f.addDeployment(orphanDep)
	f.addService(svc)
	f.addPDB(pdb)
	actions, o := f.run(cache.MetaObjectToName(mc))
	if !isTransient(o) || !errors.Is(o.err, errOwnerChanged) {
		t.Fatalf("sync error = %v, want a transient errOwnerChanged", o.err)
	}
	// A race with the cache: no write, not even to the status.
	checkActions(t, []expectedAction{getMemcached, getDeployment}, actions)
}

func TestSyncChildOfDeletedPredecessorWaits(t *testing.T) {
	mc, dep, svc, pdb := converge(t, newMemcached("cache"))
	old := dep.DeepCopy()
	old.OwnerReferences[0].UID = "uid-old"

	old.Finalizers = []string{"example.com/hold"}

	f := newFixture(t)
	f.seed(mc, old, svc, pdb)
	actions, o := f.run(cache.MetaObjectToName(mc))
	if !isRequeue(o, foreignRecheckInterval) {
		t.Fatalf("sync error = %v, want a requeue after %s", o, foreignRecheckInterval)
	}
	checkActions(t, []expectedAction{updateStatus}, writes(actions))
	got, err := f.client.CacheV1beta1().Memcacheds(mc.Namespace).Get(context.Background(), mc.Name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	prog := meta.FindStatusCondition(got.Status.Conditions, cachev1beta1.ConditionProgressing)
	degraded := meta.FindStatusCondition(got.Status.Conditions, cachev1beta1.ConditionDegraded)
	if prog == nil || prog.Status != metav1.ConditionFalse || prog.Reason != cachev1beta1.ReasonWaitingForPredecessor ||
		!strings.Contains(prog.Message, "example.com/hold") {
		t.Errorf("Progressing = %+v, want False/%s naming the finalizer", prog, cachev1beta1.ReasonWaitingForPredecessor)
	}
	if degraded == nil || degraded.Status != metav1.ConditionFalse {
		t.Errorf("Degraded = %+v, want False: the garbage collector ends the wait", degraded)
	}
}
