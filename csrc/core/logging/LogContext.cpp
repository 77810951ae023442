#include "core/logging/LogContext.h"

#include <c10/util/Exception.h>

#include <cstdlib>
#include <sstream>

namespace npu_logging {
namespace {

constexpr int kDefaultLevel = static_cast<int>(LoggingLevel::WARNING);

std::string trimmed(const std::string& s) {
  const size_t first = s.find_first_not_of(" \t");
  if (first == std::string::npos) return std::string();
  return s.substr(first, s.find_last_not_of(" \t") - first + 1);
}

}  // namespace

LogContext& LogContext::GetInstance() {
  // Leaked on purpose: see the header.
  static LogContext* const instance = std::make_unique<LogContext>(Token{}).release();
  return *instance;
}

LogContext::LogContext(Token /*unused*/) {
  // TORCH_NPU_LOGS_FILTER, e.g. "+aten::mm,-free": comma-separated keywords,
  // "+" keeps, "-" drops; entries without a sign are ignored (torch_npu's rule).
  const char* filter = std::getenv("TORCH_NPU_LOGS_FILTER");
  if (filter == nullptr) return;
  std::stringstream entries{std::string(filter)};
  std::string entry;
  while (std::getline(entries, entry, ',')) {
    entry = trimmed(entry);
    if (entry.size() < 2) continue;
    if (entry[0] == '+') whitelist_.push_back(entry.substr(1));
    if (entry[0] == '-') blacklist_.push_back(entry.substr(1));
  }
}

bool LogContext::shouldLog(const std::string& message) const {
  for (const std::string& word : blacklist_) {
    if (message.find(word) != std::string::npos) return false;
  }
  if (whitelist_.empty()) return true;
  for (const std::string& word : whitelist_) {
    if (message.find(word) != std::string::npos) return true;
  }
  return false;
}

// See Note [Logger levels follow the dotted names].
int LogContext::levelFor(const std::string& name) const {
  std::string key = name;
  while (true) {
    if (auto it = qnameLevels_.find(key); it != qnameLevels_.end()) return it->second;
    const size_t dot = key.rfind('.');
    if (dot == std::string::npos) break;
    key.resize(dot);
  }
  auto all = qnameLevels_.find("torch");
  return all != qnameLevels_.end() ? all->second : kDefaultLevel;
}

std::shared_ptr<Logger> LogContext::getLogger(const std::string& name) {
  std::lock_guard<std::mutex> lock(mutex_);
  std::shared_ptr<Logger>& logger = loggers_[name];
  if (logger == nullptr) {
    logger = std::make_shared<Logger>(name);
    logger->setAllowLevel(levelFor(name));
  }
  return logger;
}

void LogContext::setLogs(const std::unordered_map<std::string, int>& qnameLevels) {
  for (const auto& [qname, level] : qnameLevels) {
    TORCH_CHECK_VALUE(level >= 0 && level <= static_cast<int>(LoggingLevel::CRITICAL),
                      "Expected a logging level from 0 (NOTSET) to 50 (CRITICAL) for '", qname,
                      "', but got ", level, ". Use the levels of Python's logging module.");
  }
  std::lock_guard<std::mutex> lock(mutex_);
  qnameLevels_ = qnameLevels;
  for (auto& [name, logger] : loggers_) logger->setAllowLevel(levelFor(name));
  for (const auto& listener : listeners_) listener();
}

void LogContext::addLevelListener(std::function<void()> listener) {
  std::lock_guard<std::mutex> lock(mutex_);
  listeners_.push_back(std::move(listener));
}

}  // namespace npu_logging
