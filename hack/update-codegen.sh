#!/usr/bin/env bash
# Regenerates everything derived from pkg/apis/cache/v1alpha1/types.go:
# deepcopy and register code, the clientset, listers, informers and apply
# configurations under pkg/generated, and the CRD under artifacts/crd. The
# generator versions are pinned by hack/tools/go.mod.
set -o errexit
set -o nounset
set -o pipefail

source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

THIS_PKG="github.com/kubelite/memcached-operator"
BOILERPLATE="${ROOT}/hack/boilerplate.go.txt"

CODEGEN_PKG="$(tool::module_dir k8s.io/code-generator)"
# shellcheck source=/dev/null
source "${CODEGEN_PKG}/kube_codegen.sh"

cd "${ROOT}"

kube::codegen::gen_helpers \
  --boilerplate "${BOILERPLATE}" \
  "${ROOT}/pkg/apis"

kube::codegen::gen_register \
  --boilerplate "${BOILERPLATE}" \
  "${ROOT}/pkg/apis"

kube::codegen::gen_client \
  --with-watch \
  --with-applyconfig \
  --output-dir "${ROOT}/pkg/generated" \
  --output-pkg "${THIS_PKG}/pkg/generated" \
  --boilerplate "${BOILERPLATE}" \
  "${ROOT}/pkg/apis"

echo "Generating CRD manifests"
tool::build controller-gen sigs.k8s.io/controller-tools/cmd/controller-gen
rm -rf "${ROOT}/artifacts/crd"
"${TOOLS_BIN}/controller-gen" \
  crd:maxDescLen=0 \
  paths="./pkg/apis/..." \
  output:crd:artifacts:config="${ROOT}/artifacts/crd"
