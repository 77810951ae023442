// The process's C++ log settings: the named loggers (Logger.h) and their
// levels, set from Python's torch._logging (torch_npu/_logging/_internal.py
// passes torch._logging's {qualified name: level} table to setLogs), and the
// TORCH_NPU_LOGS_FILTER keyword filter. torch_npu's npu_logging::LogContext.
// Layer: core.
//
// Note [Logger levels follow the dotted names]
// ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
// As in Python's logging, a logger takes the level of the nearest name on
// its dotted path that the table holds: "torch_npu.dispatch.time" takes
// "torch_npu.dispatch.time" if set, else "torch_npu.dispatch", else
// "torch_npu"; failing all, the level of "torch" (TORCH_LOGS="+all" or
// set_logs(all=...)), else WARNING. Every setLogs recomputes every logger, so
// a table that no longer names a logger puts it back to the default (a
// later torch._logging.set_logs() without arguments turns logging off).
#pragma once

#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>
#include <vector>

#include "core/logging/Logger.h"

namespace npu_logging {

class LogContext {
 public:
  // The process's context, created at first use and never destroyed (log
  // calls may come from executor threads and static destructors up to
  // exit). Thread-safe.
  static LogContext& GetInstance();

  // The logger named `name`, created at its first request with the level the
  // current settings give it (Note [Logger levels follow the dotted names]).
  // The pointer stays valid until exit. Thread-safe.
  std::shared_ptr<Logger> getLogger(const std::string& name);

  // Replaces the settings with `qnameLevels` ({qualified logger name: Python
  // logging level}, e.g. {"torch_npu.memory": 10}) and updates every logger,
  // then calls the level listeners. Throws c10::Error (ValueError in Python)
  // for a level outside 0..50, naming the logger and the value; the settings
  // are then unchanged. Thread-safe.
  void setLogs(const std::unordered_map<std::string, int>& qnameLevels);

  // Registers `listener`, called (with this context's lock held: it must not
  // call back into the context) after every setLogs, for code that keeps a
  // summary of some loggers' levels (the op path, Note [Op observers]).
  // Thread-safe.
  void addLevelListener(std::function<void()> listener);

  // False if TORCH_NPU_LOGS_FILTER drops `message`: "-word" drops messages
  // containing word; with any "+word", only messages containing one of them
  // pass. The variable is read once, when the context is created.
  // Thread-safe (the filter does not change after creation).
  bool shouldLog(const std::string& message) const;

 private:
  struct Token {};  // only GetInstance constructs

 public:
  explicit LogContext(Token);

 private:
  int levelFor(const std::string& name) const;  // mutex_ held

  mutable std::mutex mutex_;
  std::unordered_map<std::string, int> qnameLevels_;                 // guarded by mutex_
  std::unordered_map<std::string, std::shared_ptr<Logger>> loggers_;  // guarded by mutex_
  std::vector<std::function<void()>> listeners_;                     // guarded by mutex_
  std::vector<std::string> whitelist_;  // set once, in the constructor
  std::vector<std::string> blacklist_;  // set once, in the constructor
};

// torch_npu's shorthand for LogContext::GetInstance(). Thread-safe.
inline LogContext& logging() { return LogContext::GetInstance(); }

}  // namespace npu_logging
