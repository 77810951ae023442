// The core's loggers, under torch_npu's names (TORCH_NPU_LOGS=memory enables
// "torch_npu.memory", npugraph or aclgraph "torch_npu.npugraph"). Layer: core.
//
// They are globals made when libnpu_core loads, so that a log call costs
// one load of the pointer and the level's relaxed load (Note [Log levels are
// read with one relaxed load]) rather than a function-local static's guard
// as well. Not for use during static initialisation of other translation
// units.
#pragma once

#include <memory>

#include "core/logging/Logger.h"

namespace npu_logging {

// "torch_npu.memory": the caching allocator's allocations, frees, cache
// releases and out-of-memory failures.
extern const std::shared_ptr<Logger> kMemoryLogger;
// "torch_npu.npugraph": graph capture begin/end and replay.
extern const std::shared_ptr<Logger> kNPUGraphLogger;

}  // namespace npu_logging
