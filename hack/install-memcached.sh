#!/usr/bin/env bash
# Installs the memcached that make test-memcached runs, from the Debian
# package of this machine's apt sources, into _output/memcached without
# root: apt-get download fetches the .deb and dpkg-deb unpacks it. Debian
# builds memcached with TLS, as the official image does. The libraries it
# links (libevent, libssl, libsasl2) must be installed; the script says
# which are missing. Prints the binary's path.
set -o errexit -o nounset -o pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
DEST="${ROOT}/_output/memcached"
BIN="${DEST}/usr/bin/memcached"

if [[ ! -x "${BIN}" ]]; then
  for tool in apt-get dpkg-deb; do
    command -v "${tool}" >/dev/null || { echo "install-memcached: ${tool} not found; this needs a Debian-based machine" >&2; exit 1; }
  done
  work="$(mktemp -d)"
  chmod 755 "${work}"   # apt-get download writes as the _apt user
  trap 'rm -rf "${work}"' EXIT
  (cd "${work}" && apt-get download memcached >&2)
  mkdir -p "${DEST}"
  dpkg-deb -x "${work}"/memcached_*.deb "${DEST}"
fi
if missing="$(ldd "${BIN}" | grep 'not found')"; then
  echo "install-memcached: ${BIN} needs libraries this machine lacks (apt-get install them):" >&2
  echo "${missing}" >&2
  exit 1
fi
"${BIN}" -V >&2
echo "${BIN}"
