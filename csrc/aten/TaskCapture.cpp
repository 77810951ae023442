// See TaskCapture.h and Note [Task captures and memory reuse].
#include "aten/TaskCapture.h"

#include "aten/OpLauncher.h"
#include "core/NPUCachingAllocator.h"

namespace c10_npu::aten {

at::Tensor captureForTask(const at::Tensor& npu, const NPUStream& stream) {
  if (npu.has_storage() && NPUCachingAllocator::isAllocatedOn(npu.storage().data_ptr(), stream)) {
    return cpuAlias(npu);
  }
  return npu;
}

at::Tensor kernelView(const at::Tensor& captured) {
  const bool npu = captured.defined() && captured.device().type() == c10::DeviceType::PrivateUse1;
  return npu ? cpuAlias(captured) : captured;
}

}  // namespace c10_npu::aten
