#!/usr/bin/env bash
# Fails when git tracks build output: an executable binary (ELF, Mach-O or
# PE, recognised by its first bytes) or any file larger than 1 MiB. Binaries,
# profiles and bench output belong under the ignored _output/ and bin/.
set -o errexit
set -o nounset
set -o pipefail

source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
cd "${ROOT}"

readonly max_bytes=$((1024 * 1024))
status=0
while IFS= read -r -d '' f; do
  [[ -f "${f}" ]] || continue # deleted in the work tree, not yet committed
  size=$(stat -c %s "${f}")
  if (( size > max_bytes )); then
    echo "${f}: ${size} bytes, more than 1 MiB" >&2
    status=1
  fi
  magic="$(head -c 4 "${f}" | od -An -tx1 | tr -d ' \n')"
  case "${magic}" in
    7f454c46 | cffaedfe | cefaedfe | feedfacf | feedface | 4d5a*)
      echo "${f}: an executable binary" >&2
      status=1
      ;;
  esac
done < <(git ls-files -z)
if [[ ${status} -ne 0 ]]; then
  echo "Build output is tracked by git; remove it and build into _output/ or bin/." >&2
  exit 1
fi
echo "No binaries or large files are tracked."
