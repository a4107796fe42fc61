#!/usr/bin/env bash
# Starts a local Kubernetes control plane (etcd, kube-apiserver,
# kube-controller-manager, kube-scheduler and kwok fake nodes) on free
# loopback ports, the way hack/local-up-cluster.sh does for Kubernetes
# itself. Flags go to hack/localup; see `hack/local-up.sh -h`. Ctrl-C stops
# everything and removes the cluster's files.
set -o errexit
set -o nounset
set -o pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "${ROOT}"
"${ROOT}/hack/build-cluster.sh" >/dev/null
mkdir -p "${ROOT}/_output/bin"
go build -o "${ROOT}/_output/bin/localup" ./hack/localup
exec "${ROOT}/_output/bin/localup" "$@"
