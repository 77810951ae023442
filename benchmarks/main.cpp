// npurt_bench: Google Benchmark programs for the npurt runtime, followed by a
// summary of the performance targets (measured, target, met).
//
//   build/benchmarks/npurt_bench --benchmark_min_time=0.1s --benchmark_repetitions=5
//       --benchmark_enable_random_interleaving=true --benchmark_report_aggregates_only=true
//
// (what `make bench` runs: NPURT_BENCH_FLAGS in the Makefile).
// All Google Benchmark flags work (--benchmark_filter, --benchmark_format,
// --benchmark_out, --benchmark_repetitions, ...). The summary uses the median
// over repetitions and says "not run" for a target whose benchmarks were
// filtered out; it is printed to stdout after the benchmark output (so for
// machine-readable results use --benchmark_out=<file>). The exit status is non-zero only if a
// benchmark failed (an npurt call returned an error); a missed target is reported, not fatal,
// because timings depend on the load of the machine.
#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <map>
#include <string>
#include <vector>

#include "bench_common.h"

namespace npubench {
namespace {

// Forwards everything to the display reporter chosen by the flags and keeps
// the counters of every successful run for the summary.
class CapturingReporter : public benchmark::BenchmarkReporter {
 public:
  explicit CapturingReporter(benchmark::BenchmarkReporter* display) : display_(display) {}

  bool ReportContext(const Context& context) override { return display_->ReportContext(context); }

  void ReportRuns(const std::vector<Run>& runs) override {
    for (const Run& run : runs) {
      if (run.error_occurred) {
        failed_ = true;
        continue;
      }
      // Single runs, and the "median" aggregate, which is all there is with
      // --benchmark_report_aggregates_only.
      const bool isMedian = run.run_type == Run::RT_Aggregate && run.aggregate_name == "median";
      if (run.run_type != Run::RT_Iteration && !isMedian) continue;
      std::string key = run.run_name.function_name;
      if (!run.run_name.args.empty()) key += "/" + run.run_name.args;
      auto& target = isMedian ? medians_ : values_;
      for (const auto& [name, counter] : run.counters) target[key][name].push_back(counter.value);
    }
    display_->ReportRuns(runs);
  }

  void Finalize() override { display_->Finalize(); }

  bool failed() const { return failed_; }
  bool empty() const { return values_.empty() && medians_.empty(); }

  // Median of counter `name` of benchmark `key` over its repetitions, or a
  // negative value if it did not run.
  double median(const std::string& key, const std::string& name) const {
    if (const std::vector<double>* m = find(medians_, key, name)) return m->front();
    const std::vector<double>* found = find(values_, key, name);
    if (found == nullptr) return -1.0;
    std::vector<double> v = *found;
    std::sort(v.begin(), v.end());
    const size_t n = v.size();
    return n % 2 == 1 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2.0;
  }

 private:
  using Values = std::map<std::string, std::map<std::string, std::vector<double>>>;

  // The values of counter `name` of benchmark `key` in `values`, or nullptr.
  static const std::vector<double>* find(const Values& values, const std::string& key,
                                         const std::string& name) {
    auto byKey = values.find(key);
    if (byKey == values.end()) return nullptr;
    auto byName = byKey->second.find(name);
    if (byName == byKey->second.end() || byName->second.empty()) return nullptr;
    return &byName->second;
  }

  benchmark::BenchmarkReporter* display_;  // owned by the benchmark library
  Values values_;                          // benchmark key -> counter -> value of each repetition
  Values medians_;                         // the same from "median" aggregates (one value each)
  bool failed_ = false;
};

// One row: ours and the reference it is compared with, and the target on
// ours / reference.
struct TargetRow {
  std::string what;
  std::string unit;
  double ours;
  double reference;
  bool atMost;  // target is ratio <= limit (else ratio >= limit)
  double limit;
};

bool printSummary(const CapturingReporter& reporter) {
  std::vector<TargetRow> rows;
  const std::string baseline = kEnqueueBaseline;
  for (int producers : {1, 4}) {
    // One producer: the pinned placement when it ran (see enqueue_bench.cpp).
    std::string args = "/producers:" + std::to_string(producers) + "/pinned:1";
    double reference = reporter.median(baseline + args, kEnqueueCounter);
    if (reference < 0) {
      args = "/producers:" + std::to_string(producers) + "/pinned:0";
      reference = reporter.median(baseline + args, kEnqueueCounter);
    }
    for (const char* ours : {kEnqueueLaunch, kEnqueueHostFunc}) {
      const char* api = std::strchr(ours, '/') + 1;  // "npurt::launch", ...
      rows.push_back({std::string("enqueue ") + api + ", " + std::to_string(producers) +
                          (producers == 1 ? " producer" : " producers"),
                      "ns/task", reporter.median(ours + args, kEnqueueCounter), reference, true,
                      0.5});
    }
  }
  const double gib = 1024.0 * 1024.0 * 1024.0;
  for (int mib : {64, 256}) {
    const std::string args = "/bytes:" + std::to_string(int64_t{mib} << 20);
    rows.push_back({"npuMemcpy D2D " + std::to_string(mib) + " MiB", "GiB/s",
                    reporter.median(kMemcpyD2D + args, "bytes_per_second") / gib,
                    reporter.median(kMemcpyStdSameBuffers + args, "bytes_per_second") / gib, false,
                    0.8});
  }

  std::printf(
      "\nnpurt targets (reference: baseline stream for enqueue, std::memcpy between the same "
      "buffers for copies)\n");
  std::printf("%-40s %8s %12s %12s %8s %8s  %s\n", "measure", "unit", "ours", "reference", "ratio",
              "target", "met");
  bool allMet = true;
  for (const TargetRow& row : rows) {
    char target[16];
    std::snprintf(target, sizeof target, "%s%.2f", row.atMost ? "<=" : ">=", row.limit);
    if (row.ours < 0 || row.reference <= 0) {
      std::printf("%-40s %8s %12s %12s %8s %8s  %s\n", row.what.c_str(), row.unit.c_str(), "-", "-",
                  "-", target, "not run");
      continue;
    }
    const double ratio = row.ours / row.reference;
    const bool met = row.atMost ? ratio <= row.limit : ratio >= row.limit;
    allMet = allMet && met;
    std::printf("%-40s %8s %12.2f %12.2f %8.3f %8s  %s\n", row.what.c_str(), row.unit.c_str(),
                row.ours, row.reference, ratio, target, met ? "yes" : "NO");
  }
  return allMet;
}

#if defined(NPU_BENCHMARK_MIN_TIME_WITHOUT_UNIT)
// Rewrites "--benchmark_min_time=<seconds>s" to "--benchmark_min_time=<seconds>"
// in place (the argument only gets shorter). Needed for Google Benchmark < 1.8,
// which takes a plain number and fails on the suffix that newer versions
// require; the Makefile passes the newer form.
void stripMinTimeUnit(int argc, char** argv) {
  static constexpr char kFlag[] = "--benchmark_min_time=";
  for (int i = 1; i < argc; ++i) {
    char* arg = argv[i];
    if (std::strncmp(arg, kFlag, sizeof kFlag - 1) != 0) continue;
    const size_t length = std::strlen(arg);
    if (length > sizeof kFlag && arg[length - 1] == 's') arg[length - 1] = '\0';
  }
}
#endif

}  // namespace
}  // namespace npubench

int main(int argc, char** argv) {
  // Task delay is a debug knob (NPU_SIM_TASK_DELAY_US); it must not distort
  // the figures.
  if (npuSetTaskDelay(0) != npuSuccess) {
    std::fprintf(stderr, "npurt_bench: npuSetTaskDelay: %s\n", npuGetLastErrorMessage());
    return 1;
  }
#if defined(NPU_BENCHMARK_MIN_TIME_WITHOUT_UNIT)
  npubench::stripMinTimeUnit(argc, argv);
#endif
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  npubench::registerEnqueueBenchmarks();
  npubench::registerSyncBenchmarks();
  npubench::registerMemcpyBenchmarks();
  npubench::registerGraphBenchmarks();
  npubench::registerRaceCheckBenchmarks();

  npubench::CapturingReporter reporter(benchmark::CreateDefaultDisplayReporter());
  benchmark::RunSpecifiedBenchmarks(&reporter);
  // Nothing ran (e.g. --benchmark_list_tests): no summary to print.
  if (!reporter.empty()) {
    const bool allMet = npubench::printSummary(reporter);
    std::printf("all targets met: %s\n", allMet ? "yes" : "no");
  }
  benchmark::Shutdown();
  npubench::releaseMemcpyBuffers();
  return reporter.failed() ? 1 : 0;
}
