package main

import (
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"
	appsinformers "k8s.io/client-go/informers/apps/v1"
	coreinformers "k8s.io/client-go/informers/core/v1"
	policyinformers "k8s.io/client-go/informers/policy/v1"
	"k8s.io/client-go/tools/cache"

	cachev1beta1 "github.com/kubelite/memcached-operator/pkg/apis/cache/v1beta1"
	informers "github.com/kubelite/memcached-operator/pkg/generated/informers/externalversions/cache/v1beta1"
)

// InformerScope is the informers of one namespace, or of all namespaces when
// Namespace is empty. With --namespace the operator runs one scope per
// namespace and needs only namespaced RBAC.
type InformerScope struct {
	Namespace  string
	Memcacheds informers.MemcachedInformer
	// Deployments, Services and PodDisruptionBudgets are the child kinds.
	// Their informers cache cachedChild objects (trimChild), which their
	// generated listers cannot read; childLister does.
	Deployments          appsinformers.DeploymentInformer
	Services             coreinformers.ServiceInformer
	PodDisruptionBudgets policyinformers.PodDisruptionBudgetInformer
	// Secrets are every Secret in scope, without their data
	// (trimSecret), for spec.tls.
	Secrets coreinformers.SecretInformer
}

// namespaceLister is what every generated namespace lister offers.
type namespaceLister[T any] interface {
	Get(name string) (*T, error)
	List(selector labels.Selector) ([]*T, error)
}

// scopedLister reads one resource from the caches of every scope, so the
// controller does not care whether it watches one namespace, several, or
// all of them. An object outside every scope is NotFound.
type scopedLister[T any] struct {
	resource schema.GroupResource
	get      map[string]func(name string) (*T, error)
	list     []func(labels.Selector) ([]*T, error)
	// any serves every namespace when the operator watches them all.
	any func(namespace, name string) (*T, error)
}

func newScopedLister[T any](resource schema.GroupResource) *scopedLister[T] {
	return &scopedLister[T]{resource: resource, get: map[string]func(string) (*T, error){}}
}

// addScope adds one scope's lister: listAll and inNamespace are the
// generated lister's List and namespace accessor.
func addScope[T any](l *scopedLister[T], namespace string, listAll func(labels.Selector) ([]*T, error), inNamespace func(string) namespaceLister[T]) {
	if namespace == metav1.NamespaceAll {
		l.any = func(ns, name string) (*T, error) { return inNamespace(ns).Get(name) }
		l.list = append(l.list, listAll)
		return
	}
	nl := inNamespace(namespace)
	l.get[namespace] = nl.Get
	l.list = append(l.list, nl.List)
}

// Get returns the cached object or a NotFound error.
func (l *scopedLister[T]) Get(namespace, name string) (*T, error) {
	if l.any != nil {
		return l.any(namespace, name)
	}
	if get, ok := l.get[namespace]; ok {
		return get(name)
	}
	return nil, apierrors.NewNotFound(l.resource, name)
}

// List returns every cached object in scope.
func (l *scopedLister[T]) List() ([]*T, error) {
	var out []*T
	for _, list := range l.list {
		items, err := list(labels.Everything())
		if err != nil {
			return nil, err
		}
		out = append(out, items...)
	}
	return out, nil
}

// addChildScope adds one scope of a child kind, whose informer caches
// cachedChild objects (trimChild) that typed turns into the kind's type.
func addChildScope[T any](l *scopedLister[T], namespace string, informer cache.SharedIndexInformer, typed func(*cachedChild) *T) {
	all := childLister[T]{indexer: informer.GetIndexer(), resource: l.resource, typed: typed}
	addScope(l, namespace, all.List, all.inNamespace)
}

// scopedListers are the controller's listers over every scope.
type scopedListers struct {
	memcacheds  *scopedLister[cachev1beta1.Memcached]
	deployments *scopedLister[appsv1.Deployment]
	services    *scopedLister[corev1.Service]
	pdbs        *scopedLister[policyv1.PodDisruptionBudget]
	secrets     *scopedLister[corev1.Secret]
}

// newScopedListers builds the listers over the scopes' informers.
func newScopedListers(scopes []InformerScope) scopedListers {
	mcs := newScopedLister[cachev1beta1.Memcached](cachev1beta1.Resource("memcacheds"))
	deps := newScopedLister[appsv1.Deployment](appsv1.Resource("deployments"))
	svcs := newScopedLister[corev1.Service](corev1.Resource("services"))
	pdbs := newScopedLister[policyv1.PodDisruptionBudget](policyv1.Resource("poddisruptionbudgets"))
	secrets := newScopedLister[corev1.Secret](corev1.Resource("secrets"))
	for _, s := range scopes {
		mcLister, secretLister := s.Memcacheds.Lister(), s.Secrets.Lister()
		addScope(mcs, s.Namespace, mcLister.List,
			func(ns string) namespaceLister[cachev1beta1.Memcached] { return mcLister.Memcacheds(ns) })
		addChildScope(deps, s.Namespace, s.Deployments.Informer(), deploymentOf)
		addChildScope(svcs, s.Namespace, s.Services.Informer(), serviceOf)
		addChildScope(pdbs, s.Namespace, s.PodDisruptionBudgets.Informer(), pdbOf)
		addScope(secrets, s.Namespace, secretLister.List,
			func(ns string) namespaceLister[corev1.Secret] { return secretLister.Secrets(ns) })
	}
	return scopedListers{memcacheds: mcs, deployments: deps, services: svcs, pdbs: pdbs, secrets: secrets}
}
