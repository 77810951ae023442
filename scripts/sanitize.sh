#!/usr/bin/env bash
# Builds the runtime and its GoogleTest suite under AddressSanitizer (+UBSan)
# and ThreadSanitizer, and runs the suite with each. `make sanitize` calls it.
#
#   scripts/sanitize.sh            both builds (build-asan/, build-tsan/)
#   scripts/sanitize.sh address    only ASan+UBSan
#   scripts/sanitize.sh thread     only TSan
#
# Build directories are at the repository root. Benchmarks, examples and the
# torch backend are not built (the sanitizers cover the runtime; TSan cannot
# run torch). The stress tests are scaled down through NPURT_STRESS_SCALE
# (TSan is slow on small machines); set it in the environment to override.
# Exits non-zero if any build or test fails.
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
export PATH="$root/.venv/bin:$PATH"  # cmake and ninja from requirements-dev.txt
jobs="${NPU_SANITIZE_JOBS:-2}"

# Huge allocations must fail with npuErrorMemoryAllocation, not abort.
export ASAN_OPTIONS="${ASAN_OPTIONS:-allocator_may_return_null=1:detect_leaks=1:abort_on_error=0}"
export UBSAN_OPTIONS="${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}"
export TSAN_OPTIONS="${TSAN_OPTIONS:-allocator_may_return_null=1:halt_on_error=1:second_deadlock_stack=1}"

run_one() {
  local sanitizer="$1" dir="$2" scale="$3"
  echo "=== ${sanitizer}: configuring ${dir}"
  cmake -S "$root" -B "$root/$dir" -G Ninja \
    -DCMAKE_BUILD_TYPE=RelWithDebInfo \
    -DNPU_SANITIZE="$sanitizer" \
    -DNPU_BUILD_TESTS=ON \
    -DNPU_BUILD_BENCHMARKS=OFF \
    -DNPU_BUILD_EXAMPLES=OFF \
    -DNPU_BUILD_TORCH=OFF
  echo "=== ${sanitizer}: building"
  cmake --build "$root/$dir" -j "$jobs"
  echo "=== ${sanitizer}: testing (NPURT_STRESS_SCALE=${scale})"
  NPURT_STRESS_SCALE="${NPURT_STRESS_SCALE:-$scale}" \
    ctest --test-dir "$root/$dir" --output-on-failure -j "$jobs" --timeout 300
}

case "${1:-all}" in
  address) run_one address build-asan 0.2 ;;
  thread) run_one thread build-tsan 0.02 ;;
  all)
    run_one address build-asan 0.2
    run_one thread build-tsan 0.02
    ;;
  *)
    echo "usage: $0 [address|thread|all]" >&2
    exit 2
    ;;
esac
echo "=== sanitizers: all tests passed"
