#!/usr/bin/env bash
# Installs the Debian packages the native build needs, if missing. Idempotent.
# Runs apt-get only when something is missing; needs root for that.
# ccache is not needed to build, only to build fast: the test, packaging and
# worktree builds compile the same translation units (Note [Shared compiler
# cache] in the Makefile). Without root it is skipped, not an error.
set -euo pipefail
packages=(libgtest-dev libgmock-dev libbenchmark-dev)
optional=(ccache)
if [ "$(id -u)" -eq 0 ]; then packages+=("${optional[@]}"); fi
missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -eq 0 ]; then exit 0; fi
if [ "$(id -u)" -ne 0 ]; then
  echo "error: missing Debian packages: ${missing[*]}; run as root or: sudo apt-get install ${missing[*]}" >&2
  exit 1
fi
echo "installing Debian packages: ${missing[*]}"
apt-get update -q
DEBIAN_FRONTEND=noninteractive apt-get install -y -q "${missing[@]}"
