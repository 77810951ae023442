// Random number generators of the npu devices.
//
// Layer: framework core.
//
// Note [Random numbers are reserved at enqueue]
// ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
// A random op reads its generator when it is *queued*, not when it runs: the
// calling thread reserves one sub-sequence (seed, offset) and advances the
// offset; the task later seeds a private CPU generator from that pair. So the
// numbers depend only on the seed and the order in which ops were queued,
// never on how streams interleave on the device. State = (seed, offset).
#pragma once

#include <ATen/core/Generator.h>
#include <c10/core/GeneratorImpl.h>

#include <cstdint>

namespace c10_npu {

class NPUGeneratorImpl final : public c10::GeneratorImpl {
 public:
  explicit NPUGeneratorImpl(c10::DeviceIndex device, uint64_t seed = 67280421310721ULL);

  void set_current_seed(uint64_t seed) override;
  uint64_t current_seed() const override;
  uint64_t seed() override;  // reseeds nondeterministically, returns the seed
  void set_offset(uint64_t offset) override;
  uint64_t get_offset() const override;
  // State layout: 16 bytes, seed then offset (little-endian uint64).
  void set_state(const c10::TensorImpl& new_state) override;
  c10::intrusive_ptr<c10::TensorImpl> get_state() const override;

  // Reserves the next sub-sequence and returns a 64-bit seed for it. Caller
  // must hold mutex_ (use reserveSeed(at::Generator) below). See
  // Note [Random numbers are reserved at enqueue].
  uint64_t reserveSeedLocked();

  static c10::DeviceType device_type() { return c10::DeviceType::PrivateUse1; }

 private:
  NPUGeneratorImpl* clone_impl() const override;

  uint64_t seed_;
  uint64_t offset_ = 0;
};

// Default generator of a device (-1 = current). Thread-safe.
const at::Generator& getDefaultNPUGenerator(c10::DeviceIndex device = -1);

// A new generator for a device (-1 = current). Thread-safe.
at::Generator createNPUGenerator(c10::DeviceIndex device = -1);

// Locks the generator (or the device's default one if gen is undefined) and
// reserves one sub-sequence. Thread-safe.
uint64_t reserveSeed(const std::optional<at::Generator>& gen, c10::DeviceIndex device);

}  // namespace c10_npu
