// The inputs on which the file fuzzers once found a crash, undefined behaviour, an unbounded
// allocation or a broken property, kept in tests/runtime/fuzz-regressions/<fuzzer>/ and replayed
// through the fuzzers' own steps (tests/fuzz/FileFuzzTargets.h, tests/fuzz/ArtifactTampering.h):
//   tensor-files/  fuzz-tensor-files: .npy, .safetensors and training checkpoints
//   manifest/      fuzz-training-manifest: the training manifest's text
//   artifact/      fuzz-artifact: scripts tampering with the models tests/CMakeLists.txt compiles
//                  from tests/fuzz/artifacts/ (step.so and model.so, in that order)
// Every input must end as the fuzzer requires (a value, or a kiln::Error naming its source);
// under `make test-asan-all` a regression shows as the sanitizer report it once was. The inputs
// listed below must also be refused with the message of the check that fixed them, so that each
// finding stays caught by that check.
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <map>
#include <string>
#include <vector>

#include "runtime/Executable.h"
#include "runtime/TrainingStep.h"
#include "tests/ErrorMatchers.h"
#include "tests/TempDir.h"
#include "tests/fuzz/ArtifactTampering.h"
#include "tests/fuzz/FileFuzzTargets.h"

using namespace kiln;

namespace {

namespace fs = std::filesystem;

/// The inputs in `folder`; none when it does not exist (git keeps no empty folder, and the
/// tensor file readers have had no finding yet).
std::vector<fs::path> inputsIn(const std::string &folder) {
  std::vector<fs::path> files;
  fs::path path = fs::path(KILN_RUNTIME_FUZZ_REGRESSIONS_DIR) / folder;
  if (!fs::exists(path))
    return files;
  for (const auto &entry : fs::directory_iterator(path))
    if (entry.is_regular_file())
      files.push_back(entry.path());
  std::sort(files.begin(), files.end());
  return files;
}

std::string readBytes(const fs::path &path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

/// Runs one input through a fuzzer's steps; any exception is the finding it was.
template <typename Steps> void replay(const std::string &folder, Steps steps) {
  std::vector<fs::path> files = inputsIn(folder);
  for (const fs::path &path : files) {
    SCOPED_TRACE(folder + "/" + path.filename().string());
    try {
      steps(path.filename().string(), readBytes(path));
    } catch (const std::exception &e) {
      ADD_FAILURE() << e.what();
    }
  }
}

/// Words the error of these manifests must contain (tests/fuzz/FileFuzzTargets.h: parsing, or
/// binding to the stand-in step, or running it): the finding each was and the check that now
/// refuses the manifest.
const std::map<std::string, std::vector<std::string>> &expectedManifestErrors() {
  static const std::map<std::string, std::vector<std::string>> errors{
      // No optimizer line: it parsed, with an empty optimizer that toText() refuses to write.
      {"no-optimizer-line", {"does not name its loss and optimizer"}},
      // A name ending in '\r' (CRLF lines): it parsed, and toText() refused to write it.
      {"carriage-return-in-a-name", {"line 2", "carriage return"}},
      // The target input is the learning rate input: run() filled it with the learning rate,
      // and targetInput() said there was none.
      {"target-input-is-the-lr-input", {"target input 2 is also the learning rate or step count input"}},
      // A step count of 2^63 - 1: run() overflowed advancing it (undefined behaviour).
      {"step-count-int64-max", {"step count 9223372036854775807 cannot advance"}},
  };
  return errors;
}

/// Words the load errors of these tampered artifacts must contain: the finding each was and
/// the check that now refuses the file. No words: the file must load, as a model and as a step.
const std::map<std::string, std::vector<std::string>> &expectedArtifactErrors() {
  static const std::map<std::string, std::vector<std::string>> errors{
      // A weight's shape grown past the weights the model carries: the kernels (here a weight
      // packing) read past them; a training step copied them into a 4 GB tensor.
      {"carried-weight-shape-past-the-file", {"weights' bytes", "lies outside the file"}},
      {"step-weight-shape-past-the-file", {"weights' bytes", "lies outside the file"}},
      // Counts and ranks grown past their tables: the loader read past them, and past the mapping.
      {"description-num-inputs-huge", {"input table", "lies outside the file"}},
      {"description-num-packings-huge", {"weight packing table", "lies outside the file"}},
      {"input-rank-huge", {"shape of input", "lies outside the file"}},
      {"launch-num-refs-huge", {"buffer reference table", "lies outside the file"}},
      // A weight packing's k * n wrapped around int64 (undefined behaviour) in its check.
      {"packing-size-overflow", {"weight packing 0", "does not fit weight"}},
      // An output grown to 2^45 elements that the manifest (cut short by a NUL) no longer binds
      // to a parameter: loading the step allocated it. Outputs are now allocated by the first run.
      {"output-shape-huge-and-not-updated", {}},
  };
  return errors;
}

/// The load errors of `bytes` as a model and as a training step, joined.
std::string loadErrors(const std::string &bytes, const std::string &dir) {
  std::string path = dir + "/regression.so";
  fuzz::writeFile(path, bytes);
  std::string errors = test::errorOf([&] { (void)runtime::Executable::load(path); }) + "\n" +
                       test::errorOf([&] { (void)runtime::TrainingStep::load(path); });
  fs::remove(path);
  return errors;
}

} // namespace

TEST(RuntimeFuzzRegressions, TensorFilesReadOrFailWithAMessage) {
  test::TempDir scratch("kiln-fuzz-regressions");
  replay("tensor-files", [&](const std::string &, const std::string &bytes) {
    fuzz::fuzzTensorFile(bytes, scratch.path().string());
  });
}

TEST(RuntimeFuzzRegressions, TrainingManifestsParseOrFailWithAMessage) {
  std::vector<std::string> seen;
  replay("manifest", [&](const std::string &name, const std::string &bytes) {
    std::string error = fuzz::fuzzTrainingManifest(bytes);
    auto expected = expectedManifestErrors().find(name);
    if (expected == expectedManifestErrors().end())
      return;
    seen.push_back(name);
    for (const std::string &word : expected->second)
      EXPECT_NE(error.find(word), std::string::npos) << "missing '" << word << "' in: " << error;
  });
  EXPECT_EQ(seen.size(), expectedManifestErrors().size()) << "an expected input is missing from manifest/";
}

TEST(RuntimeFuzzRegressions, TheManifestFuzzersStandInHasTheInputsAndOutputsOfTheStepItStandsFor) {
  runtime::Executable step = runtime::Executable::load(std::string(KILN_FUZZ_ARTIFACTS_DIR) + "/step.so");
  auto [inputs, outputs] = fuzz::standInStepSpecs();
  auto same = [](const std::vector<runtime::TensorSpec> &a, const std::vector<runtime::TensorSpec> &b) {
    return a.size() == b.size() && std::equal(a.begin(), a.end(), b.begin(), [](const auto &x, const auto &y) {
             return x.name == y.name && x.type == y.type;
           });
  };
  EXPECT_TRUE(same(inputs, step.inputs()));
  EXPECT_TRUE(same(outputs, step.outputs()));
}

TEST(RuntimeFuzzRegressions, TamperedArtifactsLoadOrFailWithAMessage) {
  std::vector<fuzz::ArtifactTampering> bases;
  bases.emplace_back(std::string(KILN_FUZZ_ARTIFACTS_DIR) + "/step.so");
  bases.emplace_back(std::string(KILN_FUZZ_ARTIFACTS_DIR) + "/model.so");
  test::TempDir scratch("kiln-fuzz-regressions");
  std::vector<std::string> seen;
  replay("artifact", [&](const std::string &name, const std::string &script) {
    const auto *data = reinterpret_cast<const uint8_t *>(script.data());
    fuzz::fuzzArtifact(bases, data, script.size(), scratch.path().string());
    auto expected = expectedArtifactErrors().find(name);
    if (expected == expectedArtifactErrors().end())
      return;
    seen.push_back(name);
    const fuzz::ArtifactTampering &base = bases[script.empty() ? 0 : (data[0] >> 3) % bases.size()];
    std::string errors = loadErrors(base.tamper(data, script.size()), scratch.path().string());
    if (expected->second.empty()) {
      EXPECT_EQ(errors, "\n") << "it no longer loads";
    }
    for (const std::string &word : expected->second)
      EXPECT_NE(errors.find(word), std::string::npos) << "missing '" << word << "' in: " << errors;
  });
  EXPECT_EQ(seen.size(), expectedArtifactErrors().size()) << "an expected input is missing from artifact/";
}
