#!/usr/bin/env bash
# Runs a make target, FLAKE_TARGET (test-suites: the integration and fault
# suites side by side), FLAKE_RUNS times in a row while a busy loop takes
# one core, to bring out the tests that fail only on a loaded machine. It
# stops at the first run that fails and names it. Each run's output goes
# to _output/flakes/<start time>-<suffix>/run-<n>.log.
#
# `make test-flakes` runs it; `make test-flakes FLAKE_RUNS=2
# FLAKE_TARGET=verify-golden` shows the loop in seconds.
set -o errexit
set -o nounset
set -o pipefail

source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
cd "${ROOT}"

runs="${FLAKE_RUNS:-5}"
target="${FLAKE_TARGET:-test-suites}"
make="${MAKE:-make}"
if ! [[ "${runs}" =~ ^[1-9][0-9]*$ ]]; then
  echo "FLAKE_RUNS must be a positive whole number, got '${runs}'" >&2
  exit 2
fi

mkdir -p _output/flakes
dir="$(mktemp -d "_output/flakes/$(date -u +%Y%m%dT%H%M%SZ)-XXXX")"

# The load: a loop that spins on one core for as long as this script runs.
# It looks for this script ($$, the script's pid in a subshell too) on
# every turn, so it ends by itself even when the script is killed with
# SIGKILL, which no trap sees; the EXIT trap ends it on success, on
# failure and on Ctrl-C (an INT, TERM or HUP trap exits, which runs it).
( while kill -0 "$$" 2>/dev/null; do :; done ) &
load=$!
stop_load() {
  kill "${load}" 2>/dev/null || true
  wait "${load}" 2>/dev/null || true
  echo "Load generator (pid ${load}) stopped."
}
trap stop_load EXIT
trap 'exit 130' INT
trap 'exit 143' TERM
trap 'exit 129' HUP

duration() { printf '%dm%02ds' $(($1 / 60)) $(($1 % 60)); }

echo "make ${target}, ${runs} runs in a row, with one core kept busy by pid ${load}; output in ${dir}/"
for ((i = 1; i <= runs; i++)); do
  # A run without the load would prove less than it claims.
  if ! kill -0 "${load}" 2>/dev/null; then
    echo "The load generator has stopped before run ${i}." >&2
    exit 1
  fi
  log="${dir}/run-${i}.log"
  start=${SECONDS}
  if "${make}" --no-print-directory "${target}" >"${log}" 2>&1; then
    echo "Run ${i} of ${runs} passed in $(duration $((SECONDS - start))): ${log}"
  else
    status=$?
    echo "Run ${i} of ${runs} FAILED (make exited ${status}) after $(duration $((SECONDS - start))): ${log}" >&2
    grep -E '^(--- FAIL|FAIL|panic:)' "${log}" >&2 || tail -n 20 "${log}" >&2
    exit 1
  fi
done
echo "All ${runs} runs of make ${target} passed under load."
