#!/usr/bin/env bash
# `make run`: runs the operator in the foreground.
#
# With KUBECONFIG set, it runs against that cluster and starts nothing
# local (install the CRD there first: kubectl apply -f artifacts/crd). Its
# apiserver must reach the conversion webhook: pass
# --webhook-url=https://<an address of this machine it can reach>:9443/convert
# (README, "Run against your own cluster").
# Without it, it brings up the local control plane, installs the CRD, the
# RBAC and artifacts/examples/memcached.yaml, and runs the operator against
# it, with the conversion webhook on 127.0.0.1:9443, which the local
# apiserver calls. Ctrl-C stops everything.
set -o errexit
set -o nounset
set -o pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "${ROOT}"

if [[ -n "${KUBECONFIG:-}" ]]; then
  echo ">> KUBECONFIG is set; running against ${KUBECONFIG} without a local cluster" >&2
  exec "${ROOT}/bin/memcached-operator" --kubeconfig "${KUBECONFIG}" "$@"
fi

# Builds the control plane the first time (about 13 minutes on 2 cores,
# with a line per binary); later runs find it cached.
"${ROOT}/hack/build-cluster.sh" >/dev/null
mkdir -p "${ROOT}/_output/local-up"
KUBECONFIG_OUT="${ROOT}/_output/local-up/kubeconfig"
exec "${ROOT}/hack/local-up.sh" \
  --apply artifacts/crd \
  --apply artifacts/namespace.yaml \
  --apply artifacts/rbac \
  --apply artifacts/examples/memcached.yaml \
  --kubeconfig-out "${KUBECONFIG_OUT}" \
  -- "${ROOT}/bin/memcached-operator" --kubeconfig "${KUBECONFIG_OUT}" \
  --webhook-bind-address=127.0.0.1:9443 --webhook-url=https://127.0.0.1:9443/convert "$@"
