#!/usr/bin/env bash
# The packaging test (`make test-packaging`, run by CI): the committed HEAD,
# built as a wheel from a clone, installed with torch into a fresh virtual
# environment once the clone and its build trees are deleted, then used from
# a directory outside every tree, with no PYTHONPATH:
#   - the package's native libraries are all inside it, with relative
#     RUNPATHs, and export the symbols its headers promise;
#   - an op, ExternalStream over an ACL stream (tests/packaging/check_installed.py);
#   - examples/interop built with NpuExtension against the installed package
#     (ACL stream -> c10_npu::getStreamFromExternal -> torch ops ->
#     aclrtSynchronizeStream), and run.
# Everything lives in build-packaging/, recreated on every run; the wheel's
# compilations go through ccache (shared between runs and trees, see below). Uncommitted
# changes are not tested: commit first.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
dev_py="$root/.venv/bin/python"
base_py="$("$dev_py" -c 'import sys; print(sys._base_executable)')"
work="$root/build-packaging"
commit="$(git -C "$root" rev-parse HEAD)"
step() { echo "=== packaging (${SECONDS} s): $*"; }  # time since the start

rm -rf "$work"
mkdir -p "$work/dist" "$work/run"

step "clone of $commit"
git clone -q --no-checkout "$root" "$work/src"
git -C "$work/src" checkout -q "$commit"

step "wheel (pip wheel --no-build-isolation)"
# Note [Shared compiler cache] (Makefile): the clone reaches the development
# venv through a .venv link of its own, so that torch's headers have the same
# path relative to the clone as to the main tree, and ccache serves the
# wheel's compilations from the main build's. The link is not part of the
# wheel (pip builds from the clone's files, and .venv is not a package). As
# in the Makefile, the caller's own ccache settings win.
ln -s "$root/.venv" "$work/src/.venv"
(cd "$work/src" && PATH="$work/src/.venv/bin:$PATH" CCACHE_BASEDIR="${CCACHE_BASEDIR:-$root}" \
  CCACHE_NOHASHDIR="${CCACHE_NOHASHDIR:-1}" \
  "$work/src/.venv/bin/python" -m pip wheel -q --no-build-isolation --no-deps -w "$work/dist" .)
wheel="$(ls "$work/dist"/*.whl)"
echo "built $(basename "$wheel") ($(du -h "$wheel" | cut -f1))"

# The example and the check are inputs of the test, not part of the source tree.
cp -r "$work/src/examples/interop" "$work/example"
cp "$work/src/tests/packaging/check_installed.py" "$work/run/"

step "deleting the clone and its build trees"
rm -rf "$work/src"

step "fresh venv with torch==2.13.0 and the wheel"
"$base_py" -m venv "$work/venv"
venv_py="$work/venv/bin/python"
# --no-compile: byte-compiling torch's thousands of modules is a large part of an
# install's time, and not what this test is about.
if ! "$venv_py" -m pip install -q --no-compile torch==2.13.0 "$wheel" setuptools >"$work/pip.log" 2>&1; then
  cat "$work/pip.log"
  exit 1
fi

cd "$work/run"
unset PYTHONPATH
export TORCH_DEVICE_BACKEND_AUTOLOAD=1
step "installed package: libraries, symbols, op, ExternalStream"
"$venv_py" check_installed.py

step "examples/interop built with NpuExtension against the installed package"
# torch's BuildExtension compiles through ccache when there is one.
(cd "$work/example" && CCACHE_NOHASHDIR=1 "$venv_py" setup.py -q build_ext --inplace >/dev/null)
(cd "$work/example" && "$venv_py" interop.py)
# Again with npurt's race detector on: the example synchronizes PyTorch's work
# and the library's correctly, so nothing may be reported (a report fails the
# racing task, and interop.py with it).
(cd "$work/example" && NPU_SIM_RACECHECK=1 "$venv_py" interop.py)
step "OK"
