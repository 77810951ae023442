// See ActivityCorrelation.h and Note [Correlation through the task queue].
#include "core/ActivityCorrelation.h"

#include <vector>

#include "npurt/npurt.h"
#include "npurt/npurt_activity.h"

namespace c10_npu::profiler {

namespace detail {
std::atomic<bool> gCollecting{false};
}  // namespace detail

namespace {
thread_local std::vector<uint32_t> tlsIds;
}  // namespace

void setCollecting(bool on) noexcept { detail::gCollecting.store(on, std::memory_order_relaxed); }

void pushId(uint32_t id) { tlsIds.push_back(id); }

void popId() noexcept {
  if (!tlsIds.empty()) tlsIds.pop_back();
}

uint32_t currentId() noexcept { return tlsIds.empty() ? 0 : tlsIds.back(); }

ExternalIdScope::ExternalIdScope(uint32_t id) noexcept {
  // A refused push (the runtime shutting down) only loses the correlation.
  pushed_ = id != 0 && npuActivityPushExternalCorrelationId(id) == npuSuccess;
}

ExternalIdScope::~ExternalIdScope() {
  if (pushed_) (void)npuActivityPopExternalCorrelationId(nullptr);
}

}  // namespace c10_npu::profiler
