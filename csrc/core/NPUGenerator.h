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

#include <atomic>
#include <cstdint>
#include <memory>

namespace c10_npu {

// The seed of sub-sequence `offset` of a generator seeded with `seed`: what
// a task seeds its private CPU generator with. Thread-safe.
uint64_t seedOf(uint64_t seed, uint64_t offset) noexcept;

// Note [Random numbers of captured ops]
// ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
// A random op captured into an NPU graph must draw new numbers at every
// replay, as with CUDA graphs. So under capture the op does not reserve a
// fixed sub-sequence: it reserves an offset *within the graph* (0, 1, ... in
// capture order, per generator), and the graph's GraphRngState says where
// the current replay starts. NPUGraph::replay() reads the generator's
// (seed, offset), advances the generator by the capture's whole increment
// and queues, on the replay stream before the graph launch, a task that
// stores (seed, offset) in the state; the captured tasks run after it (stream
// order) and resolve seedOf(seed, offset + their offset). Replays of one
// graph never overlap (npurt runs launches of one exec in order; a replay on
// another stream first waits for the previous one), so a state is never
// overwritten while a replay reads it. A seeded program therefore draws the
// same numbers at the same replay, and eager ops after a replay continue from
// where the replay left the generator.
struct GraphRngState {
  std::atomic<uint64_t> seed{0};
  std::atomic<uint64_t> base{0};
};

// A reserved sub-sequence: a fixed seed (eager), or an offset into the
// current replay of a graph (captured). Resolved when the task runs.
struct SeedReservation {
  uint64_t seed = 0;
  std::shared_ptr<const GraphRngState> graph;
  uint64_t offset = 0;

  // The seed for this run. Thread-safe.
  uint64_t resolve() const noexcept {
    // relaxed: the replay's state task ran before, in stream order, and the
    // runtime's hand-over between tasks orders its stores before our loads.
    return graph == nullptr ? seed
                            : seedOf(graph->seed.load(std::memory_order_relaxed),
                                     graph->base.load(std::memory_order_relaxed) + offset);
  }
};

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
// reserves one sub-sequence; under a graph capture of the device's current
// stream, an offset within the graph (Note [Random numbers of captured ops]).
// Thread-safe.
SeedReservation reserveSeed(const std::optional<at::Generator>& gen, c10::DeviceIndex device);

}  // namespace c10_npu
