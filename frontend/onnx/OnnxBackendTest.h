#pragma once
// Running ONNX backend conformance tests: folders holding `model.onnx` and data sets
// `test_data_set_*/input_*.pb, output_*.pb`, as ONNX's `onnx/backend/test/data/node` has them.
// Each test is imported, evaluated with kiln's reference evaluator on every data set and
// compared with the expected outputs the way ONNX's backend runner compares them (floats
// within rtol/atol, NaN equal to NaN, integers and bools exactly). A test whose model needs
// what kiln deliberately lacks (strings, sequences, optionals, control flow, random ops) is
// skipped rather than failed.
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "ir/Graph.h"

namespace kiln::frontend {

enum class OnnxTestStatus { Pass, Fail, Skip };

struct OnnxTestResult {
  std::string name; // the folder's name, e.g. "test_abs"
  OnnxTestStatus status = OnnxTestStatus::Fail;
  std::string reason; // why it failed or was skipped, one line; empty for a pass
  double seconds = 0; // wall time of import and evaluation
};

struct OnnxTestOptions {
  double rtol = 1e-3; // ONNX's backend runner's defaults
  double atol = 1e-7;
};

/// The test folders that `paths` name: a folder holding model.onnx is one test; any other
/// folder contributes its immediate subfolders that hold model.onnx, sorted by name. Throws
/// kiln::Error for a path that is not a folder or holds no test.
std::vector<std::string> findOnnxTestDirs(const std::vector<std::string> &paths);

/// One data set of a test, imported and ready to run on any backend (the reference evaluator,
/// or compiled: kiln-run --onnx-test --compiled).
struct OnnxTestCase {
  std::string setName;              // "test_data_set_0"
  std::unique_ptr<ir::Graph> graph; // imported specialised to this data set
  std::vector<Tensor> inputs;       // in graph->inputs() order
  std::vector<Tensor> expected;     // one per model output
  std::vector<std::string> outputNames;
};

/// A test folder read and imported; `result` says Skip or Fail (with the reason) when it ended
/// there, Pass when `cases` are ready to run. Never throws.
struct OnnxPreparedTest {
  OnnxTestResult result;
  std::vector<OnnxTestCase> cases;
};
OnnxPreparedTest prepareOnnxTestDir(const std::string &dir);

/// Compares a backend's outputs for `testCase` with the expected ones; the first mismatch's
/// reason ("test_data_set_0 output 0 ('y'): ..."), nullopt when all match.
std::optional<std::string> checkOnnxTestOutputs(const OnnxTestCase &testCase, const std::vector<Tensor> &outputs,
                                                const OnnxTestOptions &options = {});

/// Runs the test in `dir`. Never throws: every problem, from a malformed file to a kiln::Error
/// in evaluation or an unexpected exception, becomes a failure with its reason.
OnnxTestResult runOnnxTestDir(const std::string &dir, const OnnxTestOptions &options = {});

} // namespace kiln::frontend
