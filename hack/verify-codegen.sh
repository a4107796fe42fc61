#!/usr/bin/env bash
# Fails when generated code or the CRD is out of date with types.go. It runs
# hack/update-codegen.sh on a scratch copy of the tree and diffs the result,
# so the working tree is never touched.
set -o errexit
set -o nounset
set -o pipefail

source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

SCRATCH="$(mktemp -d)"
trap 'rm -rf "${SCRATCH}"' EXIT

# Copy what git would see (tracked and untracked, not ignored files): build
# output at the root stays out of the scratch copy.
git -C "${ROOT}" ls-files -z --cached --others --exclude-standard |
  tar -C "${ROOT}" --null -T - --ignore-failed-read -cf - 2>/dev/null | tar -C "${SCRATCH}" -xf -
# The scratch copy shares the real tools directory, so tools are built once.
# It must exist before the link: a dangling link makes the build's mkdir fail.
mkdir -p "${TOOLS_BIN}" "${SCRATCH}/_output/tools"
ln -s "${TOOLS_BIN}" "${SCRATCH}/_output/tools/bin"
"${SCRATCH}/hack/update-codegen.sh" >/dev/null

status=0
for dir in pkg/apis pkg/generated artifacts/crd charts/memcached-operator/files; do
  if ! diff -Naupr "${ROOT}/${dir}" "${SCRATCH}/${dir}"; then
    status=1
  fi
done
if [[ ${status} -ne 0 ]]; then
  echo "Generated files are out of date. Run hack/update-codegen.sh." >&2
  exit 1
fi
echo "Generated files are up to date."
