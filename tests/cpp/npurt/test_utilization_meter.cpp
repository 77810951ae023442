// White-box tests of the device utilization meter (Note [Device utilization]
// in csrc/npurt/src/utilization.h), on synthetic clock values: the window,
// ongoing spans, spans that leave the window, and the per-core average.
#include <gtest/gtest.h>

#include "utilization.h"

namespace npurt::internal {
namespace {

constexpr uint64_t kMs = 1'000'000;
constexpr uint64_t kStart = 1'000'000 * kMs;  // an arbitrary, bucket-aligned clock value

TEST(UtilizationMeter, AnIdleDeviceIsAtZero) {
  UtilizationMeter meter(2);
  EXPECT_EQ(meter.percent(kStart), 0u);
  meter.endBusy(0, kStart);  // no span: nothing happens
  EXPECT_EQ(meter.percent(kStart + 500 * kMs), 0u);
}

TEST(UtilizationMeter, OneBusyCoreOfTwoIsFifty) {
  UtilizationMeter meter(2);
  meter.beginBusy(0, kStart);
  meter.endBusy(0, kStart + 2000 * kMs);
  EXPECT_EQ(meter.percent(kStart + 2000 * kMs), 50u);
}

TEST(UtilizationMeter, EveryCoreBusyIsAHundred) {
  UtilizationMeter meter(2);
  for (int w = 0; w < 2; ++w) meter.beginBusy(w, kStart);
  for (int w = 0; w < 2; ++w) meter.endBusy(w, kStart + 1500 * kMs);
  EXPECT_EQ(meter.percent(kStart + 1500 * kMs), 100u);
}

TEST(UtilizationMeter, AnOngoingSpanCounts) {
  UtilizationMeter meter(1);
  meter.beginBusy(0, kStart + 500 * kMs);
  // The window is [100 ms, 1050 ms): 550 ms of it busy.
  EXPECT_EQ(meter.percent(kStart + 1050 * kMs), 58u);
  meter.endBusy(0, kStart + 1050 * kMs);
  EXPECT_EQ(meter.percent(kStart + 1050 * kMs), 58u);  // the same, recorded
}

TEST(UtilizationMeter, WorkOlderThanTheWindowIsForgotten) {
  UtilizationMeter meter(1);
  meter.beginBusy(0, kStart);
  meter.endBusy(0, kStart + 400 * kMs);
  // The window: the current 100 ms bucket and the nine before it, so
  // [-500 ms, 400 ms) here: 400 of 900 ms busy.
  EXPECT_EQ(meter.percent(kStart + 400 * kMs), 44u);
  EXPECT_EQ(meter.percent(kStart + 2500 * kMs), 0u);
  // A bucket reused a second later starts from zero.
  meter.beginBusy(0, kStart + 2000 * kMs);
  meter.endBusy(0, kStart + 2050 * kMs);
  EXPECT_EQ(meter.percent(kStart + 2900 * kMs), 6u);  // 50 of the 900 ms of [2000, 2900)
}

TEST(UtilizationMeter, ALongSpanFillsOnlyTheWindow) {
  UtilizationMeter meter(1);
  meter.beginBusy(0, kStart);
  meter.endBusy(0, kStart + 60'000 * kMs);  // a minute
  EXPECT_EQ(meter.percent(kStart + 60'000 * kMs), 100u);
  EXPECT_EQ(meter.percent(kStart + 60'500 * kMs), 44u);  // 400 of the 900 ms of [59.6 s, 60.5 s)
}

}  // namespace
}  // namespace npurt::internal
