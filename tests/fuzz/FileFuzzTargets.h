#pragma once
// What the file fuzzers do with one input (tests/fuzz/FuzzTensorFiles.cpp,
// FuzzTrainingManifest.cpp), shared with the test that replays the inputs they once failed on
// (tests/runtime/RuntimeFuzzRegressionTest.cpp), so that a regression input goes through
// exactly the steps that failed.
//
// Each function returns normally when every reader it calls ended in a value or in a
// kiln::Error, and throws FuzzFinding for a finding it detects itself: a value that does not
// survive its writer and reader, an error that does not name its source, a checkpoint that
// changed parameters before failing. Any other exception escaping it is a finding too, and so
// is a crash, a sanitizer report, an unbounded allocation or a hang.
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "runtime/Executable.h"

namespace kiln::fuzz {

/// A property of the readers that the input broke.
class FuzzFinding : public std::logic_error {
public:
  using std::logic_error::logic_error;
};

/// Writes `bytes` to `path`; FuzzFinding when it cannot (the harness's own failure).
void writeFile(const std::string &path, const std::string &bytes);

/// FuzzFinding unless the message of `error` (a kiln::Error) names `source`: every reader's
/// errors name what they read, so that a tool's one-line message says which file is bad.
void expectNamed(const std::exception &error, const std::string &source);

/// The bytes as a .npy file and as a .safetensors file (parsed from memory, then written back
/// and read again: the same tensors), and as a training checkpoint (runtime/TrainingCheckpoint.h)
/// in `scratchDir`: a .safetensors file, and a folder holding them as one .npy parameter or as
/// the step count (each form only when the bytes parse as its file type). A checkpoint that
/// loads must give its exact tensors; one that fails must leave the parameters and step count
/// it was loaded into unchanged.
void fuzzTensorFile(const std::string &bytes, const std::string &scratchDir);

/// The bytes as a training manifest's text (runtime/TrainingManifest.h): parsed, written
/// back and parsed again (the same text), and bound to a stand-in model (a
/// runtime::StepInterpreter with the inputs and outputs of standInStepSpecs) as
/// runtime::TrainingStep binds a loaded step's manifest; a step it binds to runs once. Returns
/// the message of the kiln::Error it ended with, or "" when the step bound and ran.
std::string fuzzTrainingManifest(const std::string &bytes);

/// The inputs and outputs of the training step compiled from tests/fuzz/artifacts/step.kir
/// (kiln-compile --train cross-entropy --optimizer adam), which fuzzTrainingManifest binds
/// manifests against: that step's own manifest, the fuzzer's seed, binds and runs.
std::pair<std::vector<runtime::TensorSpec>, std::vector<runtime::TensorSpec>> standInStepSpecs();

/// Seeds for fuzzTensorFile as kiln writes them: a small tensor of every dtype .npy can hold as
/// .npy, a few together as .safetensors with metadata, an empty and a scalar one.
void writeTensorFileSeeds(const std::string &dir);

} // namespace kiln::fuzz
