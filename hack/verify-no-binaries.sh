#!/usr/bin/env bash
# Fails when git tracks build output: an executable binary (ELF, Mach-O or
# Windows PE, recognised by its first bytes) or any file larger than 1 MiB.
# It reads the blobs in the index, which is what a commit would hold.
# Binaries, profiles and bench output belong under the ignored _output/
# and bin/.
set -o errexit
set -o nounset
set -o pipefail

source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
cd "${ROOT}"

readonly max_bytes=$((1024 * 1024))
status=0
# Each line of `git ls-files -s`: mode, blob, stage, then a tab and the path.
while IFS=$'\t' read -r meta path; do
  blob="$(cut -d ' ' -f 2 <<<"${meta}")"
  size="$(git cat-file -s "${blob}")"
  if (( size > max_bytes )); then
    echo "${path}: ${size} bytes, more than 1 MiB" >&2
    status=1
  fi
  # head closes the pipe early; git's SIGPIPE is expected, not a failure.
  magic="$({ git cat-file blob "${blob}" || true; } | head -c 4 | od -An -tx1 | tr -d ' \n')"
  case "${magic}" in
    7f454c46 | cffaedfe | cefaedfe | feedfacf | feedface)
      echo "${path}: an executable binary" >&2
      status=1
      ;;
    4d5a*)
      # "MZ" starts a PE file but could start a text file too: count it
      # only when its first 512 bytes are not all text.
      if { git cat-file blob "${blob}" || true; } | head -c 512 | LC_ALL=C grep -q '[^[:print:][:space:]]'; then
        echo "${path}: an executable binary" >&2
        status=1
      fi
      ;;
  esac
done < <(git ls-files -s)
if [[ ${status} -ne 0 ]]; then
  echo "Build output is tracked by git; remove it and build into _output/ or bin/." >&2
  exit 1
fi
echo "No binaries or large files are tracked."
