// The "third-party library" of thirdparty.h. A kernel of the simulated NPU is
// a function that a device executor runs in stream order: aclrtLaunchHostFunc.
#include "thirdparty.h"

#include <memory>

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

// Queues kernel K on the stream; K::run owns and frees its arguments.
template <typename K>
aclError launch(aclrtStream stream, std::unique_ptr<K> args) {
  const aclError status = aclrtLaunchHostFunc(stream, &K::run, args.get());
  if (status == ACL_SUCCESS) (void)args.release();
  return status;
}

}  // namespace

extern "C" {

aclError tp_create_stream(aclrtStream* stream) { return aclrtCreateStream(stream); }

aclError tp_destroy_stream(aclrtStream stream) { return aclrtDestroyStream(stream); }

aclError tp_scale(aclrtStream stream, float* data, int64_t n, float alpha) {
  if (data == nullptr || n < 0) return ACL_ERROR_INVALID_PARAM;
  return launch(stream, std::make_unique<Scale>(Scale{data, n, alpha}));
}

aclError tp_add(aclrtStream stream, float* dst, const float* src, int64_t n) {
  if (dst == nullptr || src == nullptr || n < 0) return ACL_ERROR_INVALID_PARAM;
  return launch(stream, std::make_unique<Add>(Add{dst, src, n}));
}

aclError tp_synchronize(aclrtStream stream) { return aclrtSynchronizeStream(stream); }

}  // extern "C"
