#!/usr/bin/env bash
# Regenerates everything derived from the types in pkg/apis/cache/v1alpha1
# and pkg/apis/cache/v1beta1:
# deepcopy and register code, the clientset, listers, informers and apply
# configurations under pkg/generated, and the CRD under artifacts/crd and its
# copy in the Helm chart (charts/memcached-operator/files), beside which it
# copies the two admission policies of artifacts/policy and the Karmada
# interpreter. The
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
  crd \
  paths="./pkg/apis/..." \
  output:crd:artifacts:config="${ROOT}/artifacts/crd"

# Markers cannot bound the Kubernetes types the spec embeds, nor a map's
# values and keys; crdbounds bounds what they leave, and fails on a field it
# has no bound for.
tool::build crdbounds ./cmd/crdbounds
CRD="${ROOT}/artifacts/crd/cache.kubelite.io_memcacheds.yaml"
"${TOOLS_BIN}/crdbounds" -crd "${CRD}"

# controller-gen cannot express a conversion webhook. The shipped CRD points
# at the in-cluster Service from the start, without a CA bundle, so that
# until the operator has written the bundle a read in the other version
# fails instead of being converted by renaming apiVersion; the operator
# rewrites the block (a URL instead of the Service with --webhook-url).
awk '
  { print }
  /^spec:$/ && !done {
    print "  conversion:"
    print "    strategy: Webhook"
    print "    webhook:"
    print "      clientConfig:"
    print "        service:"
    print "          name: memcached-operator-webhook"
    print "          namespace: memcached-operator"
    print "          path: /convert"
    print "          port: 443"
    print "      conversionReviewVersions:"
    print "      - v1"
    done = 1
  }
' "${CRD}" > "${CRD}.tmp"
mv "${CRD}.tmp" "${CRD}"

# The chart cannot read files outside its directory, so it ships a copy; its
# template sets the release's namespace and Service (TestChartMatchesArtifacts
# in hack/helm compares the two renderings).
cp "${CRD}" "${ROOT}/charts/memcached-operator/files/cache.kubelite.io_memcacheds.yaml"
# It ships copies of the two admission policies of artifacts/policy and of
# the Karmada interpreter too, for the same reason.
cp "${ROOT}/artifacts/policy/policy.yaml" "${ROOT}/charts/memcached-operator/files/pod_policy.yaml"
cp "${ROOT}/artifacts/policy/defaults/policy.yaml" "${ROOT}/charts/memcached-operator/files/platform_defaults_policy.yaml"
cp "${ROOT}/artifacts/karmada/resource_interpreter.yaml" "${ROOT}/charts/memcached-operator/files/karmada_resource_interpreter.yaml"
