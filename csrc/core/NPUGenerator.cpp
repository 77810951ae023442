// See NPUGenerator.h and Note [Random numbers are reserved at enqueue].
#include "core/NPUGenerator.h"

#include <ATen/Utils.h>
#include <ATen/core/GeneratorForPrivateuseone.h>
#include <c10/core/CPUAllocator.h>
#include <c10/core/TensorImpl.h>
#include <c10/util/CallOnce.h>

#include <cstring>
#include <deque>
#include <mutex>
#include <vector>

#include "core/NPUException.h"
#include "core/NPUFunctions.h"
#include "core/NPUStream.h"
#include "core/graphs/CaptureRegistry.h"

namespace c10_npu {
namespace {

constexpr size_t kStateSize = 2 * sizeof(uint64_t);

// SplitMix64 finaliser: turns (seed, offset) into well-mixed, independent
// 64-bit seeds for the per-op CPU generators.
uint64_t mix(uint64_t x) {
  x += 0x9E3779B97F4A7C15ULL;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ULL;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBULL;
  return x ^ (x >> 31);
}

// Note [Generator state during capture]
// ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
// While the current stream of a generator's device is captured, the
// generator's position is its offset *within the graph* (Note [Random numbers
// of captured ops]), not its eager offset: get_state() reports it and
// set_state() moves it, so that saving and restoring the state inside a
// captured region (activation checkpointing's preserve_rng_state) makes the
// replay draw the same numbers twice, as it does eagerly. The seed cannot
// change inside a capture: the graph's seed is the generator's at each
// replay, so a different seed is refused (torch_npu's message) and the same
// seed is accepted and changes nothing. Reseeding nondeterministically and
// reading or setting the eager offset are refused outright, as torch_npu
// refuses them. PyTorch holds the generator's mutex around these calls; they
// take the capture's mutex inside it, never the other way round, since the
// replay (which takes both the other way) never runs on a capture in
// progress.
std::shared_ptr<graphs::CaptureState> captureOf(const c10::GeneratorImpl& gen) {
  if (!graphs::anyCapture()) return nullptr;
  return graphs::recorderOf(getCurrentNPUStream(gen.device().index()));
}

void assertNotCapturing(const c10::GeneratorImpl& gen, const char* attempt) {
  TORCH_CHECK(captureOf(gen) == nullptr, attempt,
              " during NPU graph capture. If you need this call to be captured, please file an "
              "issue. Current npuStreamCaptureStatus: active",
              NPU_ERROR_SUFFIX);
}

at::Generator handleOf(NPUGeneratorImpl* gen) {
  return at::Generator(c10::intrusive_ptr<c10::GeneratorImpl>::reclaim_copy(gen));
}

}  // namespace

NPUGeneratorImpl::NPUGeneratorImpl(c10::DeviceIndex device, uint64_t seed)
    : c10::GeneratorImpl(c10::Device(c10::DeviceType::PrivateUse1, device),
                         c10::DispatchKeySet(c10::DispatchKey::PrivateUse1)),
      seed_(seed) {}

void NPUGeneratorImpl::set_current_seed(uint64_t seed) {
  if (C10_UNLIKELY(captureOf(*this) != nullptr)) {  // Note [Generator state during capture]
    TORCH_CHECK(seed == seed_,
                "NPUGeneratorImpl::set_current_seed can be called during stream capture only if "
                "new seed is the same as the original seed.",
                NPU_ERROR_SUFFIX);
    return;
  }
  seed_ = seed;
  offset_ = 0;
}

uint64_t NPUGeneratorImpl::current_seed() const { return seed_; }

uint64_t NPUGeneratorImpl::seed() {
  assertNotCapturing(*this, "Cannot call NPUGeneratorImpl::seed while in capture mode");
  const uint64_t s = c10::detail::getNonDeterministicRandom(/*is_cuda=*/true);
  set_current_seed(s);
  return s;
}

void NPUGeneratorImpl::set_offset(uint64_t offset) {
  assertNotCapturing(*this, "Cannot call NPUGeneratorImpl::set_offset while in capture mode");
  offset_ = offset;
}

uint64_t NPUGeneratorImpl::get_offset() const {
  assertNotCapturing(*this, "Cannot call NPUGeneratorImpl::get_offset while in capture mode");
  return offset_;
}

void NPUGeneratorImpl::set_state(const c10::TensorImpl& new_state) {
  TORCH_CHECK(new_state.dtype() == caffe2::TypeMeta::Make<uint8_t>(),
              "Expected the RNG state to be a torch.ByteTensor, but got ", new_state.dtype(),
              NPU_ERROR_SUFFIX);
  TORCH_CHECK(static_cast<size_t>(new_state.numel()) == kStateSize, "Expected an RNG state of ",
              kStateSize, " bytes, but got ", new_state.numel(), NPU_ERROR_SUFFIX);
  uint64_t values[2];
  std::memcpy(values, new_state.data(), kStateSize);
  if (auto capture = captureOf(*this)) {  // Note [Generator state during capture]
    set_current_seed(values[0]);
    capture->setOffset(handleOf(this), values[1]);
    return;
  }
  seed_ = values[0];
  offset_ = values[1];
}

c10::intrusive_ptr<c10::TensorImpl> NPUGeneratorImpl::get_state() const {
  auto state = at::detail::empty_cpu({static_cast<int64_t>(kStateSize)}, at::kByte, std::nullopt,
                                     std::nullopt, std::nullopt, std::nullopt);
  auto capture = captureOf(*this);  // Note [Generator state during capture]
  const uint64_t offset =
      capture ? capture->offsetOf(handleOf(const_cast<NPUGeneratorImpl*>(this))) : offset_;
  const uint64_t values[2] = {seed_, offset};
  std::memcpy(state.data_ptr(), values, kStateSize);
  return state.getIntrusivePtr();
}

uint64_t NPUGeneratorImpl::reserveSeedLocked() { return seedOf(seed_, offset_++); }

uint64_t seedOf(uint64_t seed, uint64_t offset) noexcept { return mix(seed ^ mix(offset)); }

NPUGeneratorImpl* NPUGeneratorImpl::clone_impl() const {
  auto gen = std::make_unique<NPUGeneratorImpl>(device().index(), seed_);
  gen->offset_ = offset_;
  return gen.release();  // GeneratorImpl::clone() adopts it into an intrusive_ptr
}

const at::Generator& getDefaultNPUGenerator(c10::DeviceIndex device) {
  static std::once_flag once;
  // Leaked on purpose (generators may be used during process exit).
  static std::vector<at::Generator>* generators = nullptr;
  std::call_once(once, [] {
    const c10::DeviceIndex n = device_count_ensure_non_zero();
    auto v = std::make_unique<std::vector<at::Generator>>();
    for (c10::DeviceIndex i = 0; i < n; ++i) {
      v->push_back(at::make_generator<NPUGeneratorImpl>(i));
    }
    generators = v.release();
  });
  device = checkedDeviceIndex(device);
  return (*generators)[device];
}

at::Generator createNPUGenerator(c10::DeviceIndex device) {
  device = checkedDeviceIndex(device);
  auto gen = at::make_generator<NPUGeneratorImpl>(device);
  gen.set_current_seed(c10::default_rng_seed_val);
  return gen;
}

SeedReservation reserveSeed(const std::optional<at::Generator>& gen, c10::DeviceIndex device) {
  at::Generator g = (gen.has_value() && gen->defined()) ? *gen : getDefaultNPUGenerator(device);
  TORCH_CHECK(g.device().type() == c10::DeviceType::PrivateUse1,
              "Expected a 'npu' device type for generator but found '", g.device().type(), "'",
              NPU_ERROR_SUFFIX);
  auto* impl = at::check_generator<NPUGeneratorImpl>(g);
  if (graphs::anyCapture()) {
    if (auto capture = graphs::recorderOf(getCurrentNPUStream(impl->device().index()))) {
      return capture->reserve(g);
    }
  }
  std::lock_guard<std::mutex> lock(impl->mutex_);
  return SeedReservation{impl->reserveSeedLocked(), nullptr, 0};
}

}  // namespace c10_npu
