// The C++ log context (core/logging/LogContext.h): levels by dotted names,
// their reset by a later setLogs, bad levels, level listeners, and the log
// line on stderr. The TORCH_NPU_LOGS_FILTER filter is read once per process
// and is tested from Python (tests/python/test_logging.py).
#include <c10/util/Exception.h>
#include <gtest/gtest.h>

#include <atomic>
#include <string>

#include "core/logging/LogContext.h"

namespace {

using npu_logging::LoggingLevel;
using npu_logging::logging;

constexpr int kDebug = static_cast<int>(LoggingLevel::DEBUG);
constexpr int kInfo = static_cast<int>(LoggingLevel::INFO);

class LogContextTest : public ::testing::Test {
 protected:
  void TearDown() override { logging().setLogs({}); }
};

TEST_F(LogContextTest, LevelsFollowTheNearestDottedName) {
  auto child = logging().getLogger("test_npu.dispatch.time");
  auto parent = logging().getLogger("test_npu.dispatch");
  auto other = logging().getLogger("test_npu.memory");
  EXPECT_EQ(child->getAllowLevel(), LoggingLevel::WARNING);  // the default
  logging().setLogs({{"test_npu.dispatch", kDebug}});
  EXPECT_EQ(child->getAllowLevel(), LoggingLevel::DEBUG);
  EXPECT_EQ(parent->getAllowLevel(), LoggingLevel::DEBUG);
  EXPECT_EQ(other->getAllowLevel(), LoggingLevel::WARNING);
  logging().setLogs({{"test_npu.dispatch", kDebug}, {"test_npu.dispatch.time", kInfo}});
  EXPECT_EQ(child->getAllowLevel(), LoggingLevel::INFO);
  // A logger created after the settings gets them at once.
  EXPECT_EQ(logging().getLogger("test_npu.dispatch.new")->getAllowLevel(), LoggingLevel::DEBUG);
  EXPECT_EQ(logging().getLogger("test_npu.dispatch"), parent);  // one logger per name
}

TEST_F(LogContextTest, TorchIsTheLevelOfLoggersWithoutOneAndALaterCallResetsIt) {
  auto logger = logging().getLogger("test_npu.anything");
  logging().setLogs({{"torch", kDebug}});
  EXPECT_TRUE(logger->isEnabledFor(LoggingLevel::DEBUG));
  logging().setLogs({});
  EXPECT_FALSE(logger->isEnabledFor(LoggingLevel::INFO));
  EXPECT_TRUE(logger->isEnabledFor(LoggingLevel::WARNING));
}

TEST_F(LogContextTest, BadLevelsAreRefusedAndChangeNothing) {
  auto logger = logging().getLogger("test_npu.bad");
  logging().setLogs({{"test_npu.bad", kInfo}});
  EXPECT_THROW(logging().setLogs({{"test_npu.bad", 51}}), c10::ValueError);
  EXPECT_THROW(logging().setLogs({{"test_npu.bad", -10}}), c10::ValueError);
  EXPECT_EQ(logger->getAllowLevel(), LoggingLevel::INFO);
}

TEST_F(LogContextTest, ListenersRunAfterEverySetLogs) {
  static std::atomic<int> calls{0};
  static std::atomic<bool> sawDebug{false};
  static const auto logger = logging().getLogger("test_npu.listened");
  logging().addLevelListener([] {
    calls.fetch_add(1);
    sawDebug.store(logger->isEnabledFor(LoggingLevel::DEBUG));
  });
  logging().setLogs({{"test_npu.listened", kDebug}});
  EXPECT_EQ(calls.load(), 1);
  EXPECT_TRUE(sawDebug.load());
  logging().setLogs({});
  EXPECT_EQ(calls.load(), 2);
  EXPECT_FALSE(sawDebug.load());
}

TEST_F(LogContextTest, EnabledMessagesAreOneLineOnStderr) {
  auto logger = logging().getLogger("test_npu.lines");
  logging().setLogs({{"test_npu.lines", kInfo}});
  ::testing::internal::CaptureStderr();
  TORCH_NPU_LOGD(logger, "hidden %d", 1);
  TORCH_NPU_LOGI(logger, "shown %d %s", 2, std::string(3000, 'x').c_str());
  const std::string err = ::testing::internal::GetCapturedStderr();
  EXPECT_EQ(err.find("hidden"), std::string::npos);
  ASSERT_EQ(err.rfind('I', 0), 0u) << err;  // the level letter first
  EXPECT_NE(err.find("test_log_context.cpp:"), std::string::npos) << err;
  EXPECT_NE(err.find("] shown 2 " + std::string(3000, 'x') + "\n"), std::string::npos);  // whole
  EXPECT_EQ(err.find('\n'), err.size() - 1);  // one line
}

}  // namespace
