// torch.accelerator.Graph on npu: NPUGraph behind at::GraphImplInterface,
// registered under the device type's name ("NPU" once PyTorch knows the
// PrivateUse1 backend as npu, which torch_npu does at import).
#include <ATen/core/GraphImplInterface.h>
#include <c10/util/Exception.h>

#include "core/NPUException.h"
#include "core/graphs/NPUGraph.h"

namespace c10_npu {
namespace {

npuStreamCaptureMode toNpuMode(at::GraphCaptureMode mode) {
  switch (mode) {
    case at::GraphCaptureMode::Default:
    case at::GraphCaptureMode::Global:
      return npuStreamCaptureModeGlobal;
    case at::GraphCaptureMode::ThreadLocal:
      return npuStreamCaptureModeThreadLocal;
    case at::GraphCaptureMode::Relaxed:
      return npuStreamCaptureModeRelaxed;
  }
  TORCH_CHECK(false, "Invalid GraphCaptureMode value: ", static_cast<int>(mode), NPU_ERROR_SUFFIX);
}

// One NPUGraph per torch.accelerator.Graph. The graph is instantiated at
// capture_end (npurt keeps the captured graph for debug_dump either way), so
// instantiate() has nothing left to do. Not thread-safe, as NPUGraph.
class NPUGraphImpl final : public at::GraphImplInterface {
 public:
  explicit NPUGraphImpl(const at::GraphImplArgs& /*args*/)
      : graph_(NPUGraph::Owner::kAcceleratorGraph) {}

  void capture_begin(c10::MempoolId_t pool, at::GraphCaptureMode mode) override {
    graph_.capture_begin(pool, toNpuMode(mode));
  }
  void capture_end() override { graph_.capture_end(); }
  void instantiate() override {}
  void replay() override { graph_.replay(); }
  void reset() override { graph_.reset(); }
  c10::MempoolId_t pool() const override { return graph_.pool(); }
  void enable_debug_mode() override { graph_.enable_debug_mode(); }
  void debug_dump(const std::string& path) override { graph_.debug_dump(path); }

 private:
  NPUGraph graph_;
};

}  // namespace
}  // namespace c10_npu

namespace at {
// The registry's registerer lives in namespace at.
REGISTER_GRAPH_IMPL(NPU, c10_npu::NPUGraphImpl);
}  // namespace at
