// The compile fuzzer's net in `make test`: every reproducer it found (regressions/*.kir, each
// the graph of a bug since fixed) compiles and matches the reference evaluator, and a fixed set
// of seeds (forward and gradient graphs) does too. Reproducers of bugs still open are listed
// in regressions/known-failures.txt ("FILE  why"): they must still fail, so that a fix is
// noticed and the entry removed.
#include <filesystem>
#include <fstream>
#include <map>

#include <gtest/gtest.h>

#include "tests/fuzz/compile/DifferentialCheck.h"
#include "tests/fuzz/compile/GraphGenerator.h"
#include "tests/fuzz/compile/InputDomains.h"

namespace kiln::fuzz {
namespace {

CheckOptions testOptions() {
  CheckOptions options;
  options.compiler.cacheDir = (std::filesystem::temp_directory_path() / "kiln-fuzz-compile-tests").string();
  return options;
}

std::map<std::string, std::string> knownFailures() {
  std::map<std::string, std::string> known;
  std::ifstream in(std::string(KILN_FUZZ_COMPILE_REGRESSIONS_DIR) + "/known-failures.txt");
  for (std::string line; std::getline(in, line);) {
    if (line.empty() || line[0] == '#')
      continue;
    size_t space = line.find_first_of(" \t");
    known[line.substr(0, space)] = space == std::string::npos ? "" : line.substr(space + 1);
  }
  return known;
}

TEST(FuzzCompileRegressions, EveryReproducerMatchesTheReference) {
  std::vector<CheckCase> cases;
  for (const auto &entry : std::filesystem::directory_iterator(KILN_FUZZ_COMPILE_REGRESSIONS_DIR))
    if (entry.path().extension() == ".kir")
      cases.push_back(readReproducer(entry.path().string()));
  std::sort(cases.begin(), cases.end(), [](const CheckCase &a, const CheckCase &b) { return a.label < b.label; });
  // A forward reproducer's gradient graph is checked too (some are autodiff's bugs).
  for (size_t i = 0, n = cases.size(); i < n; ++i) {
    if (cases[i].gradient)
      continue;
    std::string whyNot;
    std::unique_ptr<ir::Graph> gradient = gradientGraph(*cases[i].graph, cases[i].seed, whyNot);
    EXPECT_EQ(whyNot.find("internal error"), std::string::npos) << cases[i].label << ": " << whyNot;
    if (gradient) {
      CheckCase backward = cases[i];
      backward.label += " (gradient)";
      backward.gradient = true;
      backward.graph = std::move(gradient);
      cases.push_back(backward);
    }
  }
  std::map<std::string, std::string> known = knownFailures();
  std::vector<CheckResult> results = checkCases(cases, testOptions());
  for (size_t i = 0; i < cases.size(); ++i) {
    bool expectedToFail = known.count(cases[i].label) != 0;
    if (expectedToFail)
      EXPECT_TRUE(isFailure(results[i].outcome))
          << cases[i].label << " now passes: remove it from known-failures.txt (" << known[cases[i].label] << ")";
    else
      EXPECT_EQ(results[i].outcome, Outcome::Match) << cases[i].label << ": " << results[i].message;
  }
}

/// Seeds [first, first + count): each forward graph, compiled in batch tiles too where it is
/// batch-separable, and where there is one its gradient graph compile (or codegen says it does
/// not support an op yet) and match the reference.
void checkSeeds(uint64_t first, uint64_t count) {
  std::vector<CheckCase> cases;
  for (uint64_t seed = first; seed < first + count; ++seed) {
    GeneratedCase generated = generateCase(seed);
    CheckCase forward;
    forward.label = "seed " + std::to_string(seed);
    forward.seed = forward.inputSeed = seed;
    forward.fuse = mixSeed(seed ^ 0xF05Eull) % 8 != 0;
    forward.graph = std::move(generated.graph);
    std::string whyNot;
    std::unique_ptr<ir::Graph> gradient = gradientGraph(*forward.graph, seed, whyNot);
    cases.push_back(forward);
    if (std::optional<CheckCase> tiled = batchTileCase(forward))
      cases.push_back(*tiled);
    if (gradient) {
      CheckCase backward = forward;
      backward.label += " gradient";
      backward.gradient = true;
      backward.graph = std::move(gradient);
      cases.push_back(backward);
    }
  }
  // Batches of about 25 graphs: one compiler run each.
  for (size_t begin = 0; begin < cases.size(); begin += 25) {
    std::vector<CheckCase> batch(cases.begin() + static_cast<std::ptrdiff_t>(begin),
                                 cases.begin() + static_cast<std::ptrdiff_t>(std::min(cases.size(), begin + 25)));
    std::vector<CheckResult> results = checkCases(batch, testOptions());
    for (size_t i = 0; i < batch.size(); ++i)
      EXPECT_TRUE(results[i].outcome == Outcome::Match || results[i].outcome == Outcome::Unsupported)
          << batch[i].label << ": " << outcomeName(results[i].outcome) << ": " << results[i].message
          << "\n(kiln-fuzz-compile --seed " << batch[i].seed << " --count 1 writes its reproducer)";
  }
}

TEST(FuzzCompileSeeds, Seeds0To49) { checkSeeds(0, 50); }
TEST(FuzzCompileSeeds, Seeds50To99) { checkSeeds(50, 50); }
TEST(FuzzCompileSeeds, Seeds100To149) { checkSeeds(100, 50); }
TEST(FuzzCompileSeeds, Seeds150To199) { checkSeeds(150, 50); }

} // namespace
} // namespace kiln::fuzz
