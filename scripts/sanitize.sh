#!/usr/bin/env bash
# Sanitizer builds and runs. `make sanitize` runs `ci`, `make sanitize-full`
# runs `full`.
#
#   scripts/sanitize.sh address      ASan+UBSan (gcc) in build-asan/: the runtime's
#                                    conformance suite (leak checking on)
#   scripts/sanitize.sh thread       TSan in build-tsan/: the runtime's conformance suite
#   scripts/sanitize.sh core-thread  TSan in build-tsan/: the core suite (tests/cpp/core)
#                                    against c10/torch_cpu from the wheel (uninstrumented);
#                                    suppressions: tests/sanitizers/tsan.supp
#   scripts/sanitize.sh python       ASan+UBSan in build-asan/: everything (npurt, core,
#                                    aten, _C), the core suite and the whole Python suite
#   scripts/sanitize.sh python-ci    the same with the CI subset of the Python suite: the
#                                    tests that run in-process (see PYTEST_CI_ARGS)
#   scripts/sanitize.sh ci           address, python-ci, thread, core-thread (default)
#   scripts/sanitize.sh full         address, python, thread, core-thread
#   scripts/sanitize.sh all          same as ci (the former name)
#
# Build directories are at the repository root; each sanitizer has one, shared
# by its runs, and a run builds only the targets it needs. The torch backend's
# libraries go into a copy of the Python package, build-*/pkg/torch_npu
# (-DNPU_PACKAGE_DIR), so the normal build's torch_npu/lib/*.so and
# torch_npu/_C*.so are never overwritten. The stress tests are scaled down
# through NPURT_STRESS_SCALE and NPU_CORE_STRESS_SCALE (sanitizers are slow on
# small machines); set them in the environment to override.
# Exits non-zero if any build or test fails.
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
export PATH="$root/.venv/bin:$PATH"  # cmake and ninja from requirements-dev.txt
py="$root/.venv/bin/python"
jobs="${NPU_SANITIZE_JOBS:-2}"
# Options for our own sanitizer runs; each run below adds what it needs.
user_asan="${ASAN_OPTIONS:-}"
user_ubsan="${UBSAN_OPTIONS:-}"
user_tsan="${TSAN_OPTIONS:-}"

timed() {  # timed <label> <command...>: runs it, prints its wall and CPU time
  local label="$1" TIMEFORMAT
  shift
  TIMEFORMAT="=== ${label}: %0R s wall, %0U s user + %0S s sys CPU"
  time "$@"
}

# A copy of the Python package (sources only) for a torch-backend sanitizer
# build to put its libraries into; refreshed on every run, libraries kept.
package_copy() {  # package_copy <dir> -> prints the package directory
  local pkg="$root/$1/pkg/torch_npu"
  mkdir -p "$pkg"
  (cd "$root/torch_npu" && find . -name __pycache__ -prune -o -name '*.so' -prune -o \
    -type f -name '*.py' -print) | while read -r f; do
    mkdir -p "$pkg/$(dirname "$f")"
    cp -p "$root/torch_npu/$f" "$pkg/$f"
  done
  echo "$pkg"
}

configure() {  # configure <dir> <sanitizer>: torch backend on, package copy
  local dir="$1" sanitizer="$2" pkg
  pkg="$(package_copy "$dir")"
  cmake -S "$root" -B "$root/$dir" -G Ninja \
    -DCMAKE_BUILD_TYPE=RelWithDebInfo \
    -DNPU_SANITIZE="$sanitizer" \
    -DNPU_BUILD_TESTS=ON \
    -DNPU_BUILD_BENCHMARKS=OFF \
    -DNPU_BUILD_EXAMPLES=OFF \
    -DNPU_BUILD_TORCH=ON \
    -DPython3_EXECUTABLE="$py" \
    -DNPU_PACKAGE_DIR="$pkg" >/dev/null
}

# --- the runtime alone (npurt and ACL conformance suites) ---------------------
run_runtime() {
  local sanitizer="$1" dir="$2" scale="$3"
  echo "=== ${sanitizer}: runtime in ${dir}"
  configure "$dir" "$sanitizer"
  cmake --build "$root/$dir" -j "$jobs" --target npurt_conformance_test npurt_internal_test npurt_exit_helper \
    acl_conformance_test acl_c_program
  echo "=== ${sanitizer}: npurt and ACL suites (NPURT_STRESS_SCALE=${scale})"
  # Huge allocations must fail with npuErrorMemoryAllocation, not abort.
  local suite
  for suite in npurt acl; do
    ASAN_OPTIONS="${user_asan:-allocator_may_return_null=1:detect_leaks=1:abort_on_error=0}" \
    UBSAN_OPTIONS="${user_ubsan:-print_stacktrace=1:halt_on_error=1}" \
    TSAN_OPTIONS="${user_tsan:-allocator_may_return_null=1:halt_on_error=1:second_deadlock_stack=1}" \
    NPURT_STRESS_SCALE="${NPURT_STRESS_SCALE:-$scale}" \
      ctest --test-dir "$root/$dir/tests/cpp/$suite" --output-on-failure -j "$jobs" --timeout 300
  done
}

# --- the core suite under TSan -----------------------------------------------
# Our code (npurt, libnpu_core, the tests) is instrumented; c10 and torch_cpu
# are the wheel's, built without TSan. TSan sees their pthread calls
# (interceptors) but not their memory accesses or their own atomics; the
# suppressions file lists, with a reason each, the reports that can only come
# from that, all inside the torch libraries.
run_core_thread() {
  local dir=build-tsan
  echo "=== thread: core suite in ${dir}"
  configure "$dir" thread
  cmake --build "$root/$dir" -j "$jobs" --target npu_core_tests
  echo "=== thread: core suite (NPU_CORE_STRESS_SCALE=${NPU_CORE_STRESS_SCALE:-0.1})"
  TSAN_OPTIONS="${user_tsan:-allocator_may_return_null=1:halt_on_error=1:second_deadlock_stack=1:suppressions=$root/tests/sanitizers/tsan.supp}" \
  NPU_CORE_STRESS_SCALE="${NPU_CORE_STRESS_SCALE:-0.1}" \
    ctest --test-dir "$root/$dir/tests/cpp/core" --output-on-failure -j "$jobs" --timeout 600
}

# --- everything under ASan+UBSan, with the Python suite ---------------------
# Python and torch are not instrumented, so the ASan runtime must be the first
# library of the process: LD_PRELOAD (with libubsan, which gcc links
# separately). Subprocesses of the suite inherit the environment, so they
# preload it too, and they import torch_npu from the package directory the
# parent imported it from (tests/python/conftest.py: PKG_ROOT).
asan_env() {
  local preload
  preload="$(gcc -print-file-name=libasan.so):$(gcc -print-file-name=libubsan.so)"
  # detect_leaks=0: CPython and torch keep allocations alive until exit by
  #   design (interned objects, registries, the dispatcher's tables), and
  #   LeakSanitizer would report them at every interpreter exit. The runtime's
  #   own leak checking is in the `address` run above (detect_leaks=1).
  # allocator_may_return_null=1: huge allocations (tests of out-of-memory
  #   paths) must fail with an error, not abort the process.
  # abort_on_error=0, halt_on_error: the first report fails the run, with
  #   the report on stderr (the test shows it).
  export LD_PRELOAD="$preload"
  export ASAN_OPTIONS="${user_asan:-detect_leaks=0:allocator_may_return_null=1:abort_on_error=0:halt_on_error=1:detect_stack_use_after_return=0}"
  export UBSAN_OPTIONS="${user_ubsan:-print_stacktrace=1:halt_on_error=1}"
}

# Tests of the Python suite not run under ASan, each with its reason.
PYTEST_DESELECT=(
)

# The CI subset of the Python suite (the whole suite is `make sanitize-full`):
# the tests that run in-process, selected by tests/sanitizers/
# pytest_inprocess_only.py (which says why the others are left out).
PYTEST_CI_ARGS=(-p pytest_inprocess_only)

run_python() {  # run_python full|ci
  local which="$1" dir=build-asan pkg="$root/build-asan/pkg/torch_npu"
  echo "=== address: everything in ${dir}"
  configure "$dir" address
  cmake --build "$root/$dir" -j "$jobs" --target npu_python npu_core_tests
  (
    asan_env
    echo "=== address: core suite"
    NPU_CORE_STRESS_SCALE="${NPU_CORE_STRESS_SCALE:-0.5}" \
      ctest --test-dir "$root/$dir/tests/cpp/core" --output-on-failure -j "$jobs" --timeout 600
    # Run from the package copy's parent: `python -m pytest` puts the working
    # directory first on sys.path, so this torch_npu is the one imported.
    cd "$pkg/.."
    export PYTHONPATH="$pkg/.."
    "$py" -c 'import sys, torch_npu; p = torch_npu.__file__; print("torch_npu from", p); sys.exit(0 if p.startswith(sys.argv[1]) else 1)' "$pkg"
    local args=()
    for d in "${PYTEST_DESELECT[@]}"; do args+=(--deselect "$d"); done
    if [ "$which" = ci ]; then
      echo "=== address: Python suite, CI subset (${PYTEST_CI_ARGS[*]})"
      PYTHONPATH="$PYTHONPATH:$root/tests/sanitizers" "$py" -m pytest "$root/tests/python" -q -p no:cacheprovider --rootdir "$root/tests/python" \
        "${PYTEST_CI_ARGS[@]}" "${args[@]}"
    else
      echo "=== address: Python suite"
      "$py" -m pytest "$root/tests/python" -q -p no:cacheprovider --rootdir "$root/tests/python" "${args[@]}"
    fi
  )
}

run() {
  case "$1" in
    address) timed "address (runtime)" run_runtime address build-asan 0.2 ;;
    thread) timed "thread (runtime)" run_runtime thread build-tsan 0.02 ;;
    core-thread) timed "thread (core)" run_core_thread ;;
    python) timed "address (everything, Python suite)" run_python full ;;
    python-ci) timed "address (everything, Python CI subset)" run_python ci ;;
    *)
      echo "usage: $0 [address|thread|core-thread|python|python-ci|ci|full]" >&2
      exit 2
      ;;
  esac
}

case "${1:-ci}" in
  ci | all) for m in address python-ci thread core-thread; do run "$m"; done ;;
  full) for m in address python thread core-thread; do run "$m"; done ;;
  *) run "$1" ;;
esac
echo "=== sanitizers: all tests passed"
