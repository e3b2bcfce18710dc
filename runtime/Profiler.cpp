#include "runtime/Profiler.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <fstream>
#include <map>
#include <set>

#include <fmt/format.h>

#include "core/Error.h"

namespace kiln::runtime {

namespace {

/// Appends `text` as the contents of a JSON string. Launch names come from a compiled model, so
/// quotes, backslashes and control characters are escaped rather than trusted.
void appendJsonString(std::string &out, const std::string &text) {
  for (unsigned char c : text) {
    if (c == '"' || c == '\\') {
      out += '\\';
      out += static_cast<char>(c);
    } else if (c < 0x20) {
      out += fmt::format("\\u{:04x}", static_cast<unsigned>(c));
    } else {
      out += static_cast<char>(c);
    }
  }
}

} // namespace

Profiler::Profiler(std::vector<std::string> launchNames) : launchNames_(std::move(launchNames)) {}

void Profiler::record(const Event *events, size_t count) {
  std::lock_guard<std::mutex> lock(mutex_);
  events_.insert(events_.end(), events, events + count);
}

void Profiler::clear() {
  std::lock_guard<std::mutex> lock(mutex_);
  events_.clear();
}

std::vector<Profiler::Event> Profiler::events() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return events_;
}

std::string Profiler::launchName(int32_t launch) const {
  if (launch >= 0 && static_cast<size_t>(launch) < launchNames_.size())
    return launchNames_[static_cast<size_t>(launch)];
  return fmt::format("launch{}", launch);
}

std::string Profiler::chromeTrace() const {
  std::vector<Event> all = events();
  int64_t origin = all.empty() ? 0 : all.front().startNs;
  std::set<uint32_t> threads;
  for (const Event &event : all) {
    origin = std::min(origin, event.startNs);
    threads.insert(event.thread);
  }

  std::string out = "{\"displayTimeUnit\":\"ms\",\"traceEvents\":[";
  bool first = true;
  auto separate = [&] {
    out += first ? "\n" : ",\n";
    first = false;
  };
  for (uint32_t thread : threads) {
    separate();
    out += fmt::format("{{\"name\":\"thread_name\",\"ph\":\"M\",\"pid\":1,\"tid\":{},"
                       "\"args\":{{\"name\":\"kiln run thread {}\"}}}}",
                       thread, thread);
  }
  for (const Event &event : all) {
    separate();
    out += "{\"name\":\"";
    appendJsonString(out, launchName(event.launch));
    // Microseconds with nanosecond digits: Chrome trace's unit, Perfetto keeps the precision.
    out += fmt::format("\",\"cat\":\"kernel\",\"ph\":\"X\",\"pid\":1,\"tid\":{},\"ts\":{:.3f},"
                       "\"dur\":{:.3f},\"args\":{{\"launch\":{}}}}}",
                       event.thread, static_cast<double>(event.startNs - origin) / 1e3,
                       static_cast<double>(event.durationNs) / 1e3, event.launch);
  }
  out += "\n]}\n";
  return out;
}

void Profiler::writeChromeTrace(const std::string &path) const {
  std::string text = chromeTrace();
  std::ofstream file(path, std::ios::binary);
  if (!file)
    fail("cannot write the profile trace '{}'", path);
  file.write(text.data(), static_cast<std::streamsize>(text.size()));
  file.close();
  if (!file)
    fail("cannot write the profile trace '{}'", path);
}

std::vector<Profiler::KernelTime> Profiler::topKernels(size_t count) const {
  struct Total {
    int64_t calls = 0, ns = 0;
  };
  std::map<std::string, Total> byName; // sorted by name, so ties below stay in name order
  int64_t allNs = 0;
  for (const Event &event : events()) {
    Total &total = byName[launchName(event.launch)];
    total.calls += 1;
    total.ns += event.durationNs;
    allNs += event.durationNs;
  }
  std::vector<std::pair<std::string, Total>> sorted(byName.begin(), byName.end());
  // Integer nanoseconds keep the order exact where milliseconds as doubles could tie.
  std::stable_sort(sorted.begin(), sorted.end(),
                   [](const auto &a, const auto &b) { return a.second.ns > b.second.ns; });
  if (sorted.size() > count)
    sorted.resize(count);
  std::vector<KernelTime> result;
  result.reserve(sorted.size());
  for (const auto &[name, total] : sorted)
    result.push_back(
        KernelTime{name, total.calls, static_cast<double>(total.ns) / 1e6,
                   allNs > 0 ? static_cast<double>(total.ns) / static_cast<double>(allNs) : 0.0});
  return result;
}

std::string Profiler::formatTopKernels(size_t count) const {
  std::vector<KernelTime> top = topKernels(count);
  size_t width = 6; // "kernel"
  for (const KernelTime &time : top)
    width = std::max(width, time.name.size());
  std::string out =
      fmt::format("{:<{}}  {:>8}  {:>11}  {:>6}\n", "kernel", width, "calls", "total ms", "share");
  for (const KernelTime &time : top)
    out += fmt::format("{:<{}}  {:>8}  {:>11.3f}  {:>5.1f}%\n", time.name, width, time.calls,
                       time.totalMs, time.share * 100.0);
  return out;
}

int64_t Profiler::nowNs() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

uint32_t Profiler::threadIndex() {
  static std::atomic<uint32_t> next{0};
  thread_local uint32_t index = next.fetch_add(1, std::memory_order_relaxed);
  return index;
}

} // namespace kiln::runtime
