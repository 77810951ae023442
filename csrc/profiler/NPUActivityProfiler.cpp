// See NPUActivityProfiler.h.
#include "profiler/NPUActivityProfiler.h"

#include <c10/util/Exception.h>
#include <libkineto.h>
#include <output_base.h>
#include <torch/csrc/profiler/standalone/privateuse1_profiler.h>

#include <algorithm>
#include <chrono>
#include <utility>

#include "core/ActivityCorrelation.h"
#include "npurt/npurt.h"
#include "npurt/npurt_activity.h"

namespace c10_npu::profiler {
namespace {

int64_t kinetoNowNs() {
  // Kineto's clock: ns since the Unix epoch (libkineto::timeSinceEpoch).
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

libkineto::ActivityType kinetoType(npuActivityKind kind) {
  switch (kind) {
    case npuActivityKindMemcpy:
      return libkineto::ActivityType::GPU_MEMCPY;
    case npuActivityKindMemset:
      return libkineto::ActivityType::GPU_MEMSET;
    default:
      return libkineto::ActivityType::CONCURRENT_KERNEL;
  }
}

const char* kindName(npuActivityKind kind) {
  switch (kind) {
    case npuActivityKindKernel:
      return "kernel";
    case npuActivityKindHostFunc:
      return "host_func";
    case npuActivityKindMemcpy:
      return "memcpy";
    case npuActivityKindMemset:
      return "memset";
    case npuActivityKindEventRecord:
      return "event_record";
    case npuActivityKindEventWait:
      return "event_wait";
    case npuActivityKindGraph:
      return "graph";
  }
  return "task";
}

// What processTrace needs while npuActivityFlush calls back.
struct FlushContext {
  libkineto::CpuTraceBuffer* buffer;
  libkineto::getLinkedActivityCallback* linked;  // may be null
  int64_t offsetNs;
  std::set<int>* devices;
  std::set<std::pair<int, uint64_t>>* streams;
};

void onRecord(const npuActivityRecord* r, void* userData) {
  auto& ctx = *static_cast<FlushContext*>(userData);
  ctx.buffer->emplace_activity(ctx.buffer->span, kinetoType(r->kind), r->name);
  libkineto::GenericTraceActivity& act = *ctx.buffer->activities.back();
  act.startTime = static_cast<int64_t>(r->startNs) + ctx.offsetNs;
  act.endTime = static_cast<int64_t>(r->endNs) + ctx.offsetNs;
  act.device = r->device;
  act.resource = static_cast<int32_t>(r->stream);
  act.threadId = static_cast<int32_t>(r->stream);
  act.id = static_cast<int32_t>(r->externalId);
  if (r->externalId != 0 && ctx.linked != nullptr && *ctx.linked) {
    act.linked = (*ctx.linked)(static_cast<int32_t>(r->externalId));
  }
  act.addMetadata("device", r->device);
  act.addMetadata("stream", r->stream);
  act.addMetadataQuoted("kind", kindName(r->kind));
  if (r->externalId != 0) act.addMetadata("correlation", r->externalId);
  if (r->enqueueNs != 0) {
    const uint64_t queuedNs = r->startNs - std::min(r->startNs, r->enqueueNs);
    act.addMetadata("queued us", static_cast<double>(queuedNs) / 1000.0);
  }
  if (r->failed != 0) act.addMetadata("failed", "true");
  ctx.devices->insert(r->device);
  ctx.streams->emplace(r->device, r->stream);
}

}  // namespace

NPUActivityProfilerSession::NPUActivityProfilerSession()
    : buffer_(std::make_unique<libkineto::CpuTraceBuffer>()) {}

NPUActivityProfilerSession::~NPUActivityProfilerSession() {
  if (running_) stop();
}

void NPUActivityProfilerSession::start() {
  // Two reads as close together as possible; the error is their gap (< 1 µs).
  const int64_t npurtNs = static_cast<int64_t>(npuGetTimestampNs());
  startNs_ = kinetoNowNs();
  clockOffsetNs_ = startNs_ - npurtNs;
  if (npuActivityEnable() != npuSuccess) {
    errors_.push_back(std::string("npuActivityEnable failed: ") + npuGetLastErrorMessage());
    status_ = libkineto::TraceStatus::ERROR;
    return;
  }
  setCollecting(true);
  running_ = true;
  status_ = libkineto::TraceStatus::RECORDING;
}

void NPUActivityProfilerSession::stop() {
  if (!running_) return;
  setCollecting(false);
  (void)npuActivityDisable();
  stopNs_ = kinetoNowNs();
  running_ = false;
  status_ = libkineto::TraceStatus::PROCESSING;
}

void NPUActivityProfilerSession::processTrace(libkineto::ActivityLogger& logger) {
  processTrace(logger, nullptr, startNs_, stopNs_);
}

void NPUActivityProfilerSession::processTrace(
    libkineto::ActivityLogger& logger, libkineto::getLinkedActivityCallback getLinkedActivity,
    int64_t /*startTime*/, int64_t /*endTime*/) {
  buffer_->span = libkineto::TraceSpan(startNs_, stopNs_, "npu");
  FlushContext ctx{buffer_.get(), &getLinkedActivity, clockOffsetNs_, &devices_, &streams_};
  const size_t before = buffer_->activities.size();
  if (npuActivityFlush(&onRecord, &ctx) != npuSuccess) {
    errors_.push_back(std::string("npuActivityFlush failed: ") + npuGetLastErrorMessage());
  }
  // The buffer owns the activities and outlives the logger's pointers to
  // them: Kineto takes it over in getTraceBuffer (see GenericActivityProfiler).
  for (size_t i = before; i < buffer_->activities.size(); ++i) {
    logger.handleActivity(*buffer_->activities[i]);
  }
  buffer_->gpuOpCount = static_cast<int>(buffer_->activities.size());
}

std::unique_ptr<libkineto::DeviceInfo> NPUActivityProfilerSession::getDeviceInfo() {
  // Kineto takes one device per session; the rows of every other device are
  // named by getResourceInfos and their pid alone.
  const int device = devices_.empty() ? 0 : *devices_.begin();
  return std::make_unique<libkineto::DeviceInfo>(libkineto::DeviceInfo{
      device, device, "NPU " + std::to_string(device), "NPU " + std::to_string(device)});
}

std::vector<libkineto::ResourceInfo> NPUActivityProfilerSession::getResourceInfos() {
  std::vector<libkineto::ResourceInfo> rows;
  for (const auto& [device, stream] : streams_) {
    const auto id = static_cast<int64_t>(stream);
    rows.push_back(libkineto::ResourceInfo{id, id, device, "stream " + std::to_string(stream)});
  }
  return rows;
}

std::unique_ptr<libkineto::CpuTraceBuffer> NPUActivityProfilerSession::getTraceBuffer() {
  auto taken = std::move(buffer_);
  buffer_ = std::make_unique<libkineto::CpuTraceBuffer>();
  return taken;
}

void NPUActivityProfilerSession::pushCorrelationId(uint64_t id) {
  pushId(static_cast<uint32_t>(id));
}

void NPUActivityProfilerSession::popCorrelationId() { popId(); }

const std::string& NPUActivityProfiler::name() const {
  static const std::string kName = "npu";
  return kName;
}

const std::set<libkineto::ActivityType>& NPUActivityProfiler::availableActivities() const {
  static const std::set<libkineto::ActivityType> kTypes{
      libkineto::ActivityType::CONCURRENT_KERNEL, libkineto::ActivityType::GPU_MEMCPY,
      libkineto::ActivityType::GPU_MEMSET};
  return kTypes;
}

std::unique_ptr<libkineto::IActivityProfilerSession> NPUActivityProfiler::configure(
    const std::set<libkineto::ActivityType>& activityTypes, const libkineto::Config& /*config*/) {
  for (const libkineto::ActivityType type : availableActivities()) {
    if (activityTypes.count(type) != 0) return std::make_unique<NPUActivityProfilerSession>();
  }
  return nullptr;  // a CPU-only profile: no device rows wanted
}

std::unique_ptr<libkineto::IActivityProfilerSession> NPUActivityProfiler::configure(
    int64_t /*tsMs*/, int64_t /*durationMs*/,
    const std::set<libkineto::ActivityType>& activityTypes, const libkineto::Config& config) {
  return configure(activityTypes, config);
}

REGISTER_PRIVATEUSE1_PROFILER(NPUActivityProfiler);

}  // namespace c10_npu::profiler
