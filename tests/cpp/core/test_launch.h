// Shared helper of the core tests: launch a callable through the task queue.
#pragma once

#include <memory>
#include <type_traits>
#include <utility>

#include "core/NPUStream.h"
#include "core/TaskQueue.h"
#include "npurt/npurt.h"

namespace npu_core_test {

// Launches f on `s` through c10_npu::queue::launch, as a task named `name`
// (static storage). The task owns f and destroys it when released.
template <typename F>
void launch(const c10_npu::NPUStream& s, F&& f, const char* name = "test") {
  using Fn = std::decay_t<F>;
  auto owned = std::make_unique<Fn>(std::forward<F>(f));
  npuTask task{};
  task.name = name;
  task.run = [](void* u, char*, size_t) {
    (*static_cast<Fn*>(u))();
    return 0;
  };
  task.release = [](void* u) { std::unique_ptr<Fn> drop(static_cast<Fn*>(u)); };
  task.userData = owned.release();
  c10_npu::queue::launch(s, task);
}

}  // namespace npu_core_test
