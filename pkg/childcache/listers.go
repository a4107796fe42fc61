package childcache

import (
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	policyv1 "k8s.io/api/policy/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"
	appsinformers "k8s.io/client-go/informers/apps/v1"
	coreinformers "k8s.io/client-go/informers/core/v1"
	networkinginformers "k8s.io/client-go/informers/networking/v1"
	policyinformers "k8s.io/client-go/informers/policy/v1"
	"k8s.io/client-go/tools/cache"

	cachev1beta1 "github.com/kubelite/memcached-operator/pkg/apis/cache/v1beta1"
	informers "github.com/kubelite/memcached-operator/pkg/generated/informers/externalversions/cache/v1beta1"
	"github.com/kubelite/memcached-operator/pkg/resources"
)

// InformerScope is the informers of one namespace, or of all namespaces when
// Namespace is empty. With --namespace the operator runs one scope per
// namespace and needs only namespaced RBAC.
type InformerScope struct {
	Namespace  string
	Memcacheds informers.MemcachedInformer
	// Deployments, Services, PodDisruptionBudgets and NetworkPolicies are
	// the child kinds.
	// Their informers cache cachedChild objects (Child), which their
	// generated listers cannot read; ChildLister does.
	Deployments          appsinformers.DeploymentInformer
	Services             coreinformers.ServiceInformer
	PodDisruptionBudgets policyinformers.PodDisruptionBudgetInformer
	NetworkPolicies      networkinginformers.NetworkPolicyInformer
	// Secrets are every Secret in scope, without their data (Secret).
	Secrets coreinformers.SecretInformer
	// ConfigMaps are every ConfigMap in scope, without their data
	// (ConfigMap).
	ConfigMaps coreinformers.ConfigMapInformer
	// Claims are the claims of the Pods' extstore volumes, which carry
	// the operator's labels, trimmed (Claim).
	Claims coreinformers.PersistentVolumeClaimInformer
}

// Listers read every scope's caches.
type Listers struct {
	Memcacheds           *Lister[cachev1beta1.Memcached]
	Secrets              *Lister[corev1.Secret]
	ConfigMaps           *Lister[corev1.ConfigMap]
	Claims               *Lister[corev1.PersistentVolumeClaim]
	Deployments          *ChildLister[appsv1.Deployment]
	Services             *ChildLister[corev1.Service]
	PodDisruptionBudgets *ChildLister[policyv1.PodDisruptionBudget]
	NetworkPolicies      *ChildLister[networkingv1.NetworkPolicy]
}

// NewListers builds the listers over the scopes' informers.
func NewListers(scopes []InformerScope) Listers {
	l := Listers{
		Memcacheds:           &Lister[cachev1beta1.Memcached]{resource: cachev1beta1.Resource("memcacheds")},
		Secrets:              &Lister[corev1.Secret]{resource: corev1.Resource("secrets")},
		ConfigMaps:           &Lister[corev1.ConfigMap]{resource: corev1.Resource("configmaps")},
		Claims:               &Lister[corev1.PersistentVolumeClaim]{resource: corev1.Resource("persistentvolumeclaims")},
		Deployments:          &ChildLister[appsv1.Deployment]{resource: appsv1.Resource("deployments"), typed: deploymentOf},
		Services:             &ChildLister[corev1.Service]{resource: corev1.Resource("services"), typed: serviceOf},
		PodDisruptionBudgets: &ChildLister[policyv1.PodDisruptionBudget]{resource: policyv1.Resource("poddisruptionbudgets"), typed: pdbOf},
		NetworkPolicies:      &ChildLister[networkingv1.NetworkPolicy]{resource: networkingv1.Resource("networkpolicies"), typed: networkPolicyOf},
	}
	for _, s := range scopes {
		mcLister, secretLister, configMapLister := s.Memcacheds.Lister(), s.Secrets.Lister(), s.ConfigMaps.Lister()
		l.Memcacheds.addScope(s.Namespace, mcLister.List,
			func(ns string) namespaceLister[cachev1beta1.Memcached] { return mcLister.Memcacheds(ns) })
		l.Secrets.addScope(s.Namespace, secretLister.List,
			func(ns string) namespaceLister[corev1.Secret] { return secretLister.Secrets(ns) })
		l.ConfigMaps.addScope(s.Namespace, configMapLister.List,
			func(ns string) namespaceLister[corev1.ConfigMap] { return configMapLister.ConfigMaps(ns) })
		claimLister := s.Claims.Lister()
		l.Claims.addScope(s.Namespace, claimLister.List,
			func(ns string) namespaceLister[corev1.PersistentVolumeClaim] {
				return claimLister.PersistentVolumeClaims(ns)
			})
		l.Deployments.addScope(s.Namespace, s.Deployments.Informer().GetIndexer())
		l.Services.addScope(s.Namespace, s.Services.Informer().GetIndexer())
		l.PodDisruptionBudgets.addScope(s.Namespace, s.PodDisruptionBudgets.Informer().GetIndexer())
		l.NetworkPolicies.addScope(s.Namespace, s.NetworkPolicies.Informer().GetIndexer())
	}
	return l
}

// namespaceLister is what every generated namespace lister offers.
type namespaceLister[T any] interface {
	Get(name string) (*T, error)
	List(selector labels.Selector) ([]*T, error)
}

// Lister reads one resource from the generated listers of every scope, so
// the controller does not care whether it watches one namespace, several,
// or all of them. An object outside every scope is NotFound.
type Lister[T any] struct {
	resource schema.GroupResource
	get      map[string]func(name string) (*T, error)
	list     []func(labels.Selector) ([]*T, error)
	// any serves every namespace when the operator watches them all.
	any func(namespace, name string) (*T, error)
	// in and anyIn list one namespace, as get and any read in it.
	in    map[string]func(labels.Selector) ([]*T, error)
	anyIn func(namespace string, selector labels.Selector) ([]*T, error)
}

// addScope adds one scope's lister: listAll and inNamespace are the
// generated lister's List and namespace accessor.
func (l *Lister[T]) addScope(namespace string, listAll func(labels.Selector) ([]*T, error), inNamespace func(string) namespaceLister[T]) {
	if namespace == metav1.NamespaceAll {
		l.any = func(ns, name string) (*T, error) { return inNamespace(ns).Get(name) }
		l.anyIn = func(ns string, selector labels.Selector) ([]*T, error) { return inNamespace(ns).List(selector) }
		l.list = append(l.list, listAll)
		return
	}
	if l.get == nil {
		l.get = map[string]func(string) (*T, error){}
		l.in = map[string]func(labels.Selector) ([]*T, error){}
	}
	nl := inNamespace(namespace)
	l.get[namespace] = nl.Get
	l.in[namespace] = nl.List
	l.list = append(l.list, nl.List)
}

// ListIn returns the cached objects of namespace that selector selects,
// none for a namespace out of scope.
func (l *Lister[T]) ListIn(namespace string, selector labels.Selector) ([]*T, error) {
	if l.anyIn != nil {
		return l.anyIn(namespace, selector)
	}
	if in, ok := l.in[namespace]; ok {
		return in(selector)
	}
	return nil, nil
}

// Get returns the cached object or a NotFound error.
func (l *Lister[T]) Get(namespace, name string) (*T, error) {
	if l.any != nil {
		return l.any(namespace, name)
	}
	if get, ok := l.get[namespace]; ok {
		return get(name)
	}
	return nil, apierrors.NewNotFound(l.resource, name)
}

// List returns every cached object in scope.
func (l *Lister[T]) List() ([]*T, error) {
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

// ChildLister reads one child kind from the caches of every scope, whose
// informers hold cachedChild objects (Child), as the kind's API type.
type ChildLister[T any] struct {
	resource schema.GroupResource
	typed    func(*cachedChild) *T
	// byNamespace holds the indexer of each watched namespace; all, when
	// set, the one of every namespace.
	byNamespace map[string]cache.Indexer
	all         cache.Indexer
}

func (l *ChildLister[T]) addScope(namespace string, indexer cache.Indexer) {
	if namespace == metav1.NamespaceAll {
		l.all = indexer
		return
	}
	if l.byNamespace == nil {
		l.byNamespace = map[string]cache.Indexer{}
	}
	l.byNamespace[namespace] = indexer
}

// OwnerIndex indexes the child informers by the Memcached whose child an
// object is (resources.IsChild), as namespace/name; IndexByOwner is its
// function, which NewController adds to them.
const OwnerIndex = "owner"

// IndexByOwner is OwnerIndex's function.
func IndexByOwner(obj any) ([]string, error) {
	o, ok := obj.(metav1.Object)
	if !ok || !resources.IsChild(o) {
		return nil, nil
	}
	return []string{o.GetNamespace() + "/" + metav1.GetControllerOf(o).Name}, nil
}

// Owned returns the cached children of the named Memcached of any UID, by
// OwnerIndex; the caller tells its own from a predecessor's.
func (l *ChildLister[T]) Owned(namespace, memcachedName string) ([]*T, error) {
	indexer := l.all
	if indexer == nil {
		indexer = l.byNamespace[namespace]
	}
	if indexer == nil {
		return nil, nil
	}
	objs, err := indexer.ByIndex(OwnerIndex, namespace+"/"+memcachedName)
	if err != nil {
		return nil, err
	}
	out := make([]*T, 0, len(objs))
	for _, obj := range objs {
		out = append(out, l.typed(obj.(*cachedChild)))
	}
	return out, nil
}

// Get returns the cached child and the digest of the fields the operator's
// apply owns in it ("" for an object that is not a Memcached's child), or
// a NotFound error. Each call builds a new object, which the caller may
// keep but must not change (see cachedChild.GetAnnotations).
func (l *ChildLister[T]) Get(namespace, name string) (*T, string, error) {
	indexer := l.all
	if indexer == nil {
		indexer = l.byNamespace[namespace]
	}
	if indexer == nil {
		return nil, "", apierrors.NewNotFound(l.resource, name)
	}
	obj, exists, err := indexer.GetByKey(namespace + "/" + name)
	if err != nil {
		return nil, "", err
	}
	if !exists {
		return nil, "", apierrors.NewNotFound(l.resource, name)
	}
	c := obj.(*cachedChild)
	return l.typed(c), c.ownedFields, nil
}
