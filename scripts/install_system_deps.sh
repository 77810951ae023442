#!/usr/bin/env bash
# Installs the Debian packages the native build needs, if missing. Idempotent.
# Runs apt-get only when something is missing; needs root for that.
# ccache is optional: not needed to build, only to build fast (the test,
# packaging and worktree builds compile the same translation units: Note
# [Shared compiler cache] in the Makefile). It is installed when run as root,
# and a failure to install it is a warning, not an error.
set -euo pipefail
installed() { dpkg-query -W -f='${Status}' "$1" 2>/dev/null | grep -q "install ok installed"; }
packages=(libgtest-dev libgmock-dev libbenchmark-dev)
missing=()
for p in "${packages[@]}"; do
  installed "$p" || missing+=("$p")
done
if [ ${#missing[@]} -ne 0 ]; then
  if [ "$(id -u)" -ne 0 ]; then
    echo "error: missing Debian packages: ${missing[*]}; run as root or: sudo apt-get install ${missing[*]}" >&2
    exit 1
  fi
  echo "installing Debian packages: ${missing[*]}"
  apt-get update -q
  DEBIAN_FRONTEND=noninteractive apt-get install -y -q "${missing[@]}"
fi
if ! command -v ccache >/dev/null && [ "$(id -u)" -eq 0 ]; then
  echo "installing ccache (optional)"
  if ! { apt-get update -q && DEBIAN_FRONTEND=noninteractive apt-get install -y -q ccache; }; then
    echo "warning: could not install ccache; builds will not share compiled objects" >&2
  fi
fi
