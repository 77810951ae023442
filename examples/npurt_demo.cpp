// npurt_demo — the npurt C API used the way a library on top of it uses it.
//
//   build/examples/npurt_demo [trace.json]      (make demo)
//
// The work, on two devices and three streams:
//
//   device 0, "producer":  H2D copy of the input x, then kernel scale: x = 2x + 1
//                          (slowed to 2 ms per task, see below), record `produced`
//   device 0, "consumer":  wait `produced`; kernel reduce: s0 = sum(x)
//   device 1, "remote":    kernel fill: w = 0.5 (independent, overlaps the producer);
//                          wait `produced` (cross-device); peer copy x to device 1;
//                          kernel dot: s1 = sum(x * w); record `remoteDone`
//   device 0, "consumer":  wait `remoteDone` (cross-device); peer copy s1 to device 0;
//                          kernel combine: total = s0 + s1; D2H copy of total
//
// and checks total == 1.5 * sum(2x + 1) computed on the host. The producer stream
// has a task delay (npuStreamSetTaskDelay), so a consumer that did not wait for
// `produced` would read the unscaled input every time, not just by bad luck.
//
// Every step is bracketed by two timing events on its stream; the elapsed
// times and a Chrome trace (open it in https://ui.perfetto.dev) show what ran
// where. Exits non-zero on any failure.
#include <cstdio>
#include <exception>
#include <stdexcept>
#include <string>
#include <vector>

#include "npurt/npurt.h"
#include "npurt/npurt.hpp"

namespace {

// Evaluates an npurt call once and throws, naming the call and the status,
// if it failed. npuGetLastErrorMessage() carries the runtime's details.
#define NPU_DEMO_CHECK(expr) checkStatus((expr), #expr, __LINE__)

void checkStatus(npuError_t status, const char* expr, int line) {
  if (status == npuSuccess) return;
  throw std::runtime_error(std::string(expr) + " (line " + std::to_string(line) + ") failed: " +
                           npuGetErrorName(status) + ": " + npuGetLastErrorMessage());
}

constexpr size_t kCount = size_t{1} << 20;  // elements of x (4 MiB of float)
constexpr uint32_t kProducerDelayUs = 2000;

// Device allocation owned by scope. npuFree is safe even with copies still
// queued on the memory (see Note [Memory lifetime] in csrc/npurt/README.md).
class DeviceBuffer {
 public:
  DeviceBuffer(int device, size_t bytes) : bytes_(bytes) {
    npurt::DeviceGuard guard(device);  // npuMalloc allocates on the current device
    NPU_DEMO_CHECK(npuMalloc(&ptr_, bytes));
  }
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;
  ~DeviceBuffer() { (void)npuFree(ptr_); }

  template <typename T>
  T* as() const {
    return static_cast<T*>(ptr_);
  }
  void* get() const { return ptr_; }
  size_t bytes() const { return bytes_; }

 private:
  void* ptr_ = nullptr;
  size_t bytes_;
};

// A stream with a name for the printout.
struct NamedStream {
  const char* name;
  int device;
  npurt::StreamHandle handle;

  NamedStream(const char* streamName, int onDevice) : name(streamName), device(onDevice) {
    npurt::DeviceGuard guard(onDevice);  // streams belong to the current device
    handle = npurt::StreamHandle::create();
  }
  npuStream_t get() const { return handle.get(); }
  uint64_t id() const {
    uint64_t value = 0;
    NPU_DEMO_CHECK(npuStreamGetId(handle.get(), &value));
    return value;
  }
};

// Two timing events around one step of one stream; printed after the run.
struct Step {
  const NamedStream* stream;
  std::string what;
  int after;  // index of the step this one must start after (via an event), or -1
  npurt::EventHandle begin = npurt::EventHandle::create();
  npurt::EventHandle end = npurt::EventHandle::create();
};

// Records the step's begin event, lets enqueue() put the step's work on the
// stream, records the end event. Returns the step's index.
template <typename F>
int step(std::vector<Step>& steps, const NamedStream& stream, std::string what, int after,
         F enqueue) {
  Step& s = steps.emplace_back(Step{&stream, std::move(what), after});
  NPU_DEMO_CHECK(npuEventRecord(s.begin.get(), stream.get()));
  enqueue();
  NPU_DEMO_CHECK(npuEventRecord(s.end.get(), stream.get()));
  return static_cast<int>(steps.size()) - 1;
}

uint64_t timestampNs(const npurt::EventHandle& event) {
  uint64_t ns = 0;
  NPU_DEMO_CHECK(npuEventGetTimestamp(event.get(), &ns));
  return ns;
}

// The scale kernel through the raw C task interface, as a C library would
// write it: arguments on the heap, freed by release() whether or not the task
// ran.
struct ScaleArgs {
  float* x;
  size_t count;
  float a;
  float b;
};

int scaleRun(void* userData, char* errorBuf, size_t errorBufSize) {
  const auto* args = static_cast<const ScaleArgs*>(userData);
  if (args->x == nullptr) {
    std::snprintf(errorBuf, errorBufSize, "scale: x is NULL");
    return 1;
  }
  for (size_t i = 0; i < args->count; ++i) args->x[i] = args->a * args->x[i] + args->b;
  return 0;
}

void scaleRelease(void* userData) { delete static_cast<ScaleArgs*>(userData); }

void launchScale(npuStream_t stream, float* x, size_t count, float a, float b) {
  auto* args = new ScaleArgs{x, count, a, b};
  const npuTask task{"scale", &scaleRun, &scaleRelease, args, 0u};
  const npuError_t status = npuLaunchTask(stream, &task);
  if (status != npuSuccess) delete args;  // not enqueued: release() will not run
  NPU_DEMO_CHECK(status);
}

int run(const char* tracePath) {
  int deviceCount = 0;
  NPU_DEMO_CHECK(npuGetDeviceCount(&deviceCount));
  npuDeviceProp prop{};
  NPU_DEMO_CHECK(npuGetDeviceProperties(&prop, 0));
  // With NPU_SIM_DEVICE_COUNT=1 the "remote" stream shares device 0; the
  // program is otherwise unchanged.
  const int remoteDevice = deviceCount > 1 ? 1 : 0;
  std::printf("npurt demo: %d device(s) with %d core(s) each; remote work on device %d\n",
              deviceCount, prop.coreCount, remoteDevice);

  NPU_DEMO_CHECK(npuTraceStart());

  // Host input: multiples of 1/1024 in [0, 1), so every sum below is exact in
  // double and the check can demand equality.
  std::vector<float> hostX(kCount);
  for (size_t i = 0; i < kCount; ++i) hostX[i] = static_cast<float>(i % 1024) / 1024.0f;
  double expectedSum = 0.0;
  for (float v : hostX) expectedSum += 2.0 * v + 1.0;
  const double expected = 1.5 * expectedSum;

  NamedStream producer("producer", 0);
  NamedStream consumer("consumer", 0);
  NamedStream remote("remote", remoteDevice);
  NPU_DEMO_CHECK(npuStreamSetTaskDelay(producer.get(), kProducerDelayUs));

  DeviceBuffer x0(0, kCount * sizeof(float));             // x on device 0
  DeviceBuffer s0(0, sizeof(double));                     // sum(x), device 0
  DeviceBuffer s1Local(0, sizeof(double));                // s1 copied to device 0
  DeviceBuffer total(0, sizeof(double));                  // s0 + s1
  DeviceBuffer x1(remoteDevice, kCount * sizeof(float));  // x on the remote device
  DeviceBuffer w1(remoteDevice, kCount * sizeof(float));  // weights, remote device
  DeviceBuffer s1(remoteDevice, sizeof(double));          // sum(x * w), remote
  double hostTotal = 0.0;  // D2H target: must outlive the copy (it does: we sync)

  npurt::EventHandle produced = npurt::EventHandle::create(npuEventDisableTiming);
  npurt::EventHandle remoteDone = npurt::EventHandle::create(npuEventDisableTiming);
  std::vector<Step> steps;
  steps.reserve(16);  // Step addresses stay valid while we append

  // --- producer, device 0 ---
  step(steps, producer, "H2D copy of x (4 MiB)", -1, [&] {
    NPU_DEMO_CHECK(
        npuMemcpyAsync(x0.get(), hostX.data(), x0.bytes(), npuMemcpyHostToDevice, producer.get()));
  });
  const int scaled = step(steps, producer, "kernel scale: x = 2x + 1 (npuLaunchTask)", -1,
                          [&] { launchScale(producer.get(), x0.as<float>(), kCount, 2.0f, 1.0f); });
  NPU_DEMO_CHECK(npuEventRecord(produced.get(), producer.get()));

  // --- remote, device 1: the fill does not need x, so it goes before the wait
  // and overlaps the producer ---
  step(steps, remote, "kernel fill: w = 0.5", -1, [&] {
    NPU_DEMO_CHECK(npurt::launch(remote.get(), "fill", [w = w1.as<float>()] {
      for (size_t i = 0; i < kCount; ++i) w[i] = 0.5f;
    }));
  });
  NPU_DEMO_CHECK(npuStreamWaitEvent(remote.get(), produced.get(), 0));  // cross-device
  step(steps, remote, "peer copy of x, device 0 -> remote (D2D)", scaled, [&] {
    NPU_DEMO_CHECK(
        npuMemcpyAsync(x1.get(), x0.get(), x0.bytes(), npuMemcpyDeviceToDevice, remote.get()));
  });
  const int dotted = step(steps, remote, "kernel dot: s1 = sum(x * w)", scaled, [&] {
    NPU_DEMO_CHECK(
        npurt::launch(remote.get(), "dot",
                      [x = x1.as<const float>(), w = w1.as<const float>(), s = s1.as<double>()] {
                        double acc = 0.0;
                        for (size_t i = 0; i < kCount; ++i) acc += static_cast<double>(x[i]) * w[i];
                        *s = acc;
                      }));
  });
  NPU_DEMO_CHECK(npuEventRecord(remoteDone.get(), remote.get()));

  // --- consumer, device 0 ---
  NPU_DEMO_CHECK(npuStreamWaitEvent(consumer.get(), produced.get(), 0));
  step(steps, consumer, "kernel reduce: s0 = sum(x)", scaled, [&] {
    NPU_DEMO_CHECK(
        npurt::launch(consumer.get(), "reduce", [x = x0.as<const float>(), s = s0.as<double>()] {
          double acc = 0.0;
          for (size_t i = 0; i < kCount; ++i) acc += x[i];
          *s = acc;
        }));
  });
  NPU_DEMO_CHECK(npuStreamWaitEvent(consumer.get(), remoteDone.get(), 0));  // cross-device
  step(steps, consumer, "peer copy of s1, remote -> device 0, combine, D2H", dotted, [&] {
    NPU_DEMO_CHECK(npuMemcpyAsync(s1Local.get(), s1.get(), sizeof(double), npuMemcpyDeviceToDevice,
                                  consumer.get()));
    NPU_DEMO_CHECK(npurt::launch(consumer.get(), "combine",
                                 [a = s0.as<const double>(), b = s1Local.as<const double>(),
                                  t = total.as<double>()] { *t = *a + *b; }));
    NPU_DEMO_CHECK(npuMemcpyAsync(&hostTotal, total.get(), sizeof(double), npuMemcpyDeviceToHost,
                                  consumer.get()));
  });

  // The host waits for the last stream only: the event waits order everything
  // else before it. A failed kernel would surface here as npuErrorLaunchFailure.
  NPU_DEMO_CHECK(npuStreamSynchronize(consumer.get()));
  NPU_DEMO_CHECK(npuTraceStop());

  // --- what happened ---
  std::printf("\nproducer tasks are delayed by %u us each (npuStreamSetTaskDelay)\n",
              kProducerDelayUs);
  std::printf("%-10s %6s %6s  %-52s %10s\n", "stream", "id", "device", "step", "elapsed");
  for (const Step& s : steps) {
    float ms = 0.0f;
    NPU_DEMO_CHECK(npuEventElapsedTime(&ms, s.begin.get(), s.end.get()));
    std::printf("%-10s %6llu %6d  %-52s %7.3f ms\n", s.stream->name,
                static_cast<unsigned long long>(s.stream->id()), s.stream->device, s.what.c_str(),
                static_cast<double>(ms));
  }

  // Ordering, from the completion timestamps: every step that waited on an
  // event began after the step it waited for had ended (also across devices).
  bool ordered = true;
  for (const Step& s : steps) {
    if (s.after < 0) continue;
    const Step& before = steps[static_cast<size_t>(s.after)];
    const uint64_t beforeEnd = timestampNs(before.end);
    const uint64_t begin = timestampNs(s.begin);
    if (begin < beforeEnd) {
      std::printf("ORDER VIOLATION: '%s' began %.3f ms before '%s' ended\n", s.what.c_str(),
                  static_cast<double>(beforeEnd - begin) * 1e-6, before.what.c_str());
      ordered = false;
    }
  }
  const double endToEndMs =
      static_cast<double>(timestampNs(steps.back().end) - timestampNs(steps.front().begin)) * 1e-6;
  std::printf("\nevent ordering: %s; end to end %.3f ms\n",
              ordered ? "every step began after the step it waited for had ended" : "VIOLATED",
              endToEndMs);

  const bool correct = hostTotal == expected;
  std::printf("result: total = %.6f, expected %.6f (1.5 * sum(2x + 1)) -> %s\n", hostTotal,
              expected, correct ? "OK" : "WRONG");

  NPU_DEMO_CHECK(npuTraceWrite(tracePath));
  std::printf("trace: %s (load in https://ui.perfetto.dev or chrome://tracing)\n", tracePath);
  return ordered && correct ? 0 : 1;
}

}  // namespace

int main(int argc, char** argv) {
  const char* tracePath = argc > 1 ? argv[1] : "./npurt_demo.trace.json";
  try {
    return run(tracePath);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "npurt_demo: %s\n", e.what());
    return 1;
  }
}
