// Statistics, the per-process memory fraction and the out-of-memory message
// of the caching allocator. See NPUCachingAllocator.h (DeviceStats).
#include <c10/util/Exception.h>

#include <cinttypes>
#include <cstdio>
#include <sstream>

#include "core/NPUDeviceCache.h"
#include "core/NPUException.h"

namespace c10_npu::NPUCachingAllocator::detail {
namespace {

using c10::CachingAllocator::StatArray;
constexpr size_t kAggregate = static_cast<size_t>(c10::CachingAllocator::StatType::AGGREGATE);

}  // namespace

std::string formatSize(uint64_t bytes) {
  char buf[64];
  if (bytes < 1024) {
    std::snprintf(buf, sizeof(buf), "%" PRIu64 " bytes", bytes);
  } else if (bytes < (uint64_t{1} << 20)) {
    std::snprintf(buf, sizeof(buf), "%.2f KiB", static_cast<double>(bytes) / 1024.0);
  } else if (bytes < (uint64_t{1} << 30)) {
    std::snprintf(buf, sizeof(buf), "%.2f MiB", static_cast<double>(bytes) / 1048576.0);
  } else {
    std::snprintf(buf, sizeof(buf), "%.2f GiB", static_cast<double>(bytes) / 1073741824.0);
  }
  return buf;
}

std::string DeviceState::oomMessage(size_t nbytes, size_t segment) {
  npuDeviceProp prop{};
  const bool haveProp = npuGetDeviceProperties(&prop, device_) == npuSuccess;
  const auto allocated = static_cast<uint64_t>(stats_.allocated_bytes[kAggregate].current);
  const auto reserved = static_cast<uint64_t>(stats_.reserved_bytes[kAggregate].current);
  std::ostringstream os;
  os << "NPU out of memory. Tried to allocate " << formatSize(nbytes) << " (NPU "
     << static_cast<int>(device_) << "; ";
  if (haveProp) os << formatSize(prop.totalMemory) << " total capacity; ";
  os << formatSize(allocated) << " already allocated; ";
  if (haveProp) os << formatSize(prop.freeMemory) << " free; ";
  // "would exceed allowed memory" is CUDA's wording, which torch_npu's tests match.
  if (allowedMaximum_.has_value()) {
    os << "a " << formatSize(segment)
       << " segment would exceed allowed memory: " << formatSize(*allowedMaximum_)
       << " by the per-process memory fraction " << fraction_ << "; ";
  } else if (haveProp && segment > prop.totalMemory) {
    os << "a " << formatSize(segment) << " segment would exceed allowed memory: the device's "
       << "capacity; ";
  }
  os << formatSize(reserved) << " reserved in total by PyTorch)";
  return os.str();
}

// ---------------------------------------------------------------------------
// Statistics and the memory fraction
// ---------------------------------------------------------------------------

DeviceStats DeviceState::stats() {
  const AllocatorConfig config = allocatorConfig();  // its own leaf lock, taken first
  std::lock_guard<std::mutex> lock(mutex_);
  DeviceStats s = stats_;
  // CUDA reports an unlimited split size as -1 (SIZE_MAX as int64).
  s.max_split_size = static_cast<int64_t>(config.maxSplitSize);
  return s;
}

void DeviceState::resetPeak() {
  std::lock_guard<std::mutex> lock(mutex_);
  for (StatArray* a : {&stats_.allocation, &stats_.segment, &stats_.active, &stats_.inactive_split,
                       &stats_.allocated_bytes, &stats_.reserved_bytes, &stats_.active_bytes,
                       &stats_.inactive_split_bytes, &stats_.requested_bytes}) {
    for (auto& stat : *a) stat.reset_peak();
  }
  stats_.oversize_allocations.reset_peak();
  stats_.oversize_segments.reset_peak();
}

void DeviceState::resetAccumulated() {
  std::lock_guard<std::mutex> lock(mutex_);
  for (StatArray* a : {&stats_.allocation, &stats_.segment, &stats_.active, &stats_.inactive_split,
                       &stats_.allocated_bytes, &stats_.reserved_bytes, &stats_.active_bytes,
                       &stats_.inactive_split_bytes, &stats_.requested_bytes}) {
    for (auto& stat : *a) stat.reset_accumulated();
  }
  stats_.oversize_allocations.reset_accumulated();
  stats_.oversize_segments.reset_accumulated();
  stats_.num_alloc_retries = 0;
  stats_.num_ooms = 0;
  stats_.num_sync_all_streams = 0;
  stats_.num_device_alloc = 0;
  stats_.num_device_free = 0;
  oomRejections_ = 0;
}

int64_t DeviceState::oomRejections() {
  std::lock_guard<std::mutex> lock(mutex_);
  return oomRejections_;
}

void DeviceState::rejectOverConfiguredFraction(size_t bytes, const AllocatorConfig& config) {
  npuDeviceProp prop{};
  NPU_CHECK(npuGetDeviceProperties(&prop, device_));
  // torch_npu's rule: the configured fraction (not set_per_process_memory_fraction's),
  // 1.0 when unset, of the capacity.
  const double fraction =
      config.perProcessMemoryFraction < 0.0 ? 1.0 : config.perProcessMemoryFraction;
  const auto limit = static_cast<size_t>(fraction * static_cast<double>(prop.totalMemory));
  const auto reserved = static_cast<size_t>(stats_.reserved_bytes[kAggregate].current);
  if (reserved + bytes <= limit) return;
  ++oomRejections_;
  TORCH_CHECK_WITH(OutOfMemoryError, false, "NPU out of memory. Preemptively rejected a ",
                   formatSize(bytes), " segment on NPU ", static_cast<int>(device_), ": ",
                   formatSize(reserved), " reserved + the segment would exceed the limit of ",
                   formatSize(limit), " (per_process_memory_fraction ", fraction, " of ",
                   formatSize(prop.totalMemory),
                   "). The cache was not released (throw_on_npumalloc_oom:True); set "
                   "throw_on_npumalloc_oom:False to release it and retry instead.",
                   NPU_ERROR_SUFFIX);
}

void DeviceState::applyConfiguredFraction(const AllocatorConfig& config) {
  if (configuredFractionApplied_) return;
  configuredFractionApplied_ = true;
  if (config.perProcessMemoryFraction < 0.0) return;
  npuDeviceProp prop{};
  NPU_CHECK(npuGetDeviceProperties(&prop, device_));
  fraction_ = config.perProcessMemoryFraction;
  allowedMaximum_ = static_cast<size_t>(fraction_ * static_cast<double>(prop.totalMemory));
}

void DeviceState::setMemoryFraction(double fraction) {
  std::lock_guard<std::mutex> lock(mutex_);
  configuredFractionApplied_ = true;  // an explicit setting wins over the configured one
  npuDeviceProp prop{};
  NPU_CHECK(npuGetDeviceProperties(&prop, device_));
  fraction_ = fraction;
  allowedMaximum_ = static_cast<size_t>(fraction * static_cast<double>(prop.totalMemory));
}

double DeviceState::memoryFraction() {
  const AllocatorConfig config = allocatorConfig();  // its own leaf lock, taken first
  std::lock_guard<std::mutex> lock(mutex_);
  applyConfiguredFraction(config);
  return fraction_;
}

}  // namespace c10_npu::NPUCachingAllocator::detail
