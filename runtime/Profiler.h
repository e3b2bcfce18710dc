#pragma once
// Per-launch timing of compiled models. An Executable with profiling on reads the steady clock
// around each launch and hands its run's events to its Profiler at the end of the run; with
// profiling off nothing is timed or recorded (the run loop does not even branch per launch).
// The profiler turns the events into a Chrome-trace JSON file (chrome://tracing, Perfetto)
// with one complete event per launch, and into a table of the kernels that took longest.
#include <cstddef>
#include <cstdint>
#include <mutex>
#include <string>
#include <vector>

namespace kiln::runtime {

class Profiler {
public:
  /// One launch, as timed by one run.
  struct Event {
    int32_t launch = 0;  // index into the launch names
    uint32_t thread = 0; // Profiler::threadIndex() of the thread that ran it
    int64_t startNs = 0; // Profiler::nowNs() when it started
    int64_t durationNs = 0;
  };

  /// Time spent in the launches of one name, over all recorded runs.
  struct KernelTime {
    std::string name;
    int64_t calls = 0;
    double totalMs = 0;
    double share = 0; // of the time of all recorded launches, in [0, 1]
  };

  /// `launchNames[i]` names launch i in traces and tables.
  explicit Profiler(std::vector<std::string> launchNames = {});
  Profiler(const Profiler &) = delete;
  Profiler &operator=(const Profiler &) = delete;

  /// Appends events (thread-safe). Events naming no launch are kept under "launch<N>".
  void record(const Event *events, size_t count);
  void clear();
  std::vector<Event> events() const;

  /// Chrome-trace JSON: {"traceEvents": [...]} with one "X" (complete) event per recorded
  /// launch (ts and dur in microseconds from the first event), plus thread-name metadata.
  std::string chromeTrace() const;
  /// Writes chromeTrace() to `path`; a kiln::Error names the path when it cannot.
  void writeChromeTrace(const std::string &path) const;

  /// The `count` names with the largest total time, largest first (ties by name).
  std::vector<KernelTime> topKernels(size_t count = 10) const;
  /// topKernels(count) as an aligned text table, one line per kernel after a header.
  std::string formatTopKernels(size_t count = 10) const;

  /// Nanoseconds on the steady clock.
  static int64_t nowNs();
  /// A small number naming the calling thread, stable for its lifetime (0, 1, 2, ... in the
  /// order threads first ask).
  static uint32_t threadIndex();

private:
  std::string launchName(int32_t launch) const;

  std::vector<std::string> launchNames_;
  mutable std::mutex mutex_;
  std::vector<Event> events_;
};

} // namespace kiln::runtime
