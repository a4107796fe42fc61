#!/usr/bin/env bash
# Builds the local control plane (etcd, kube-apiserver, kube-controller-manager,
# kube-scheduler, kwok) from the versions pinned in hack/tools/cluster/go.mod
# into _output/bin/k8s-<version>/. A binary that is already there is not
# rebuilt, so only the first run pays for the build (minutes on 2 cores;
# the README gives a measured figure; the Go build cache makes later
# rebuilds fast).
set -o errexit
set -o nounset
set -o pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
KUBE_VERSION="v1.37.2"
OUT="${CLUSTER_BIN_DIR:-${ROOT}/_output/bin/k8s-${KUBE_VERSION}}"
MOD="${ROOT}/hack/tools/cluster"

mkdir -p "${OUT}"
cd "${MOD}"

major="${KUBE_VERSION#v}"; major="${major%%.*}"
minor="${KUBE_VERSION#v*.}"; minor="${minor%%.*}"
ldflags="-s -w"
for pkg in k8s.io/client-go/pkg/version k8s.io/component-base/version; do
  ldflags+=" -X ${pkg}.gitVersion=${KUBE_VERSION}"
  ldflags+=" -X ${pkg}.gitMajor=${major} -X ${pkg}.gitMinor=${minor}"
  ldflags+=" -X ${pkg}.gitTreeState=clean -X ${pkg}.buildDate=1970-01-01T00:00:00Z"
done

# build NAME PACKAGE [LDFLAGS]
build() {
  local name="$1" pkg="$2" flags="${3:-}"
  if [[ -x "${OUT}/${name}" ]]; then
    return 0
  fi
  echo ">> building ${name} from ${pkg} (cold builds take minutes; later runs reuse ${OUT})" >&2
  local start=${SECONDS}
  go build -trimpath -ldflags "${flags}" -o "${OUT}/${name}.tmp" "${pkg}"
  mv "${OUT}/${name}.tmp" "${OUT}/${name}"
  echo ">> built ${name} in $((SECONDS - start))s" >&2
}

build etcd go.etcd.io/etcd/server/v3 "-s -w"
build kube-apiserver k8s.io/kubernetes/cmd/kube-apiserver "${ldflags}"
build kube-controller-manager k8s.io/kubernetes/cmd/kube-controller-manager "${ldflags}"
build kube-scheduler k8s.io/kubernetes/cmd/kube-scheduler "${ldflags}"
build kwok sigs.k8s.io/kwok/cmd/kwok "-s -w"

# kwok's stage definitions ship inside its module; copy the ones we use next
# to the binary so the cluster package needs no Go toolchain at run time.
stage_files=(node/fast/node-initialize.yaml node/heartbeat-with-lease/node-heartbeat-with-lease.yaml
             pod/fast/pod-ready.yaml pod/fast/pod-complete.yaml pod/fast/pod-delete.yaml)
missing=0
for f in "${stage_files[@]}"; do
  [[ -f "${OUT}/kwok-stages/$(basename "${f}")" ]] || missing=1
done
if [[ ${missing} -eq 0 ]]; then
  echo "${OUT}"
  exit 0
fi
# With kwok already built, its module may not be in the module cache, where
# `go list -m` would print an empty Dir; download it first.
go mod download sigs.k8s.io/kwok
stages="$(go list -m -f '{{.Dir}}' sigs.k8s.io/kwok)/kustomize/stage"
mkdir -p "${OUT}/kwok-stages"
for f in "${stage_files[@]}"; do
  install -m 0644 "${stages}/${f}" "${OUT}/kwok-stages/$(basename "${f}")"
done
echo "${OUT}"
