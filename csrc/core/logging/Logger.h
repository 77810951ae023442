// torch_npu's C++ logger: one named logger per component ("torch_npu.memory",
// "torch_npu.dispatch", ...), its level set from Python's torch._logging
// through the LogContext (LogContext.h). Layer: core (npurt knows nothing of
// it). See Note [Log levels are read with one relaxed load].
//
// A message is one line on stderr, in torch_npu's format:
//
//   V1202 01:02:03.123456 4242 csrc/core/NPUDeviceCache.cpp:215] [rank:0] text
//
// the level's letter (V debug, I info, W warning, E error, F critical), month
// and day, local time with microseconds, the process id, the file and line of
// the log call, the rank when RANK is set, then the message.
#pragma once

#include <atomic>
#include <cstdarg>
#include <cstdint>
#include <string>

namespace npu_logging {

// Python's logging levels (logging.DEBUG == 10, ...).
enum class LoggingLevel : int { DEBUG = 10, INFO = 20, WARNING = 30, ERROR = 40, CRITICAL = 50 };

// Note [Log levels are read with one relaxed load]
// ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
// Log calls sit on hot paths (every allocation, every capture), and logging
// is off by default, so the macros below test the logger's level before
// anything else: one relaxed atomic load and a branch, no lock, no format.
// Relaxed is enough: a level is a hint that needs no ordering with other
// memory; a thread that sees a level change late logs or skips a few
// messages, as with Python's logging. The loggers live until exit (they are
// owned by the leaked LogContext), so a call site may cache its pointer.
class Logger {
 public:
  explicit Logger(std::string name) : name_(std::move(name)) {}
  Logger(const Logger&) = delete;
  Logger& operator=(const Logger&) = delete;

  // The logger's name, e.g. "torch_npu.memory". Thread-safe.
  const std::string& name() const noexcept { return name_; }

  // The least level this logger emits. Thread-safe; see Note [Log levels are
  // read with one relaxed load].
  LoggingLevel getAllowLevel() const noexcept {
    return static_cast<LoggingLevel>(allowLevel_.load(std::memory_order_relaxed));
  }
  bool isEnabledFor(LoggingLevel level) const noexcept {
    return allowLevel_.load(std::memory_order_relaxed) <= static_cast<int>(level);
  }
  // Called by LogContext::setLogs. Thread-safe.
  void setAllowLevel(int level) noexcept { allowLevel_.store(level, std::memory_order_relaxed); }

  // Write one message at `level` if the level is enabled and
  // TORCH_NPU_LOGS_FILTER lets it through (LogContext::shouldLog); `format`
  // is printf's. Never throws: a logger must not turn into an error.
  // Thread-safe (one write(2)-sized fwrite per message).
  void debug(const char* file, uint32_t line, const char* format, ...) noexcept
      __attribute__((format(printf, 4, 5)));
  void info(const char* file, uint32_t line, const char* format, ...) noexcept
      __attribute__((format(printf, 4, 5)));
  void warn(const char* file, uint32_t line, const char* format, ...) noexcept
      __attribute__((format(printf, 4, 5)));
  void error(const char* file, uint32_t line, const char* format, ...) noexcept
      __attribute__((format(printf, 4, 5)));
  void critical(const char* file, uint32_t line, const char* format, ...) noexcept
      __attribute__((format(printf, 4, 5)));

 private:
  void log(LoggingLevel level, const char* file, uint32_t line, const char* format,
           va_list args) noexcept;

  const std::string name_;
  // WARNING until torch._logging says otherwise, as for Python's "torch".
  std::atomic<int> allowLevel_{static_cast<int>(LoggingLevel::WARNING)};
};

}  // namespace npu_logging

// torch_npu's logging macros; `logger` is a Logger* or a shared_ptr to one.
// See Note [Log levels are read with one relaxed load].
#define NPU_LOG_AT(logger, level, method, format, ...)                    \
  do {                                                                    \
    if (__builtin_expect((logger)->isEnabledFor(level), 0)) {             \
      (logger)->method(__FILE__, __LINE__, format, ##__VA_ARGS__);        \
    }                                                                     \
  } while (0)
#define TORCH_NPU_LOGD(logger, format, ...) \
  NPU_LOG_AT(logger, npu_logging::LoggingLevel::DEBUG, debug, format, ##__VA_ARGS__)
#define TORCH_NPU_LOGI(logger, format, ...) \
  NPU_LOG_AT(logger, npu_logging::LoggingLevel::INFO, info, format, ##__VA_ARGS__)
#define TORCH_NPU_LOGW(logger, format, ...) \
  NPU_LOG_AT(logger, npu_logging::LoggingLevel::WARNING, warn, format, ##__VA_ARGS__)
#define TORCH_NPU_LOGE(logger, format, ...) \
  NPU_LOG_AT(logger, npu_logging::LoggingLevel::ERROR, error, format, ##__VA_ARGS__)
