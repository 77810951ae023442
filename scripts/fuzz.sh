#!/usr/bin/env bash
# Builds the libFuzzer target of the npurt C API (tests/fuzz) with clang,
# ASan and UBSan in build-fuzz/, and runs it for a bounded time from the
# seed corpus. `make fuzz` calls it. Installs clang (Debian packages) if it
# is missing, as scripts/install_system_deps.sh does, when run as root.
#
#   FUZZ_SECONDS=120 scripts/fuzz.sh     run time (default 120 s)
#   scripts/fuzz.sh <crash-file>...      re-run saved inputs only
#
# The working corpus grows in build-fuzz/corpus; crashes, leaks and timeouts
# are saved as build-fuzz/artifacts/{crash,leak,timeout}-<sha1>. Exits
# non-zero if the build fails or the fuzzer finds anything.
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
export PATH="$root/.venv/bin:$PATH"  # cmake and ninja from requirements-dev.txt
build="$root/build-fuzz"
seconds="${FUZZ_SECONDS:-120}"

# clang with libFuzzer and the sanitizer runtimes.
links_fuzzer() {
  command -v clang++ >/dev/null 2>&1 || return 1
  local probe
  probe="$(mktemp -d)"
  printf 'extern "C" int LLVMFuzzerTestOneInput(const unsigned char*, unsigned long) { return 0; }\n' \
    >"$probe/probe.cpp"
  clang++ -fsanitize=fuzzer,address,undefined "$probe/probe.cpp" -o "$probe/probe" \
    >/dev/null 2>&1
  local ok=$?
  rm -rf "$probe"
  return $ok
}
if ! links_fuzzer; then
  if [ "$(id -u)" -ne 0 ]; then
    echo "error: clang with libFuzzer is missing; run as root or: sudo apt-get install clang libclang-rt-dev" >&2
    exit 1
  fi
  echo "installing Debian packages: clang libclang-rt-dev"
  apt-get update -q
  DEBIAN_FRONTEND=noninteractive apt-get install -y -q clang libclang-rt-dev
  links_fuzzer || { echo "error: clang cannot link -fsanitize=fuzzer" >&2; exit 1; }
fi

echo "=== fuzz: configuring $build"
cmake -S "$root" -B "$build" -G Ninja \
  -DCMAKE_BUILD_TYPE=RelWithDebInfo \
  -DCMAKE_C_COMPILER=clang \
  -DCMAKE_CXX_COMPILER=clang++ \
  -DNPU_SANITIZE=address \
  -DNPU_BUILD_FUZZ=ON \
  -DNPU_BUILD_TESTS=OFF \
  -DNPU_BUILD_BENCHMARKS=OFF \
  -DNPU_BUILD_EXAMPLES=OFF \
  -DNPU_BUILD_TORCH=OFF >/dev/null
echo "=== fuzz: building npurt_fuzz"
cmake --build "$build" --target npurt_fuzz -j "${NPU_FUZZ_JOBS:-2}"

# Huge npuMalloc requests must fail with npuErrorMemoryAllocation, not abort.
export ASAN_OPTIONS="${ASAN_OPTIONS:-allocator_may_return_null=1:detect_leaks=1}"
export UBSAN_OPTIONS="${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}"
# A small device, so that inputs reach the capacity limit; no other NPU_SIM_*.
for v in $(env | sed -n 's/^\(NPU_SIM_[A-Z_]*\)=.*/\1/p'); do unset "$v"; done
export NPU_SIM_MEMORY_MB=64

mkdir -p "$build/corpus" "$build/artifacts"
flags=(-timeout=20 -rss_limit_mb=4096 -max_len=4096 -print_final_stats=1
  "-artifact_prefix=$build/artifacts/")
if [ $# -gt 0 ]; then
  exec "$build/tests/fuzz/npurt_fuzz" "${flags[@]}" "$@"
fi
echo "=== fuzz: running for ${seconds} s"
"$build/tests/fuzz/npurt_fuzz" "${flags[@]}" -max_total_time="$seconds" \
  "$build/corpus" "$root/tests/fuzz/seeds"
echo "=== fuzz: no crash, leak or timeout in ${seconds} s"
