#!/usr/bin/env bash
# Shared helpers for hack/ scripts. Source it; it sets ROOT and TOOLS_BIN and
# defines tool::build.

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
TOOLS_MOD="${ROOT}/hack/tools"
TOOLS_BIN="${ROOT}/_output/tools/bin"
export GOBIN="${TOOLS_BIN}"

# tool::build NAME PACKAGE builds a tool pinned by hack/tools/go.mod into
# TOOLS_BIN. go build is a no-op when the cached binary is current.
tool::build() {
  local name="$1" pkg="$2"
  mkdir -p "${TOOLS_BIN}"
  (cd "${TOOLS_MOD}" && go build -o "${TOOLS_BIN}/${name}" "${pkg}")
}

# tool::module_dir MODULE prints the module cache directory of a module pinned
# by hack/tools/go.mod, downloading it first: on an empty module cache
# `go list -m` prints an empty Dir rather than fetching the module.
tool::module_dir() {
  (cd "${TOOLS_MOD}" && go mod download "$1" && go list -m -f '{{.Dir}}' "$1")
}
