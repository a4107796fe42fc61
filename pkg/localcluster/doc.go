// Package localcluster runs a real, throwaway Kubernetes control plane on
// 127.0.0.1 from locally built binaries: etcd, kube-apiserver,
// kube-controller-manager, kube-scheduler and kwok, which fakes nodes so
// that Pods become Ready without a kubelet or container runtime.
//
// It backs `make run`, the integration suite and `make bench`. Every process
// listens on free ports below the kernel's ephemeral range, picked as it
// starts, so two clusters can run at once;
// every file lives in one temporary directory; Stop ends every process and
// removes that directory. The binaries come from hack/build-cluster.sh.
package localcluster
