// kiln-fuzz-compile: differential fuzzing of the compiler. Generates random valid graphs from
// consecutive seeds (tests/fuzz/compile/GraphGenerator.h), compiles each through the inference
// pipeline (several per translation unit), compares every output with the reference evaluator,
// and does the same for the gradient graph of each differentiable case and, compiled in batch
// tiles of one row, for each batch-separable one (ir/BatchTiling.h). A failing case is
// written to the output folder as a .kir reproducer (and a shrunk one); the run ends with
// statistics: graphs, outcomes, op coverage and the ops codegen lowers that were never made.
//
//   kiln-fuzz-compile --seconds 600 --seed 1 --out fuzz-out
//   kiln-fuzz-compile --count 200 --seed 1000
//
// Reference errors (the evaluator rejecting a case) and generator errors are listed with the
// failures: they are bugs of the generator, which must only make valid cases.
//
// Exit status: 0 when nothing failed, 1 when something did, 2 for a usage error, 3 when a
// batch made no progress for --stall-seconds (a hang), after naming its seeds.
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <map>
#include <mutex>
#include <string>
#include <thread>

#include <fmt/format.h>

#include "core/Error.h"
#include "passes/Pass.h"
#include "passes/decompose/Decompose.h"
#include "tests/fuzz/compile/DifferentialCheck.h"
#include "tests/fuzz/compile/GraphGenerator.h"
#include "tests/fuzz/compile/InputDomains.h"
#include "tests/fuzz/compile/Shrink.h"

namespace kiln::fuzz {
namespace {

constexpr const char *kUsage = R"(usage: kiln-fuzz-compile [options]
  --seed S            first generator seed (default 1); seeds S, S+1, ... follow
  --count N           stop after N generated graphs
  --seconds N         stop after about N seconds (default when neither is given: --count 100)
  --batch N           graphs per compiler run (default 16)
  --out DIR           where reproducers go (default fuzz-compile-out)
  --cache-dir DIR     the compile cache (default: the system temp folder's kiln-fuzz-compile-cache)
  --no-gradients      skip the gradient graphs
  --no-shrink         write reproducers as found, without shrinking them
  --stall-seconds N   abort (exit 3) when one batch takes longer (default 900)
  --verbose           one line per failure (and unsupported case) as it is found
  --write-all         also write every generated graph to the output folder (seed<S>.kir)
)";

struct Options {
  uint64_t seed = 1;
  int64_t count = -1;
  double seconds = -1;
  size_t batch = 16;
  std::string out = "fuzz-compile-out";
  std::string cacheDir;
  bool gradients = true;
  bool shrink = true;
  double stallSeconds = 900;
  bool verbose = false;
  bool writeAll = false;
};

Options parseOptions(int argc, char **argv) {
  Options options;
  for (int i = 1; i < argc; ++i) {
    std::string arg = argv[i];
    auto value = [&]() -> std::string {
      if (i + 1 >= argc)
        fail("{} needs a value", arg);
      return argv[++i];
    };
    if (arg == "--seed")
      options.seed = std::stoull(value());
    else if (arg == "--count")
      options.count = std::stoll(value());
    else if (arg == "--seconds")
      options.seconds = std::stod(value());
    else if (arg == "--batch")
      options.batch = std::max<size_t>(1, std::stoull(value()));
    else if (arg == "--out")
      options.out = value();
    else if (arg == "--cache-dir")
      options.cacheDir = value();
    else if (arg == "--no-gradients")
      options.gradients = false;
    else if (arg == "--no-shrink")
      options.shrink = false;
    else if (arg == "--stall-seconds")
      options.stallSeconds = std::stod(value());
    else if (arg == "--verbose")
      options.verbose = true;
    else if (arg == "--write-all")
      options.writeAll = true;
    else if (arg == "--help" || arg == "-h") {
      std::cout << kUsage;
      std::exit(0);
    } else
      fail("unknown argument '{}'", arg);
  }
  if (options.count < 0 && options.seconds < 0)
    options.count = 100;
  if (options.cacheDir.empty())
    options.cacheDir = (std::filesystem::temp_directory_path() / "kiln-fuzz-compile-cache").string();
  return options;
}

struct Failure {
  std::string label, outcome, message, file;
};

struct Statistics {
  int64_t generated = 0, generatorErrors = 0, rejectedSteps = 0, gradientGraphs = 0, batchTileCases = 0;
  std::map<std::string, int64_t> forwardOutcomes, gradientOutcomes, gradientSkipped, batchTileOutcomes;
  std::map<ir::OpKind, int64_t> opCounts;
  std::vector<Failure> failures;
};

void countOps(const ir::Graph &graph, Statistics &stats) {
  for (const ir::Node *node : graph.nodes())
    ++stats.opCounts[node->op()];
}

/// "autodiff: no gradient rule for gather_nd (node %3)" -> its first words, to group reasons.
std::string reasonKey(const std::string &why) {
  std::string key = why.substr(0, why.find(" (node"));
  return key.substr(0, 80);
}

std::string fileNameFor(const CheckCase &checkCase, Outcome outcome, bool shrunk) {
  return fmt::format("{}-seed{}{}{}{}.kir", outcomeName(outcome), checkCase.seed, checkCase.gradient ? "-grad" : "",
                     checkCase.batchTile > 0 ? "-tiles" : "", shrunk ? "-shrunk" : "");
}

void writeFile(const std::filesystem::path &path, const std::string &text) {
  std::ofstream out(path, std::ios::binary);
  out << text;
  if (!out)
    fail("cannot write {}", path.string());
}

/// Aborts the process when the current batch takes longer than the limit (a hang in the
/// compiler, the C++ compiler or a generated kernel), after naming the batch.
class Watchdog {
public:
  explicit Watchdog(double limitSeconds) : limit_(limitSeconds), thread_([this] { watch(); }) {}
  ~Watchdog() {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      done_ = true;
    }
    thread_.join();
  }
  void start(std::string what) {
    std::lock_guard<std::mutex> lock(mutex_);
    what_ = std::move(what);
    since_ = std::chrono::steady_clock::now();
  }

private:
  void watch() {
    for (;;) {
      std::this_thread::sleep_for(std::chrono::milliseconds(200));
      std::lock_guard<std::mutex> lock(mutex_);
      if (done_)
        return;
      double elapsed = std::chrono::duration<double>(std::chrono::steady_clock::now() - since_).count();
      if (!what_.empty() && elapsed > limit_) {
        std::fprintf(stderr, "kiln-fuzz-compile: %s made no progress for %.0f s: aborting\n", what_.c_str(), elapsed);
        std::fflush(stderr);
        std::_Exit(3);
      }
    }
  }

  double limit_;
  std::mutex mutex_;
  std::string what_;
  std::chrono::steady_clock::time_point since_ = std::chrono::steady_clock::now();
  bool done_ = false;
  std::thread thread_;
};

void printSummary(const Statistics &stats, double seconds, std::ostream &out) {
  out << fmt::format("\n== kiln-fuzz-compile: {:.0f} s, {} graphs generated ({} generator errors, {} emitter "
                     "steps rejected), {} gradient graphs ==\n",
                     seconds, stats.generated, stats.generatorErrors, stats.rejectedSteps, stats.gradientGraphs);
  auto outcomes = [&](const char *what, const std::map<std::string, int64_t> &counts) {
    out << what << ":";
    for (const auto &[name, count] : counts)
      out << " " << name << " " << count;
    out << "\n";
  };
  outcomes("forward graphs", stats.forwardOutcomes);
  outcomes("gradient graphs", stats.gradientOutcomes);
  outcomes(fmt::format("batch-separable graphs in tiles of one row ({})", stats.batchTileCases).c_str(),
           stats.batchTileOutcomes);
  if (!stats.gradientSkipped.empty()) {
    out << "gradient graphs not built (by reason):\n";
    for (const auto &[reason, count] : stats.gradientSkipped)
      out << fmt::format("  {:6} {}\n", count, reason);
  }
  out << "ops in the compiled graphs (count):\n";
  int column = 0;
  for (const auto &[op, count] : stats.opCounts) {
    out << fmt::format("  {:<20}{:>8}", ir::opName(op), count);
    if (++column % 4 == 0)
      out << "\n";
  }
  if (column % 4 != 0)
    out << "\n";
  std::string never;
  for (ir::OpKind op : loweredOps())
    if (!stats.opCounts.count(op))
      never += " " + std::string(ir::opName(op));
  out << "ops codegen lowers that no graph had:" << (never.empty() ? " none" : never) << "\n";
  out << fmt::format("failures: {}\n", stats.failures.size());
  for (const Failure &failure : stats.failures)
    out << fmt::format("  {} {}: {} -> {}\n", failure.outcome, failure.label, failure.message.substr(0, 300), failure.file);
}

int run(const Options &options) {
  std::filesystem::create_directories(options.out);
  CheckOptions check;
  check.compiler.cacheDir = options.cacheDir;
  check.compiler.cacheByteLimit = int64_t(1) << 30;
  Statistics stats;
  auto start = std::chrono::steady_clock::now();
  auto elapsed = [&] { return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count(); };
  Watchdog watchdog(options.stallSeconds);
  uint64_t next = options.seed;
  while ((options.count < 0 || stats.generated < options.count) && (options.seconds < 0 || elapsed() < options.seconds)) {
    size_t batch = options.batch;
    if (options.count >= 0)
      batch = std::min<size_t>(batch, static_cast<size_t>(options.count - stats.generated));
    uint64_t first = next;
    watchdog.start(fmt::format("the batch of seeds {}-{}", first, first + batch - 1));
    std::vector<CheckCase> cases;
    for (size_t k = 0; k < batch; ++k) {
      uint64_t seed = next++;
      ++stats.generated;
      GeneratedCase generated;
      try {
        generated = generateCase(seed);
      } catch (const std::exception &e) {
        ++stats.generatorErrors;
        stats.failures.push_back({fmt::format("seed {}", seed), "generator-error", e.what(), ""});
        continue;
      }
      stats.rejectedSteps += generated.rejectedSteps;
      CheckCase forward;
      forward.label = fmt::format("seed {}", seed);
      forward.seed = forward.inputSeed = seed;
      // One case in eight without fusion: every primitive lowered as its own kernel.
      forward.fuse = mixSeed(seed ^ 0xF05Eull) % 8 != 0;
      forward.graph = std::move(generated.graph);
      countOps(*forward.graph, stats);
      if (options.writeAll)
        writeFile(std::filesystem::path(options.out) / fmt::format("seed{}.kir", seed),
                  reproducerText(forward, {Outcome::Match, "written by --write-all"}));
      cases.push_back(forward);
      if (std::optional<CheckCase> tiled = batchTileCase(forward)) {
        ++stats.batchTileCases;
        cases.push_back(*tiled);
      }
      if (!options.gradients)
        continue;
      std::string whyNot;
      std::unique_ptr<ir::Graph> gradient;
      try {
        gradient = gradientGraph(*forward.graph, seed, whyNot);
      } catch (const std::exception &e) {
        stats.failures.push_back({forward.label + " gradient", "autodiff-error", e.what(), ""});
        continue;
      }
      if (!gradient && whyNot.find("internal error") != std::string::npos) {
        // Autodiff broke its own promise: keep the forward graph, from which it fails.
        std::filesystem::path file = std::filesystem::path(options.out) / fmt::format("autodiff-error-seed{}.kir", seed);
        writeFile(file, reproducerText(forward, {Outcome::CompileError, whyNot}));
        stats.failures.push_back({forward.label + " gradient", "autodiff-error", whyNot, file.string()});
      }
      if (!gradient) {
        ++stats.gradientSkipped[reasonKey(whyNot)];
        continue;
      }
      ++stats.gradientGraphs;
      countOps(*gradient, stats);
      CheckCase backward = forward;
      backward.label += " gradient";
      backward.gradient = true;
      backward.graph = std::move(gradient);
      cases.push_back(backward);
    }
    // Written before the compiled code runs, so that a crash leaves the batch's seeds behind.
    writeFile(std::filesystem::path(options.out) / "in-flight.txt",
              fmt::format("seeds {}-{} (a crash while this file exists happened in this batch)\n", first, next - 1));
    std::vector<CheckResult> results = checkCases(cases, check);
    for (size_t i = 0; i < cases.size(); ++i) {
      const CheckCase &checkCase = cases[i];
      Outcome outcome = results[i].outcome;
      ++(checkCase.gradient    ? stats.gradientOutcomes
         : checkCase.batchTile ? stats.batchTileOutcomes
                               : stats.forwardOutcomes)[std::string(outcomeName(outcome))];
      if (outcome == Outcome::Unsupported && options.verbose)
        std::cout << fmt::format("  unsupported {}: {}\n", checkCase.label, results[i].message.substr(0, 200));
      if (!isFailure(outcome) && outcome != Outcome::ReferenceError)
        continue;
      std::filesystem::path file = std::filesystem::path(options.out) / fileNameFor(checkCase, outcome, false);
      writeFile(file, reproducerText(checkCase, results[i]));
      if (options.shrink && isFailure(outcome)) {
        watchdog.start(fmt::format("shrinking {}", checkCase.label));
        CheckCase shrunk = shrinkCase(checkCase, outcome, check);
        if (shrunk.graph != checkCase.graph) {
          file = std::filesystem::path(options.out) / fileNameFor(checkCase, outcome, true);
          writeFile(file, reproducerText(shrunk, {outcome, checkCases({shrunk}, check)[0].message}));
        }
      }
      stats.failures.push_back({checkCase.label, std::string(outcomeName(outcome)), results[i].message, file.string()});
      if (options.verbose)
        std::cout << fmt::format("  {} {}: {}\n", outcomeName(outcome), checkCase.label, results[i].message.substr(0, 300));
    }
    std::filesystem::remove(std::filesystem::path(options.out) / "in-flight.txt");
    std::cout << fmt::format("[{:5.0f} s] seeds {}-{}: {} graphs, {} gradient graphs, {} failures so far\n", elapsed(),
                             options.seed, next - 1, stats.generated, stats.gradientGraphs, stats.failures.size())
              << std::flush;
  }
  watchdog.start("");
  printSummary(stats, elapsed(), std::cout);
  return stats.failures.empty() ? 0 : 1;
}

} // namespace
} // namespace kiln::fuzz

int main(int argc, char **argv) {
  kiln::fuzz::Options options;
  try {
    options = kiln::fuzz::parseOptions(argc, argv);
  } catch (const std::exception &e) {
    std::cerr << "kiln-fuzz-compile: " << e.what() << "\n" << kiln::fuzz::kUsage;
    return 2;
  }
  try {
    return kiln::fuzz::run(options);
  } catch (const std::exception &e) {
    std::cerr << "kiln-fuzz-compile: " << e.what() << "\n";
    return 1;
  }
}
