#!/usr/bin/env bash
# Builds the libFuzzer targets (tests/fuzz) with clang, ASan and UBSan in
# build-fuzz/, and runs each for a share of a bounded time from its seed
# corpus. `make fuzz` calls it. Installs clang (Debian packages) if it is
# missing, as scripts/install_system_deps.sh does, when run as root.
#
#   npurt_fuzz       the npurt C API (runtime only)
#   stream_id_fuzz   NPUStream::unpack3 / getStreamFromExternal (links
#                    libnpu_core, built here with clang, and c10/torch_cpu
#                    from the wheel, uninstrumented)
#
#   FUZZ_SECONDS=120 scripts/fuzz.sh          total run time (default 120 s),
#                                             split 3:1 npurt_fuzz:stream_id_fuzz
#   scripts/fuzz.sh <crash-file>...           re-run saved inputs (npurt_fuzz)
#   FUZZ_TARGET=stream_id_fuzz scripts/fuzz.sh <crash-file>...
#
# Each target's working corpus grows in build-fuzz/corpus/<target> (the
# npurt target's in build-fuzz/corpus, as before); crashes, leaks and timeouts
# are saved as build-fuzz/artifacts/<target>-{crash,leak,timeout}-<sha1>.
# Exits non-zero if the build fails or a fuzzer finds anything.
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
# The torch backend is configured so that libnpu_core can be built; its
# libraries go into a package copy under build-fuzz/, never into torch_npu/.
cmake -S "$root" -B "$build" -G Ninja \
  -DCMAKE_BUILD_TYPE=RelWithDebInfo \
  -DCMAKE_C_COMPILER=clang \
  -DCMAKE_CXX_COMPILER=clang++ \
  -DNPU_SANITIZE=address \
  -DNPU_BUILD_FUZZ=ON \
  -DNPU_BUILD_TESTS=OFF \
  -DNPU_BUILD_BENCHMARKS=OFF \
  -DNPU_BUILD_EXAMPLES=OFF \
  -DNPU_BUILD_TORCH=ON \
  -DPython3_EXECUTABLE="$root/.venv/bin/python" \
  -DNPU_PACKAGE_DIR="$build/pkg/torch_npu" >/dev/null
echo "=== fuzz: building npurt_fuzz stream_id_fuzz"
cmake --build "$build" --target npurt_fuzz stream_id_fuzz -j "${NPU_FUZZ_JOBS:-2}"

# Huge npuMalloc requests must fail with npuErrorMemoryAllocation, not abort.
export ASAN_OPTIONS="${ASAN_OPTIONS:-allocator_may_return_null=1:detect_leaks=1}"
export UBSAN_OPTIONS="${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}"
# A small device, so that inputs reach the capacity limit; no other NPU_SIM_*.
for v in $(env | sed -n 's/^\(NPU_SIM_[A-Z_]*\)=.*/\1/p'); do unset "$v"; done
export NPU_SIM_MEMORY_MB=64

mkdir -p "$build/corpus" "$build/corpus/stream_id_fuzz" "$build/artifacts"
flags=(-timeout=20 -rss_limit_mb=4096 -max_len=4096 -print_final_stats=1)
if [ $# -gt 0 ]; then
  target="${FUZZ_TARGET:-npurt_fuzz}"
  exec "$build/tests/fuzz/$target" "${flags[@]}" "-artifact_prefix=$build/artifacts/$target-" "$@"
fi

# 3/4 of the time for the C API (a large state space), 1/4 for the ids.
stream_seconds=$((seconds / 4))
[ "$stream_seconds" -ge 1 ] || stream_seconds=1
npurt_seconds=$((seconds - stream_seconds))
[ "$npurt_seconds" -ge 1 ] || npurt_seconds=1

echo "=== fuzz: npurt_fuzz for ${npurt_seconds} s"
"$build/tests/fuzz/npurt_fuzz" "${flags[@]}" "-artifact_prefix=$build/artifacts/npurt_fuzz-" \
  -max_total_time="$npurt_seconds" "$build/corpus" "$root/tests/fuzz/seeds"

# libnpu_core pulls in c10 and torch_cpu: CPython is not involved, but torch's
# static registries are reachable at exit, so leak checking stays on.
echo "=== fuzz: stream_id_fuzz for ${stream_seconds} s"
"$build/tests/fuzz/stream_id_fuzz" "${flags[@]}" "-artifact_prefix=$build/artifacts/stream_id_fuzz-" \
  -max_total_time="$stream_seconds" "$build/corpus/stream_id_fuzz" "$root/tests/fuzz/stream_id_seeds"
echo "=== fuzz: no crash, leak or timeout in ${seconds} s"
