// The "third-party library" of thirdparty.h. A kernel of the simulated NPU is
// a function that a device executor runs in stream order: aclrtLaunchHostFunc.
#include "thirdparty.h"

#include <initializer_list>
#include <memory>

// npurt's race detector (NPU_SIM_RACECHECK=1, docs/DEBUGGING.md): each kernel
// declares the device memory it reads and writes, so the detector checks it
// against PyTorch's ops. An aclrtLaunchHostFunc is an npurt host function
// whose argument is `args`, the key of the declaration.
#include "npurt/npurt_racecheck.h"

namespace {

struct Scale {
  float* data;
  int64_t n;
  float alpha;
  static void run(void* p) {
    std::unique_ptr<Scale> k(static_cast<Scale*>(p));
    for (int64_t i = 0; i < k->n; ++i) k->data[i] *= k->alpha;
  }
};

struct Add {
  float* dst;
  const float* src;
  int64_t n;
  static void run(void* p) {
    std::unique_ptr<Add> k(static_cast<Add*>(p));
    for (int64_t i = 0; i < k->n; ++i) k->dst[i] += k->src[i];
  }
};

// Queues kernel K on the stream, declaring the memory it accesses; K::run
// owns and frees its arguments.
template <typename K>
aclError launch(aclrtStream stream, std::unique_ptr<K> args,
                std::initializer_list<npuMemAccess> accesses) {
  (void)npuTaskDeclareAccesses(args.get(), accesses.begin(), accesses.size());
  const aclError status = aclrtLaunchHostFunc(stream, &K::run, args.get());
  if (status == ACL_SUCCESS) {
    (void)args.release();
  } else {
    (void)npuTaskDeclareAccesses(args.get(), nullptr, 0);  // withdrawn: nothing was launched
  }
  return status;
}

size_t floats(int64_t n) { return static_cast<size_t>(n) * sizeof(float); }

}  // namespace

extern "C" {

aclError tp_create_stream(aclrtStream* stream) { return aclrtCreateStream(stream); }

aclError tp_destroy_stream(aclrtStream stream) { return aclrtDestroyStream(stream); }

aclError tp_scale(aclrtStream stream, float* data, int64_t n, float alpha) {
  if (data == nullptr || n < 0) return ACL_ERROR_INVALID_PARAM;
  return launch(stream, std::make_unique<Scale>(Scale{data, n, alpha}),
                {{data, floats(n), npuMemAccessReadWrite}});
}

aclError tp_add(aclrtStream stream, float* dst, const float* src, int64_t n) {
  if (dst == nullptr || src == nullptr || n < 0) return ACL_ERROR_INVALID_PARAM;
  return launch(stream, std::make_unique<Add>(Add{dst, src, n}),
                {{dst, floats(n), npuMemAccessReadWrite},
                 {src, floats(n), npuMemAccessRead}});
}

aclError tp_synchronize(aclrtStream stream) { return aclrtSynchronizeStream(stream); }

}  // extern "C"
