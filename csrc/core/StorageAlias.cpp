#include "core/StorageAlias.h"

#include <c10/util/Exception.h>

#include <memory>
#include <mutex>
#include <unordered_map>
#include <utility>

#include "core/NPUException.h"
#include "core/NPUStorageImpl.h"

namespace c10_npu {

namespace {

// What an alias's DataPtr owns: the reference to its source.
struct AliasContext {
  c10::Storage source;
  const c10::StorageImpl* alias = nullptr;  // set once the alias exists
};

// The live aliases and their sources. Looked up without touching the alias
// object, which another thread may be releasing.
struct Registry {
  std::mutex mutex;
  std::unordered_map<const c10::StorageImpl*, const c10::StorageImpl*> sources;
};

Registry& registry() {
  static auto* r = std::make_unique<Registry>().release();  // leaked: aliases may die at exit
  return *r;
}

// The alias's DataPtr deleter: unregisters it and drops the reference to the
// source. Any thread (Note [Storages are freed on any thread]).
void releaseSource(void* context) {
  std::unique_ptr<AliasContext> owned(static_cast<AliasContext*>(context));
  if (owned->alias == nullptr) return;
  Registry& r = registry();
  std::lock_guard<std::mutex> lock(r.mutex);
  r.sources.erase(owned->alias);
}

}  // namespace

c10::Storage makeStorageAlias(const c10::Storage& source) {
  TORCH_CHECK(source.device_type() == c10::DeviceType::PrivateUse1,
              "a storage alias needs an npu storage, got one on ", source.device(),
              NPU_ERROR_SUFFIX);
  auto owned = std::make_unique<AliasContext>();
  owned->source = source;
  AliasContext* context = owned.get();
  c10::DataPtr pointer(source.data_ptr().get(), context, &releaseSource, source.device());
  (void)owned.release();  // owned by `pointer` from here, also if a line below throws
  c10::Storage alias(makeNPUStorageImpl(c10::StorageImpl::use_byte_size_t(), source.nbytes(),
                                        std::move(pointer), /*allocator=*/nullptr,
                                        /*resizable=*/false));
  Registry& r = registry();
  std::lock_guard<std::mutex> lock(r.mutex);
  r.sources.emplace(alias.unsafeGetStorageImpl(), source.unsafeGetStorageImpl());
  context->alias = alias.unsafeGetStorageImpl();
  return alias;
}

const c10::StorageImpl* aliasSource(const c10::StorageImpl* storage) noexcept {
  if (storage == nullptr) return nullptr;
  Registry& r = registry();
  std::lock_guard<std::mutex> lock(r.mutex);
  auto it = r.sources.find(storage);
  return it == r.sources.end() ? nullptr : it->second;
}

}  // namespace c10_npu
