// torch_npu's line format on stderr; see Logger.h.
#include "core/logging/Logger.h"

#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <string>

#include "core/logging/LogContext.h"

namespace npu_logging {
namespace {

// The level's letter in torch_npu's format: glog's, with V for debug.
char levelLetter(LoggingLevel level) {
  switch (level) {
    case LoggingLevel::DEBUG:
      return 'V';
    case LoggingLevel::INFO:
      return 'I';
    case LoggingLevel::WARNING:
      return 'W';
    case LoggingLevel::ERROR:
      return 'E';
    case LoggingLevel::CRITICAL:
      return 'F';
  }
  return '?';
}

// printf into a string of whatever length the message needs (torch_npu's
// fixed buffers drop long messages).
std::string formatted(const char* format, va_list args) {
  va_list copy;
  va_copy(copy, args);
  const int needed = std::vsnprintf(nullptr, 0, format, copy);
  va_end(copy);
  if (needed <= 0) return std::string();
  std::string text(static_cast<size_t>(needed) + 1, '\0');
  std::vsnprintf(text.data(), text.size(), format, args);
  text.resize(static_cast<size_t>(needed));
  return text;
}

std::string prefix(LoggingLevel level, const char* file, uint32_t line) {
  timespec ts{};
  clock_gettime(CLOCK_REALTIME, &ts);
  tm local{};
  localtime_r(&ts.tv_sec, &local);
  char head[96];
  std::snprintf(head, sizeof(head), "%c%02d%02d %02d:%02d:%02d.%06ld %d", levelLetter(level),
                local.tm_mon + 1, local.tm_mday, local.tm_hour, local.tm_min, local.tm_sec,
                ts.tv_nsec / 1000, static_cast<int>(getpid()));
  std::string out = head;
  if (file != nullptr && line > 0) {
    // __FILE__ is relative to the build directory: "../csrc/..." reads as
    // "csrc/...".
    while (std::strncmp(file, "../", 3) == 0) file += 3;
    out += ' ';
    out += file;
    out += ':';
    out += std::to_string(line);
  }
  out += "] ";
  // RANK is read at each message, as torch_npu does: launchers set it after
  // the process started in some set-ups (and a message is rare).
  if (const char* rank = std::getenv("RANK"); rank != nullptr && *rank != '\0') {
    out += "[rank:";
    out += std::to_string(std::strtol(rank, nullptr, 10));
    out += "] ";
  }
  return out;
}

}  // namespace

void Logger::log(LoggingLevel level, const char* file, uint32_t line, const char* format,
                 va_list args) noexcept {
  try {
    std::string message = prefix(level, file, line) + formatted(format, args) + '\n';
    if (!LogContext::GetInstance().shouldLog(message)) return;
    // One fwrite per message: stdio's lock keeps lines of concurrent threads
    // whole.
    std::fwrite(message.data(), 1, message.size(), stderr);
    std::fflush(stderr);
  } catch (...) {  // bad_alloc: drop the message rather than fail the caller
  }
}

#define NPU_DEFINE_LOG_FUNCTION(method, level)                                               \
  void Logger::method(const char* file, uint32_t line, const char* format, ...) noexcept { \
    if (!isEnabledFor(level)) return;                                                      \
    va_list args;                                                                          \
    va_start(args, format);                                                                \
    log(level, file, line, format, args);                                                  \
    va_end(args);                                                                          \
  }
NPU_DEFINE_LOG_FUNCTION(debug, LoggingLevel::DEBUG)
NPU_DEFINE_LOG_FUNCTION(info, LoggingLevel::INFO)
NPU_DEFINE_LOG_FUNCTION(warn, LoggingLevel::WARNING)
NPU_DEFINE_LOG_FUNCTION(error, LoggingLevel::ERROR)
NPU_DEFINE_LOG_FUNCTION(critical, LoggingLevel::CRITICAL)
#undef NPU_DEFINE_LOG_FUNCTION

}  // namespace npu_logging
