// Parsing of PYTORCH_NPU_ALLOC_CONF. See NPUAllocatorConfig.h.
#include "core/NPUAllocatorConfig.h"

#include <c10/util/Exception.h>

#include <charconv>
#include <cstdlib>
#include <mutex>
#include <optional>
#include <vector>

#include "core/NPUException.h"

namespace c10_npu::NPUCachingAllocator {
namespace {

constexpr size_t kMiB = size_t{1} << 20;
// A split limit at or below the large-segment size (20 MiB) would forbid
// splitting the segments made for medium requests: CUDA rejects it too.
constexpr size_t kMinMaxSplitSizeMb = 20;

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
  TORCH_CHECK_VALUE(ec == std::errc() && end == value.data() + value.size(),
                    "PYTORCH_NPU_ALLOC_CONF: ", key, " expects a whole number of MiB, but got '",
                    value, "'", NPU_ERROR_SUFFIX);
  if (mb >= std::numeric_limits<size_t>::max() / kMiB) return std::numeric_limits<size_t>::max();
  return static_cast<size_t>(mb) * kMiB;
}

size_t parseSplitSize(std::string_view value) {
  const size_t bytes = parseMegabytes("max_split_size_mb", value);
  TORCH_CHECK_VALUE(bytes > kMinMaxSplitSizeMb * kMiB,
                    "PYTORCH_NPU_ALLOC_CONF: max_split_size_mb must be > ", kMinMaxSplitSizeMb,
                    ", but got ", value, NPU_ERROR_SUFFIX);
  return bytes;
}

double parseNumber(std::string_view key, std::string_view value) {
  const std::string text(value);
  char* end = nullptr;
  const double v = text.empty() ? 0.0 : std::strtod(text.c_str(), &end);
  TORCH_CHECK_VALUE(!text.empty() && end == text.c_str() + text.size(),
                    "PYTORCH_NPU_ALLOC_CONF: ", key, " expects a number, but got '", value, "'",
                    NPU_ERROR_SUFFIX);
  return v;
}

double parseFraction(std::string_view value) {
  const double f = parseNumber("per_process_memory_fraction", value);
  TORCH_CHECK_VALUE(f >= 0.0 && f <= 1.0,
                    "PYTORCH_NPU_ALLOC_CONF: per_process_memory_fraction must be in [0.0, 1.0], "
                    "but got ",
                    value, NPU_ERROR_SUFFIX);
  return f;
}

double parseThreshold(std::string_view value) {
  const double t = parseNumber("garbage_collection_threshold", value);
  TORCH_CHECK_VALUE(t > 0.0 && t < 1.0,
                    "PYTORCH_NPU_ALLOC_CONF: garbage_collection_threshold must be in (0.0, 1.0), "
                    "but got ",
                    value, NPU_ERROR_SUFFIX);
  return t;
}

bool parseBool(std::string_view key, std::string_view value) {
  if (value == "True" || value == "true") return true;
  if (value == "False" || value == "false") return false;
  TORCH_CHECK_VALUE(false, "PYTORCH_NPU_ALLOC_CONF: ", key, " expects True or False, but got '",
                    value, "'", NPU_ERROR_SUFFIX);
}

// torch_npu's options that tune the hardware's allocator (page sizes,
// address alignment, pinned-memory background threads, ...): accepted so
// that configurations written for torch_npu work unchanged, without effect
// here (warned once per process).
constexpr std::string_view kAcceptedWithoutEffect[] = {
    "roundup_power2_divisions",
    "pinned_use_background_threads",
    "large_segment_size_mb",
    "pinned_max_round_threshold_mb",
    "pinned_max_cached_size_mb",
    "pin_memory_expandable_segments",
    "pinned_mem_register",
    "base_addr_aligned_kb",
    "page_size",
    "segment_size_mb",
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
    TORCH_CHECK_VALUE(npuEnv == nullptr || accEnv == nullptr,
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
    TORCH_CHECK_VALUE(kv.size() == 2 && !kv[0].empty(), "PYTORCH_NPU_ALLOC_CONF: expected ",
                      "'key:value', but got '", option, "'", NPU_ERROR_SUFFIX);
    const std::string_view key = kv[0];
    const std::string_view value = kv[1];
    if (key == "max_split_size_mb") {
      out.maxSplitSize = parseSplitSize(value);
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
    } else if (acceptedWithoutEffect(key)) {
      TORCH_CHECK_VALUE(!value.empty(), "PYTORCH_NPU_ALLOC_CONF: ", key,
                        " needs a value, but got ''", NPU_ERROR_SUFFIX);
      TORCH_WARN_ONCE("PYTORCH_NPU_ALLOC_CONF: torch_npu's hardware tuning options (here '", key,
                      "') are accepted but have no effect on the simulated NPU.");
    } else {
      TORCH_CHECK_VALUE(
          false, "Unrecognized key '", key, "' in NPU allocator config ",
          "(PYTORCH_NPU_ALLOC_CONF); supported: max_split_size_mb, ",
          "garbage_collection_threshold, per_process_memory_fraction, max_non_split_rounding_mb, ",
          "throw_on_npumalloc_oom, expandable_segments",
          NPU_ERROR_SUFFIX);
    }
  }
  return out;
}

AllocatorConfig allocatorConfig() {
  ConfigState& s = state();
  std::lock_guard<std::mutex> lock(s.mutex);
  return current(s);
}

void setAllocatorSettings(const std::string& conf) {
  ConfigState& s = state();
  std::lock_guard<std::mutex> lock(s.mutex);
  s.config = parseAllocatorConfig(conf, current(s));  // assigned only if the parse succeeded
}

}  // namespace c10_npu::NPUCachingAllocator
