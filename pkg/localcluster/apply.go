package localcluster

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/wait"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/discovery/cached/memory"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/restmapper"
)

// ApplyFiles server-side applies every object in the given YAML files, or
// in the .yaml files of the given directories, as the admin. After each
// CustomResourceDefinition it waits until the new resource is served, so a
// later document (or the caller) can use it at once.
func (c *Cluster) ApplyFiles(ctx context.Context, paths ...string) error {
	dyn, err := dynamic.NewForConfig(c.Config)
	if err != nil {
		return err
	}
	dc, err := discovery.NewDiscoveryClientForConfig(c.Config)
	if err != nil {
		return err
	}
	cached := memory.NewMemCacheClient(dc)
	mapper := restmapper.NewDeferredDiscoveryRESTMapper(cached)

	files, err := expandYAML(paths)
	if err != nil {
		return err
	}
	for _, file := range files {
		data, err := os.ReadFile(file)
		if err != nil {
			return err
		}
		dec := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader(data), 4096)
		for {
			var obj unstructured.Unstructured
			if err := dec.Decode(&obj.Object); errors.Is(err, io.EOF) {
				break
			} else if err != nil {
				return fmt.Errorf("decoding %s: %w", file, err)
			}
			if len(obj.Object) == 0 || obj.GetKind() == "Kustomization" {
				continue
			}
			if err := applyOne(ctx, dyn, mapper, &obj); err != nil {
				return fmt.Errorf("applying %s %s from %s: %w", obj.GetKind(), obj.GetName(), file, err)
			}
			if obj.GetKind() == "CustomResourceDefinition" {
				cached.Invalidate()
				mapper.Reset()
				if err := waitCRDServed(ctx, dc, &obj); err != nil {
					return err
				}
			}
		}
	}
	return nil
}

func applyOne(ctx context.Context, dyn dynamic.Interface, mapper meta.RESTMapper, obj *unstructured.Unstructured) error {
	gvk := obj.GroupVersionKind()
	mapping, err := mapper.RESTMapping(gvk.GroupKind(), gvk.Version)
	if err != nil {
		return err
	}
	var ri dynamic.ResourceInterface = dyn.Resource(mapping.Resource)
	if mapping.Scope.Name() == meta.RESTScopeNameNamespace {
		ns := obj.GetNamespace()
		if ns == "" {
			ns = metav1.NamespaceDefault
		}
		ri = dyn.Resource(mapping.Resource).Namespace(ns)
	}
	_, err = ri.Apply(ctx, obj.GetName(), obj, metav1.ApplyOptions{FieldManager: "localcluster", Force: true})
	return err
}

// waitCRDServed waits until discovery lists the CRD's resource in its first
// version.
func waitCRDServed(ctx context.Context, dc discovery.DiscoveryInterface, crd *unstructured.Unstructured) error {
	group, _, _ := unstructured.NestedString(crd.Object, "spec", "group")
	plural, _, _ := unstructured.NestedString(crd.Object, "spec", "names", "plural")
	versions, _, _ := unstructured.NestedSlice(crd.Object, "spec", "versions")
	if len(versions) == 0 {
		return nil
	}
	version, _, _ := unstructured.NestedString(versions[0].(map[string]any), "name")
	return wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, 30*time.Second, true, func(context.Context) (bool, error) {
		list, err := dc.ServerResourcesForGroupVersion(group + "/" + version)
		if err != nil {
			return false, nil
		}
		for _, r := range list.APIResources {
			if r.Name == plural {
				return true, nil
			}
		}
		return false, nil
	})
}

func expandYAML(paths []string) ([]string, error) {
	var files []string
	for _, p := range paths {
		info, err := os.Stat(p)
		if err != nil {
			return nil, err
		}
		if !info.IsDir() {
			files = append(files, p)
			continue
		}
		matches, err := filepath.Glob(filepath.Join(p, "*.yaml"))
		if err != nil {
			return nil, err
		}
		sort.Strings(matches)
		files = append(files, matches...)
	}
	return files, nil
}
