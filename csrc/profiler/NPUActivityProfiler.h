// The npu's Kineto activity profiler: torch.profiler's PrivateUse1 device
// rows.
//
// Layer: profiler (above core and npurt, beside the binding; the only code
// besides the binding that includes torch/csrc, for the profiler registry).
//
// Registered with REGISTER_PRIVATEUSE1_PROFILER, so Kineto configures a
// session whenever a profile asks for device activities
// (ProfilerActivity.PrivateUse1, or use_device="npu" with Kineto). A session
// turns on npurt's activity log (npurt_activity.h) and the task queue's
// correlation (Note [Correlation through the task queue]) at start, and at
// processTrace hands every task the devices ran as a Kineto activity:
//  - one row per (device, stream): pid = device, tid = npurt stream id,
//    named "NPU <d>" and "stream <id>";
//  - kernels (operators, host functions, graph nodes and launches) as
//    CONCURRENT_KERNEL, copies as GPU_MEMCPY, memsets as GPU_MEMSET, event
//    records and waits as CONCURRENT_KERNEL named npuEventRecord /
//    npuStreamWaitEvent (args "kind" tells them apart);
//  - each linked to the CPU op that queued it (its correlation id): the
//    trace's "External id" of both, and what gives key_averages() its
//    device times.
// Timestamps are converted from npurt's steady clock to Kineto's (ns since
// the Unix epoch) with the offset measured at start.
//
// Thread safety: Kineto calls a session from its own threads one call at a
// time, except push/popCorrelationId, which come from every thread running
// operators and touch only thread-local state.
#pragma once

#include <IActivityProfiler.h>

#include <cstdint>
#include <memory>
#include <set>
#include <string>
#include <vector>

namespace c10_npu::profiler {

class NPUActivityProfilerSession final : public libkineto::IActivityProfilerSession {
 public:
  NPUActivityProfilerSession();
  ~NPUActivityProfilerSession() override;

  void start() override;
  void stop() override;
  std::vector<std::string> errors() override { return errors_; }
  void processTrace(libkineto::ActivityLogger& logger) override;
  void processTrace(libkineto::ActivityLogger& logger,
                    libkineto::getLinkedActivityCallback getLinkedActivity, int64_t startTime,
                    int64_t endTime) override;
  std::unique_ptr<libkineto::DeviceInfo> getDeviceInfo() override;
  std::vector<libkineto::ResourceInfo> getResourceInfos() override;
  std::unique_ptr<libkineto::CpuTraceBuffer> getTraceBuffer() override;
  void pushCorrelationId(uint64_t id) override;
  void popCorrelationId() override;

 private:
  std::unique_ptr<libkineto::CpuTraceBuffer> buffer_;
  std::set<int> devices_;                  // devices that ran recorded tasks
  std::set<std::pair<int, uint64_t>> streams_;  // (device, npurt stream id) rows
  std::vector<std::string> errors_;
  int64_t clockOffsetNs_ = 0;  // Kineto time minus npurt time
  int64_t startNs_ = 0;        // Kineto time at start / stop
  int64_t stopNs_ = 0;
  bool running_ = false;
};

class NPUActivityProfiler final : public libkineto::IActivityProfiler {
 public:
  const std::string& name() const override;
  const std::set<libkineto::ActivityType>& availableActivities() const override;
  std::unique_ptr<libkineto::IActivityProfilerSession> configure(
      const std::set<libkineto::ActivityType>& activityTypes,
      const libkineto::Config& config) override;
  std::unique_ptr<libkineto::IActivityProfilerSession> configure(
      int64_t tsMs, int64_t durationMs, const std::set<libkineto::ActivityType>& activityTypes,
      const libkineto::Config& config) override;
};

}  // namespace c10_npu::profiler
