// Parsing of PYTORCH_NPU_ALLOC_CONF. See NPUAllocatorConfig.h.
#include "core/NPUAllocatorConfig.h"

#include <c10/util/Exception.h>
#include <c10/util/llvmMathExtras.h>

#include <algorithm>
#include <atomic>
#include <charconv>
#include <cstdlib>
#include <limits>
#include <mutex>
#include <optional>
#include <vector>

#include "core/NPUException.h"

namespace c10_npu::NPUCachingAllocator {
namespace {

constexpr size_t kMiB = size_t{1} << 20;
// c10's bound of large_segment_size_mb: a segment must hold any request below
// kMinLargeAlloc (10 MiB).
constexpr size_t kMinLargeSegmentSizeMb = 10;
// torch_npu's bounds of segment_size_mb.
constexpr size_t kMinLegacySegmentSizeMb = 20;
constexpr size_t kMaxLegacySegmentSizeMb = 512;
// npurt's virtual-memory granularity: expandable pages are multiples of it.
constexpr size_t kPageGranularity = size_t{2} << 20;

std::string_view trim(std::string_view s) {
  const auto first = s.find_first_not_of(" \t");
  if (first == std::string_view::npos) return {};
  const auto last = s.find_last_not_of(" \t");
  return s.substr(first, last - first + 1);
}

// Splits at `sep` outside brackets: list values such as
// roundup_power2_divisions:[256:1,512:2] stay whole.
size_t findOutsideBrackets(std::string_view s, char sep, size_t start) {
  int depth = 0;
  for (size_t i = start; i < s.size(); ++i) {
    if (s[i] == '[') ++depth;
    if (s[i] == ']') --depth;
    if (s[i] == sep && depth == 0) return i;
  }
  return std::string_view::npos;
}

std::vector<std::string_view> splitOn(std::string_view s, char sep) {
  std::vector<std::string_view> parts;
  size_t start = 0;
  while (true) {
    const size_t pos = findOutsideBrackets(s, sep, start);
    parts.push_back(trim(s.substr(start, pos == std::string_view::npos ? pos : pos - start)));
    if (pos == std::string_view::npos) return parts;
    start = pos + 1;
  }
}

size_t parseMegabytes(std::string_view key, std::string_view value) {
  uint64_t mb = 0;
  const auto [end, ec] = std::from_chars(value.data(), value.data() + value.size(), mb);
  TORCH_CHECK(ec == std::errc() && end == value.data() + value.size(),
              "PYTORCH_NPU_ALLOC_CONF: ", key, " expects a whole number of MiB, but got '", value,
              "'", NPU_ERROR_SUFFIX);
  if (mb >= std::numeric_limits<size_t>::max() / kMiB) return std::numeric_limits<size_t>::max();
  return static_cast<size_t>(mb) * kMiB;
}

// parseMegabytes, refusing n <= minMb: "<what> must be > <minMb><unit>, but
// got <value>" (each option with the words of the parser it comes from).
size_t parseMegabytesAbove(std::string_view key, std::string_view value, size_t minMb,
                           std::string_view what, std::string_view unit) {
  const size_t bytes = parseMegabytes(key, value);
  TORCH_CHECK(bytes > minMb * kMiB, what, " must be > ", minMb, unit, ", but got ", value,
              NPU_ERROR_SUFFIX);
  return bytes;
}


double parseNumber(std::string_view key, std::string_view value) {
  const std::string text(value);
  char* end = nullptr;
  const double v = text.empty() ? 0.0 : std::strtod(text.c_str(), &end);
  TORCH_CHECK(!text.empty() && end == text.c_str() + text.size(), "PYTORCH_NPU_ALLOC_CONF: ", key,
              " expects a number, but got '", value, "'", NPU_ERROR_SUFFIX);
  return v;
}

double parseFraction(std::string_view value) {
  const double f = parseNumber("per_process_memory_fraction", value);
  TORCH_CHECK(f >= 0.0 && f <= 1.0,
              "PYTORCH_NPU_ALLOC_CONF: per_process_memory_fraction must be in [0.0, 1.0], "
              "but got ",
              value, NPU_ERROR_SUFFIX);
  return f;
}

double parseThreshold(std::string_view value) {
  const double t = parseNumber("garbage_collection_threshold", value);
  TORCH_CHECK(t > 0.0 && t < 1.0,
              "PYTORCH_NPU_ALLOC_CONF: garbage_collection_threshold must be in (0.0, 1.0), "
              "but got ",
              value, NPU_ERROR_SUFFIX);
  return t;
}

// c10's message (AcceleratorAllocatorConfig::parseLargeSegmentSize).
size_t parseLargeSegmentSize(std::string_view value) {
  return parseMegabytesAbove("large_segment_size_mb", value, kMinLargeSegmentSizeMb,
                             "CachingAllocator option large_segment_size_mb", " MB");
}

// Note [Power-of-two size classes]
// ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
// roundup_power2_divisions is c10's option (CUDA's and torch_npu's): between
// two powers of two 2^k and 2^(k+1), requests are rounded up to one of n
// equal steps, so that many slightly different sizes share a few block
// sizes and reuse each other's cached blocks. "n" applies to every size;
// "[1:1,64:4,256:8,>:2]" per interval, keyed by a power-of-two size in MiB:
// the first entry also covers every smaller interval, each later entry only
// its own (the intervals between stay 0, plain rounding), and ">" every
// interval after the last. Divisions must be powers of two; c10's words.
uint64_t parseDivisions(std::string_view value) {
  uint64_t n = 0;
  const auto [end, ec] = std::from_chars(value.data(), value.data() + value.size(), n);
  TORCH_CHECK(ec == std::errc() && end == value.data() + value.size(),
              "PYTORCH_NPU_ALLOC_CONF: roundup_power2_divisions expects whole numbers, but got '",
              value, "'", NPU_ERROR_SUFFIX);
  TORCH_CHECK(n == 0 || c10::llvm::isPowerOf2_64(n), "For roundups, the divisions has to be power of 2 , but got ",
              n, NPU_ERROR_SUFFIX);
  return n;
}

std::array<size_t, kRoundupPower2Intervals> parseRoundupDivisions(std::string_view value) {
  std::array<size_t, kRoundupPower2Intervals> table{};
  if (value.empty() || value.front() != '[') {
    table.fill(parseDivisions(value));
    return table;
  }
  TORCH_CHECK(value.back() == ']' && value.size() > 2,
              "PYTORCH_NPU_ALLOC_CONF: roundup_power2_divisions expects a number or a list "
              "'[<MiB>:<divisions>,...,>:<divisions>]', but got '",
              value, "'", NPU_ERROR_SUFFIX);
  std::optional<size_t> last;  // index of the previous entry
  for (std::string_view entry : splitOn(value.substr(1, value.size() - 2), ',')) {
    const auto kv = splitOn(entry, ':');
    TORCH_CHECK(kv.size() == 2, "PYTORCH_NPU_ALLOC_CONF: roundup_power2_divisions expects ",
                "'<MiB>:<divisions>' entries, but got '", entry, "'", NPU_ERROR_SUFFIX);
    const uint64_t divisions = parseDivisions(kv[1]);
    if (kv[0] == ">") {
      std::fill(table.begin() + (last ? *last + 1 : 0), table.end(), divisions);
      last = kRoundupPower2Intervals - 1;
      continue;
    }
    uint64_t mb = 0;
    const auto [end, ec] = std::from_chars(kv[0].data(), kv[0].data() + kv[0].size(), mb);
    TORCH_CHECK(ec == std::errc() && end == kv[0].data() + kv[0].size() && c10::llvm::isPowerOf2_64(mb),
                "For roundups, the intervals have to be power of 2, but got '", kv[0], "'",
                NPU_ERROR_SUFFIX);
    const size_t index = std::min<size_t>(c10::llvm::Log2_64(mb), kRoundupPower2Intervals - 1);
    TORCH_CHECK(!last || index > *last, "PYTORCH_NPU_ALLOC_CONF: roundup_power2_divisions' ",
                "intervals must ascend, but got '", kv[0], "' after a larger one", NPU_ERROR_SUFFIX);
    if (!last) {
      std::fill(table.begin(), table.begin() + index + 1, divisions);
    } else {
      table[index] = divisions;
    }
    last = index;
  }
  return table;
}

// torch_npu's segment_size_mb, with its messages.
size_t parseLegacySegmentSize(std::string_view value) {
  TORCH_WARN_ONCE("`segment_size_mb` is deprecated, please use `large_segment_size_mb` instead.");
  const bool digits =
      !value.empty() && value.find_first_not_of("0123456789") == std::string_view::npos;
  TORCH_CHECK(digits, "CachingAllocator option segment_size_mb is invalid (got '", value, "').",
              NPU_ERROR_SUFFIX);
  uint64_t mb = 0;
  const auto [end, ec] = std::from_chars(value.data(), value.data() + value.size(), mb);
  TORCH_CHECK(ec == std::errc() && mb >= kMinLegacySegmentSizeMb && mb <= kMaxLegacySegmentSizeMb,
              "CachingAllocator option segment_size_mb error, must be [", kMinLegacySegmentSizeMb,
              ", ", kMaxLegacySegmentSizeMb, "], dtype is int (got ", value, ")", NPU_ERROR_SUFFIX);
  return static_cast<size_t>(mb) * kMiB;
}

bool parseBool(std::string_view key, std::string_view value) {
  if (value == "True" || value == "true") return true;
  if (value == "False" || value == "false") return false;
  TORCH_CHECK(false, "PYTORCH_NPU_ALLOC_CONF: ", key, " expects True or False, but got '", value,
              "'", NPU_ERROR_SUFFIX);
}

// torch_npu's options that tune the hardware's allocator (page sizes,
// address alignment, pinned-memory background threads, ...): accepted so
// that configurations written for torch_npu work unchanged, without effect
// here (warned once per process).
constexpr std::string_view kAcceptedWithoutEffect[] = {
    "pinned_use_background_threads",
    "pinned_mem_register",
    "base_addr_aligned_kb",
    "page_size",
    "multi_stream_lazy_reclaim",
    "pinned_reserve_segment_size_mb",
    "release_lock_on_npumalloc",
};

bool acceptedWithoutEffect(std::string_view key) {
  for (std::string_view k : kAcceptedWithoutEffect) {
    if (k == key) return true;
  }
  return false;
}

struct ConfigState {
  std::mutex mutex;
  std::optional<AllocatorConfig> config;  // empty until the environment parsed
  // Bumped by every setAllocatorSettings, so that allocatorConfig() can hand
  // out a thread's copy without the lock while nothing changed (it is read
  // at every allocation).
  std::atomic<uint64_t> version{0};
};

ConfigState& state() {
  static auto* s = std::make_unique<ConfigState>().release();  // leaked: read at exit by frees
  return *s;
}

// Lock held.
AllocatorConfig& current(ConfigState& s) {
  if (!s.config.has_value()) {
    // torch_npu reads PYTORCH_ALLOC_CONF too, but refuses both at once.
    const char* npuEnv = std::getenv("PYTORCH_NPU_ALLOC_CONF");
    const char* accEnv = std::getenv("PYTORCH_ALLOC_CONF");
    TORCH_CHECK(npuEnv == nullptr || accEnv == nullptr,
                "Both PYTORCH_NPU_ALLOC_CONF and PYTORCH_ALLOC_CONF have been set, please "
                "set only one of them.",
                NPU_ERROR_SUFFIX);
    const char* env = npuEnv != nullptr ? npuEnv : accEnv;
    s.config = parseAllocatorConfig(env == nullptr ? "" : env);
  }
  return *s.config;
}

}  // namespace

AllocatorConfig parseAllocatorConfig(std::string_view conf, const AllocatorConfig& base) {
  AllocatorConfig out = base;
  for (std::string_view option : splitOn(conf, ',')) {
    if (option.empty()) continue;  // "a:1,,b:2" and a trailing comma are harmless
    const auto kv = splitOn(option, ':');
    TORCH_CHECK(kv.size() == 2 && !kv[0].empty(), "PYTORCH_NPU_ALLOC_CONF: expected ",
                "'key:value', but got '", option, "'", NPU_ERROR_SUFFIX);
    const std::string_view key = kv[0];
    const std::string_view value = kv[1];
    if (key == "max_split_size_mb") {
      out.maxSplitSize = parseMegabytes(key, value);
    } else if (key == "garbage_collection_threshold") {
      out.garbageCollectionThreshold = parseThreshold(value);
    } else if (key == "per_process_memory_fraction") {
      out.perProcessMemoryFraction = parseFraction(value);
    } else if (key == "max_non_split_rounding_mb") {
      out.maxNonSplitRounding = parseMegabytes(key, value);
    } else if (key == "throw_on_npumalloc_oom") {
      out.throwOnMallocOom = parseBool(key, value);
    } else if (key == "expandable_segments") {
      out.expandableSegments = parseBool(key, value);
    } else if (key == "large_segment_size_mb") {
      out.largeSegmentSize = parseLargeSegmentSize(value);
    } else if (key == "roundup_power2_divisions") {
      out.roundupPower2Divisions = parseRoundupDivisions(value);
    } else if (key == "segment_size_mb") {
      out.legacySegmentSize = parseLegacySegmentSize(value);
    } else if (key == "pinned_max_round_threshold_mb") {
      out.pinnedMaxRoundThreshold = parseMegabytes(key, value);
    } else if (key == "pinned_max_cached_size_mb") {
      out.pinnedMaxCachedSize = parseMegabytes(key, value);
    } else if (key == "pin_memory_expandable_segments") {
      // torch_npu turns the option off, with this warning, on a CANN older
      // than 8.5.0; the simulated NPU has no CANN (torch_npu.npu.utils.
      // get_cann_version() is "") and no expandable pinned memory.
      if (parseBool(key, value)) {
        TORCH_WARN_ONCE(
            "m_pin_memory_expandable_segments setting failure, the current cann version does not "
            "support this feature, now change to `False`.To use this feature, you need to "
            "upgrade to version 8.5.0 or higher (the simulated NPU has no CANN and no expandable "
            "pinned memory)");
      }
    } else if (acceptedWithoutEffect(key)) {
      TORCH_CHECK(!value.empty(), "PYTORCH_NPU_ALLOC_CONF: ", key, " needs a value, but got ''",
                  NPU_ERROR_SUFFIX);
      TORCH_WARN_ONCE("PYTORCH_NPU_ALLOC_CONF: torch_npu's hardware tuning options (here '", key,
                      "') are accepted but have no effect on the simulated NPU.");
    } else {
      TORCH_CHECK(
          false, "Unrecognized key '", key, "' in NPU allocator config ",
          "(PYTORCH_NPU_ALLOC_CONF); supported: max_split_size_mb, ",
          "garbage_collection_threshold, per_process_memory_fraction, max_non_split_rounding_mb, ",
          "throw_on_npumalloc_oom, expandable_segments, large_segment_size_mb, segment_size_mb, ",
          "roundup_power2_divisions, pinned_max_round_threshold_mb, pinned_max_cached_size_mb, ",
          "pin_memory_expandable_segments", NPU_ERROR_SUFFIX);
    }
  }
  // A split limit below the large-segment size would forbid splitting the
  // segments made for medium requests; c10's parser (which torch_npu uses
  // for this option) refuses it with these words, whatever the order of the
  // two options.
  TORCH_CHECK(out.maxSplitSize >= out.largeSegmentSize,
              "CachingAllocator option max_split_size_mb too small, must be >= ",
              out.largeSegmentSize / kMiB, NPU_ERROR_SUFFIX);
  if (out.legacySegmentSize != 0 && out.largeSegmentSize != AllocatorConfig{}.largeSegmentSize) {
    TORCH_WARN_ONCE(
        "Both `segment_size_mb` and `large_segment_size_mb` are set. `segment_size_mb` is "
        "deprecated. It is recommended to use only `large_segment_size_mb`.");
  }
  return out;
}

size_t AllocatorConfig::expandableLargePageSize() const {
  size_t page = largeSegmentSize;
  if (page == AllocatorConfig{}.largeSegmentSize && legacySegmentSize != 0) {
    page = legacySegmentSize;
  }
  if (page > std::numeric_limits<size_t>::max() - kPageGranularity) return page;  // npurt refuses
  return (page + kPageGranularity - 1) / kPageGranularity * kPageGranularity;
}

AllocatorConfig allocatorConfig() {
  ConfigState& s = state();
  struct Copy {
    uint64_t version = std::numeric_limits<uint64_t>::max();  // none yet
    AllocatorConfig config;
  };
  thread_local Copy copy;
  // acquire: pairs with the release in setAllocatorSettings.
  if (copy.version == s.version.load(std::memory_order_acquire)) return copy.config;
  std::lock_guard<std::mutex> lock(s.mutex);
  copy.config = current(s);  // a bad environment raises here, at every call
  copy.version = s.version.load(std::memory_order_relaxed);
  return copy.config;
}

void setAllocatorSettings(const std::string& conf) {
  ConfigState& s = state();
  std::lock_guard<std::mutex> lock(s.mutex);
  s.config = parseAllocatorConfig(conf, current(s));  // assigned only if the parse succeeded
  s.version.fetch_add(1, std::memory_order_release);
}

}  // namespace c10_npu::NPUCachingAllocator
