// Configuration of the device caching allocator: PYTORCH_NPU_ALLOC_CONF and
// torch.npu.memory._set_allocator_settings.
//
// Layer: framework core.
//
// The string is a comma-separated list of `key:value` options, as torch_npu
// and PYTORCH_CUDA_ALLOC_CONF spell them:
//   max_split_size_mb:<n>             blocks of at least n MiB are never split
//                                     (n >= large_segment_size_mb); default
//                                     unlimited
//   garbage_collection_threshold:<t>  0 < t < 1: with a per-process memory
//                                     fraction set, cached blocks that were not
//                                     reused for long are released before the
//                                     reserved memory exceeds t * the limit
//   per_process_memory_fraction:<f>   0 <= f <= 1: as set_per_process_memory_fraction
//                                     on every device, at its first allocation
//   max_non_split_rounding_mb:<n>     a request of max_split_size or more may
//                                     take a cached block up to n MiB larger
//                                     (default 20, CUDA's kLargeBuffer)
//   throw_on_npumalloc_oom:<True|False>  True: a segment that would take the
//                                     reserved memory past per_process_memory_fraction
//                                     (1.0 if unset) of the capacity is refused at
//                                     once, without releasing the cache and retrying
//                                     (counted in num_oom_rejections), as torch_npu
//   expandable_segments:<True|False>  True: new segments are expandable (Note
//                                     [Expandable segments]): one per stream and
//                                     pool, grown by mapping pages at its end
//   large_segment_size_mb:<n>         n > 10 (c10's option): the segment of a
//                                     request between 1 and 10 MiB, and the page
//                                     of the large pool's expandable segments
//                                     (default 20)
//   segment_size_mb:<n>               20 <= n <= 512 (torch_npu's, deprecated in
//                                     favour of large_segment_size_mb, warned):
//                                     the large pool's expandable page size,
//                                     unless large_segment_size_mb is set
//   roundup_power2_divisions:<n>      a power of two: requests are rounded up to
//   roundup_power2_divisions:[<mb>:<n>,...,>:<n>]  one of n equal steps
//                                     between two powers of two, for every
//                                     size, or per size interval (c10's option;
//                                     Note [Power-of-two size classes])
//   pinned_max_round_threshold_mb:<n> pinned host requests above n MiB are
//                                     not rounded up to a power of two (c10's
//                                     option; default unlimited)
//   pinned_max_cached_size_mb:<n>     pinned host blocks above n MiB return to
//                                     the runtime once reusable instead of
//                                     being cached, and are not rounded either
//                                     (c10's option; default unlimited)
// Expandable page sizes are rounded up to npurt's granularity (2 MiB).
// pin_memory_expandable_segments:True is turned off with torch_npu's warning
// for a CANN without the feature (the simulator has none). torch_npu's other
// hardware tuning options (page_size, pinned_use_background_threads ...) are
// accepted without effect (warned once). PYTORCH_ALLOC_CONF is read when PYTORCH_NPU_ALLOC_CONF is
// not set; both set is an error, as in torch_npu.
// A bad option raises a c10::Error (RuntimeError in Python, as torch_npu's
// and CUDA's parsers) naming the option and the value; the previous
// configuration then stays in force.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <string>
#include <string_view>

namespace c10_npu::NPUCachingAllocator {

// Size intervals of roundup_power2_divisions: 1 MiB, 2 MiB, ... 32 GiB and up.
inline constexpr size_t kRoundupPower2Intervals = 16;

struct AllocatorConfig {
  // Blocks of this size or larger are never split, and a request below it is
  // never served by such a block. SIZE_MAX: no limit (CUDA's default).
  size_t maxSplitSize = std::numeric_limits<size_t>::max();
  // 0: no garbage collection. Only effective with a memory fraction set, as
  // in CUDA's allocator (the threshold is a fraction of that limit).
  double garbageCollectionThreshold = 0.0;
  // Cached oversize blocks serve oversize requests at most this much
  // smaller (CUDA's max_non_split_rounding_mb; default kLargeBuffer).
  size_t maxNonSplitRounding = size_t{20} << 20;
  // torch_npu's throw_on_npumalloc_oom: refuse segments past the configured
  // fraction at once (see the list above).
  bool throwOnMallocOom = false;
  // Initial per-process memory fraction of every device; < 0: not set.
  double perProcessMemoryFraction = -1.0;
  // New segments are expandable segments (Note [Expandable segments]).
  bool expandableSegments = false;
  // large_segment_size_mb: the segment of requests in (1 MiB, 10 MiB)
  // (CUDA's kLargeBuffer by default).
  size_t largeSegmentSize = size_t{20} << 20;
  // torch_npu's deprecated segment_size_mb; 0: not set.
  size_t legacySegmentSize = 0;
  // roundup_power2_divisions (Note [Power-of-two size classes]): entry i
  // applies to requests in [2^(20+i), 2^(21+i)) bytes (the first also below,
  // the last also above); 0 or 1: plain 512-byte rounding.
  std::array<size_t, kRoundupPower2Intervals> roundupPower2Divisions{};
  // The pinned host allocator (Note [Pinned block sizes]): requests above
  // pinnedMaxRoundThreshold or pinnedMaxCachedSize keep their exact size;
  // blocks above pinnedMaxCachedSize are not cached. SIZE_MAX: no limit.
  size_t pinnedMaxRoundThreshold = std::numeric_limits<size_t>::max();
  size_t pinnedMaxCachedSize = std::numeric_limits<size_t>::max();

  // The page of the large pool's expandable segments: large_segment_size_mb
  // if set, else segment_size_mb if set, else 20 MiB (torch_npu's
  // get_custom_expandable_segment_size), rounded up to 2 MiB. Pure.
  size_t expandableLargePageSize() const;
};

// Parses `conf` on top of `base` (options not named keep base's values).
// Raises c10::Error naming the bad key or value. Thread-safe (pure).
AllocatorConfig parseAllocatorConfig(std::string_view conf, const AllocatorConfig& base = {});

// The configuration in force: PYTORCH_NPU_ALLOC_CONF read at the first call
// (a bad value raises there, at every call, until fixed), then whatever
// setAllocatorSettings applied. Thread-safe.
AllocatorConfig allocatorConfig();

// torch.npu.memory._set_allocator_settings: parses `conf` over the current
// configuration and applies it to later allocations. Thread-safe.
void setAllocatorSettings(const std::string& conf);

}  // namespace c10_npu::NPUCachingAllocator
