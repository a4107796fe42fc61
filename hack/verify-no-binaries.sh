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
# One git process for every size: `git ls-files -s` gives each blob (mode,
# blob, stage, then a tab and the path), and cat-file sizes them all.
while read -r blob size path; do
  if (( size > max_bytes )); then
    echo "${path}: ${size} bytes, more than 1 MiB" >&2
    status=1
  fi
done < <(git ls-files -s | awk -F '\t' '{split($1, m, " "); print m[2], $2}' |
  git cat-file --batch-check='%(objectname) %(objectsize) %(rest)')
# Executables hold NUL bytes, so git's own test for text (i/-text: a NUL in
# the first 8000 bytes) finds every candidate; only those are read.
while IFS=$'\t' read -r eol path; do
  [[ ${eol} == i/-text* ]] || continue
  # head closes the pipe early; git's SIGPIPE is expected, not a failure.
  magic="$({ git cat-file blob ":${path}" || true; } | head -c 4 | od -An -tx1 | tr -d ' \n')"
  case "${magic}" in
    7f454c46 | cffaedfe | cefaedfe | feedfacf | feedface | 4d5a*)
      echo "${path}: an executable binary" >&2
      status=1
      ;;
  esac
done < <(git ls-files --eol)
if [[ ${status} -ne 0 ]]; then
  echo "Build output is tracked by git; remove it and build into _output/ or bin/." >&2
  exit 1
fi
echo "No binaries or large files are tracked."
