#include "core/logging/Loggers.h"

#include "core/logging/LogContext.h"

namespace npu_logging {

const std::shared_ptr<Logger> kMemoryLogger = logging().getLogger("torch_npu.memory");
const std::shared_ptr<Logger> kNPUGraphLogger = logging().getLogger("torch_npu.npugraph");

}  // namespace npu_logging
