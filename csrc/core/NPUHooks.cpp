// PrivateUse1 hooks: what ATen asks of a backend beyond streams (device
// count, generators, pinned memory, primary context). Registered at static
// initialisation of npu_core. All methods are thread-safe.
#include <ATen/detail/PrivateUse1HooksInterface.h>

#include "core/NPUCachingAllocator.h"
#include "core/NPUFunctions.h"
#include "core/NPUGenerator.h"
#include "npurt/npurt.h"

namespace c10_npu {
namespace {

struct NPUHooks final : public at::PrivateUse1HooksInterface {
  bool isBuilt() const override { return true; }
  bool isAvailable() const override { return device_count() > 0; }
  void init() const override { (void)device_count_ensure_non_zero(); }
  c10::DeviceIndex deviceCount() const override { return device_count(); }
  void setCurrentDevice(c10::DeviceIndex device) const override { set_device(device); }
  c10::DeviceIndex getCurrentDevice() const override { return current_device(); }
  c10::DeviceIndex exchangeDevice(c10::DeviceIndex device) const override {
    return exchange_device(device);
  }
  c10::DeviceIndex maybeExchangeDevice(c10::DeviceIndex device) const override {
    return exchange_device(device);
  }
  // The simulated device has no lazily created context: any valid index is
  // ready once the runtime initialised.
  bool hasPrimaryContext(c10::DeviceIndex device) const override {
    return device >= 0 && device < device_count();
  }
  const at::Generator& getDefaultGenerator(c10::DeviceIndex device) const override {
    return getDefaultNPUGenerator(device);
  }
  at::Generator getNewGenerator(c10::DeviceIndex device) const override {
    return createNPUGenerator(device);
  }
  at::Device getDeviceFromPtr(void* data) const override {
    npuPointerAttributes attr{};
    if (npuPointerGetAttributes(&attr, data) == npuSuccess && attr.type == npuMemoryTypeDevice) {
      return at::Device(c10::DeviceType::PrivateUse1, static_cast<c10::DeviceIndex>(attr.device));
    }
    return at::Device(c10::DeviceType::CPU);
  }
  bool isPinnedPtr(const void* data) const override { return NPUHostAllocator::isPinnedPtr(data); }
  c10::Allocator* getPinnedMemoryAllocator() const override { return NPUHostAllocator::get(); }
  void resizePrivateUse1Bytes(const c10::Storage& storage, size_t newsize) const override;
};

}  // namespace
}  // namespace c10_npu

// Defined in csrc/aten (it needs a copy kernel); declared here so the hook
// can forward to it without the core depending on ops at link time. The
// aten library sets the pointer at its static initialisation.
namespace c10_npu {
void (*gResizeStorageBytes)(const c10::Storage&, size_t) = nullptr;

namespace {
void NPUHooks::resizePrivateUse1Bytes(const c10::Storage& storage, size_t newsize) const {
  TORCH_CHECK(gResizeStorageBytes != nullptr, "npu storage resize is not registered");
  gResizeStorageBytes(storage, newsize);
}

struct RegisterHooks {
  RegisterHooks() {
    static NPUHooks hooks;
    at::RegisterPrivateUse1HooksInterface(&hooks);
  }
} registerHooks;
}  // namespace
}  // namespace c10_npu
