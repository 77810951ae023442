// The DeviceGuardImplInterface of PrivateUse1 (npu): how PyTorch's generic
// device, stream and event machinery (c10::DeviceGuard, c10::StreamGuard,
// torch.Stream, torch.Event, torch.accelerator) reaches the simulated NPU.
//
// Layer: framework core. Registered at static initialisation of npu_core.
// All methods are thread-safe (state is per thread or behind the layers
// below); events passed as void** are runtime handles (npuEvent_t) owned by
// the c10::Event that holds them.
#include <c10/core/DeviceCapability.h>
#include <c10/core/impl/DeviceGuardImplInterface.h>

#include <cstdint>

#include "core/ExternalStreams.h"
#include "core/NPUCachingAllocator.h"
#include "core/NPUException.h"
#include "core/NPUFunctions.h"
#include "core/NPUStream.h"
#include "core/NPUTrace.h"
#include "core/TaskQueue.h"
#include "npurt/npurt.hpp"

namespace c10_npu {
namespace {

constexpr c10::DeviceType kNpu = c10::DeviceType::PrivateUse1;

struct NPUGuardImpl final : public c10::impl::DeviceGuardImplInterface {
  NPUGuardImpl() = default;

  c10::DeviceType type() const override { return kNpu; }

  c10::Device exchangeDevice(c10::Device d) const override {
    TORCH_CHECK(d.type() == kNpu, "Expected a npu device, but got ", d, NPU_ERROR_SUFFIX);
    return c10::Device(kNpu, c10_npu::exchange_device(d.index()));
  }

  c10::Device getDevice() const override { return c10::Device(kNpu, current_device()); }

  void setDevice(c10::Device d) const override {
    TORCH_CHECK(d.type() == kNpu, "Expected a npu device, but got ", d, NPU_ERROR_SUFFIX);
    set_device(d.index());
  }

  void uncheckedSetDevice(c10::Device d) const noexcept override { (void)npuSetDevice(d.index()); }

  c10::Stream getStream(c10::Device d) const override {
    return getCurrentNPUStream(d.index()).unwrap();
  }

  c10::Stream getDefaultStream(c10::Device d) const override {
    return getDefaultNPUStream(d.index()).unwrap();
  }

  c10::Stream getStreamFromGlobalPool(c10::Device d, bool isHighPriority) const override {
    return getStreamFromPool(isHighPriority, d.index()).unwrap();
  }

  c10::Stream getNewStream(c10::Device d, int priority) const override {
    return getStreamFromPool(priority, d.index()).unwrap();
  }

  c10::Stream exchangeStream(c10::Stream s) const override {
    NPUStream stream(s);
    NPUStream previous = getCurrentNPUStream(s.device_index());
    setCurrentNPUStream(stream);
    return previous.unwrap();
  }

  void* getStreamNativeHandle(const c10::Stream s) const override { return NPUStream(s).stream(); }

  c10::DeviceIndex deviceCount() const noexcept override { return device_count(); }

  void destroyEvent(void* event, const c10::DeviceIndex /*device_index*/) const noexcept override {
    if (event == nullptr) return;
    trace::eventDeleted(static_cast<npuEvent_t>(event));  // Note [Trace hooks]
    // Records and waits of the event may still sit in task queues; see
    // queue::destroyEvent.
    queue::destroyEvent(static_cast<npuEvent_t>(event));
  }

  void record(void** event, const c10::Stream& stream, const c10::DeviceIndex device_index,
              const c10::EventFlag flag) const override {
    TORCH_CHECK(device_index == -1 || device_index == stream.device_index(), "Event device index ",
                static_cast<int>(device_index), " does not match recording stream's device index ",
                static_cast<int>(stream.device_index()), ".", NPU_ERROR_SUFFIX);
    NPUStream npu_stream(stream);
    external::checkManagedOnly(npu_stream, "NPUGuardImpl::record");
    auto* npu_event = static_cast<npuEvent_t*>(static_cast<void*>(event));
    if (*npu_event == nullptr) {
      // As CUDA's guard: PyTorch's default is timing disabled; the backend's
      // default (what torch.Event(enable_timing=True) asks for) measures time.
      const unsigned flags =
          flag == c10::EventFlag::BACKEND_DEFAULT ? npuEventDefault : npuEventDisableTiming;
      npurt::DeviceGuard guard(stream.device_index());
      NPU_CHECK(npuEventCreateWithFlags(npu_event, flags));
      trace::eventCreated(*npu_event);
    }
    queue::recordEvent(npu_stream, *npu_event);
    trace::eventRecorded(*npu_event, npu_stream);
  }

  void block(void* event, const c10::Stream& stream) const override {
    if (event == nullptr) return;  // never recorded: no-op
    NPUStream npu_stream(stream);
    external::checkManagedOnly(npu_stream, "NPUGuardImpl::block");
    // Records from the generic API go through the queue of the recording
    // stream's device; a wait through another queue must not overtake it.
    drainForEvent(event);
    queue::waitEvent(npu_stream, static_cast<npuEvent_t>(event));
    trace::eventWaited(static_cast<npuEvent_t>(event), npu_stream);
  }

  bool queryEvent(void* event) const override {
    if (event == nullptr) return true;
    drainForEvent(event);
    const npuError_t status = npuEventQuery(static_cast<npuEvent_t>(event));
    if (status == npuErrorNotReady) return false;
    NPU_CHECK(status);
    return true;
  }

  void synchronizeEvent(void* event) const override {
    if (event == nullptr) return;
    drainForEvent(event);
    NPU_CHECK(npuEventSynchronize(static_cast<npuEvent_t>(event)));
    trace::eventSynchronized(static_cast<npuEvent_t>(event));
  }

  double elapsedTime(void* start, void* end, const c10::DeviceIndex device_index) const override {
    TORCH_CHECK(start != nullptr && end != nullptr,
                "Both events must be recorded before calculating elapsed time.", NPU_ERROR_SUFFIX);
    synchronizeEvent(start);
    synchronizeEvent(end);
    float ms = 0.0f;
    const npuError_t status =
        npuEventElapsedTime(&ms, static_cast<npuEvent_t>(start), static_cast<npuEvent_t>(end));
    TORCH_CHECK(status != npuErrorTimingDisabled,
                "Both events must be created with argument 'enable_timing=True'.",
                NPU_ERROR_SUFFIX);
    TORCH_CHECK(status != npuErrorEventNotRecorded,
                "Both events must be recorded before calculating elapsed time.", NPU_ERROR_SUFFIX);
    NPU_CHECK(status);
    return ms;
  }

  bool queryStream(const c10::Stream& stream) const override { return NPUStream(stream).query(); }

  void synchronizeStream(const c10::Stream& stream) const override {
    NPUStream(stream).synchronize();
  }

  void synchronizeDevice(const c10::DeviceIndex device_index) const override {
    device_synchronize(device_index);
  }

  void recordDataPtrOnStream(const c10::DataPtr& data_ptr,
                             const c10::Stream& stream) const override {
    NPUCachingAllocator::recordStream(data_ptr, NPUStream(stream));
  }

  // torch.accelerator.get_device_capability(): the dtypes npu tensors can be
  // made in and converted between. The simulated NPU holds every dtype whose
  // tensors CPU kernels compute on; not the quantized ones (npu has no
  // quantized backend) nor the bit-packed and sub-byte placeholders.
  c10::DeviceCapability getDeviceCapability(c10::Device d) const override {
    (void)checkedDeviceIndex(d.index());  // "Invalid device_index: N", as every device query
    c10::DeviceCapability cap;
    // clang-format off
    static constexpr c10::ScalarTypeIndex kSupported[] = {
        c10::kIndex_Byte, c10::kIndex_Char, c10::kIndex_Short, c10::kIndex_Int, c10::kIndex_Long,
        c10::kIndex_Half, c10::kIndex_Float, c10::kIndex_Double, c10::kIndex_ComplexHalf,
        c10::kIndex_ComplexFloat, c10::kIndex_ComplexDouble, c10::kIndex_Bool,
        c10::kIndex_BFloat16, c10::kIndex_Float8_e5m2, c10::kIndex_Float8_e4m3fn,
        c10::kIndex_Float8_e5m2fnuz, c10::kIndex_Float8_e4m3fnuz, c10::kIndex_Float8_e8m0fnu,
        c10::kIndex_UInt16, c10::kIndex_UInt32, c10::kIndex_UInt64};
    // clang-format on
    uint64_t bits = 0;
    for (const c10::ScalarTypeIndex index : kSupported) bits |= uint64_t{1} << index;
    cap.capability_data.capability_bits = bits;
    return cap;
  }

 private:
  // Drains the queue(s) that may still hold the event's latest record. The
  // runtime knows the event's device only once a record was submitted; until
  // then, drain every device (rare: the first use of a fresh event).
  static void drainForEvent(void* event) {
    int device = -1;
    NPU_CHECK(npuEventGetDevice(static_cast<npuEvent_t>(event), &device));
    if (device >= 0) {
      queue::drainDevice(static_cast<c10::DeviceIndex>(device));
      return;
    }
    for (c10::DeviceIndex d = 0; d < device_count(); ++d) queue::drainDevice(d);
  }
};

C10_REGISTER_GUARD_IMPL(PrivateUse1, NPUGuardImpl);

}  // namespace
}  // namespace c10_npu
