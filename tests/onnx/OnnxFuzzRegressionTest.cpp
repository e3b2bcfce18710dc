// The inputs on which the ONNX loader fuzzer (tests/fuzz/FuzzOnnxLoader.cpp) once found a
// crash, undefined behaviour or an unbounded allocation, kept as files in
// tests/onnx/fuzz-regressions/ and replayed through the fuzzer's steps: import, verify, print,
// evaluate on random inputs when the graph is small, and read the bytes as a TensorProto.
// Every input must end in a graph or a kiln::Error; under `make test-asan` a regression shows
// as the sanitizer report it once was. The inputs whose import must fail also have their
// message checked, so that each finding stays caught by the check that fixed it.
#include <algorithm>
#include <map>

#include "OnnxTestModel.h"
#include "ir/Printer.h"
#include "ir/Verifier.h"

using namespace kiln;
using namespace kiln::onnxtest;

namespace {

namespace fs = std::filesystem;

std::vector<fs::path> regressionInputs() {
  std::vector<fs::path> files;
  for (const auto &entry : fs::directory_iterator(KILN_ONNX_FUZZ_REGRESSIONS_DIR))
    if (entry.is_regular_file())
      files.push_back(entry.path());
  std::sort(files.begin(), files.end());
  return files;
}

std::string readBytes(const fs::path &path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

/// Words the import error of these inputs must contain: the finding each was (in the comment)
/// and the check that now refuses the model.
const std::map<std::string, std::vector<std::string>> &expectedImportErrors() {
  static const std::map<std::string, std::vector<std::string>> errors{
      // GRU's bias B declared as a scalar: slicing it per direction read dims it lacks.
      {"gru-bias-rank0.onnx", {"GRU", "B must have shape [1,18]"}},
      // EyeLike of a [4, 2^31] input: a dense 8-billion-element constant.
      {"eyelike-huge-shape.onnx", {"EyeLike", "more than 16777216 elements"}},
      // ConvTranspose with output_shape INT64_MIN: the padding arithmetic overflowed. Now the
      // size asked for must be a dim (core/ShapeMath.h: checkedDim).
      {"convtranspose-output-shape-int64-min.onnx", {"ConvTranspose", "dimension -9223372036854775808 is negative"}},
      // ConvTranspose with a stride of INT64_MAX: the natural output size overflowed; now checked.
      {"convtranspose-stride-overflow.onnx", {"ConvTranspose", "overflows int64"}},
      // AveragePool with kernel_shape INT64_MIN: the window span arithmetic overflowed.
      {"averagepool-kernel-int64-min.onnx", {"AveragePool", "must have sizes >= 1"}},
      // AveragePool, SAME_UPPER, a dim of 2^40 and stride 2: ONNX 1.12's shape inference looped
      // for hours subtracting the stride.
      {"averagepool-same-upper-huge-dim-timeout.onnx", {"AveragePool", "would take too long"}},
      // MaxUnpool with a stride of INT64_MAX: the unpooled size overflowed; now checked.
      {"maxunpool-kernel-overflow.onnx", {"MaxUnpool", "overflows int64"}},
      // Concat of two [2^62] operands: the concatenated dim overflowed in op inference. Now the
      // operands are refused where they enter, past kiln's size limit (core/ShapeMath.h).
      {"concat-axis-overflow.onnx", {"graph input 'value0'", "larger than kiln's limit of 2^48"}},
      // The ONNX loader fuzzer's Concat of [64,0,2,2^63-1] operands along axis -3: empty, so
      // accepted, and evaluating it multiplied 2 * (2^63-1). A dim past the limit is refused
      // also beside a zero dim.
      {"concat-huge-dim-beside-zero.onnx", {"graph input 'a'", "9223372036854775807 larger than kiln's limit of 2^48"}},
      // MaxPool with pads of 2^62 around an empty input: a result shape past 2^62 elements,
      // which no tensor can hold, reached the graph. Now refused by the limit on every result.
      {"maxpool-pads-too-many-elements.onnx", {"MaxPool", "larger than kiln's limit of 2^48"}},
      // ReduceMean over dims of an empty input multiplying past int64 in op inference. Now the
      // input is refused where it enters: a dim of 2^62 beside its zero dim.
      {"reducemean-count-overflow.onnx", {"graph input 'X'", "larger than kiln's limit of 2^48"}},
      // MaxPool's Indices over 2M windows: tables of 50M taps, gigabytes and a minute.
      {"maxpool-indices-huge-table-timeout.onnx", {"MaxPool", "more than the 4194304"}},
      // DFT along a dim of 2^31: a 2^62-element twiddle matrix whose byte size wrapped to 0,
      // then written through a null pointer.
      {"dft-huge-signal-length.onnx", {"DFT", "more than the 16777216"}},
      // Det of a [2^31, 2^31] input: elimination unrolled over 2^31 rows ran out of memory. Now
      // the input's 2^62 elements are refused where it enters (Det's own bound, 1024 rows, is
      // tested in OnnxBadModelTest).
      {"det-huge-matrix-oom.onnx", {"graph input 'x'", "has too many elements"}},
  };
  return errors;
}

/// Graphs up to these sizes are evaluated, as in the fuzzer.
bool smallEnoughToEvaluate(const ir::Graph &graph) {
  if (graph.numNodes() > 64)
    return false;
  for (const ir::Value *input : graph.inputs())
    if (input->type().numElements() > 4096)
      return false;
  for (const ir::Node *node : graph.nodes())
    for (const ir::Value *output : node->outputs())
      if (output->type().numElements() > 4096)
        return false;
  return true;
}

/// Import, verify, print and maybe evaluate; returns the import error ("" when it imports).
std::string replayModel(const std::string &bytes, const std::string &name) {
  std::unique_ptr<ir::Graph> graph;
  try {
    graph = frontend::importOnnxBytes(bytes, {}, name);
  } catch (const Error &e) {
    return e.what();
  }
  EXPECT_NO_THROW(ir::verify(*graph));
  EXPECT_FALSE(ir::printGraph(*graph).empty());
  if (smallEnoughToEvaluate(*graph)) {
    std::vector<Tensor> inputs;
    uint64_t seed = 1;
    for (const ir::Value *input : graph->inputs())
      inputs.push_back(randomTensor(input->type(), seed++));
    try {
      std::vector<Tensor> outputs = ir::evaluate(*graph, inputs);
      EXPECT_EQ(outputs.size(), graph->outputs().size());
    } catch (const Error &) {
      // bad random data (an index out of range) may fail with a message: fine
    }
  }
  return "";
}

TEST(OnnxFuzzRegressions, EveryExpectedInputIsInTheFolder) {
  std::vector<fs::path> files = regressionInputs();
  for (const auto &[name, words] : expectedImportErrors())
    EXPECT_TRUE(std::any_of(files.begin(), files.end(), [&](const fs::path &p) { return p.filename() == name; }))
        << name << " is missing from " << KILN_ONNX_FUZZ_REGRESSIONS_DIR;
}

TEST(OnnxFuzzRegressions, EveryInputImportsOrFailsWithAMessage) {
  std::vector<fs::path> files = regressionInputs();
  ASSERT_FALSE(files.empty()) << "no inputs in " << KILN_ONNX_FUZZ_REGRESSIONS_DIR;
  for (const fs::path &path : files) {
    std::string name = path.filename().string();
    SCOPED_TRACE(name);
    std::string bytes = readBytes(path);
    std::string error = replayModel(bytes, name);
    if (!error.empty()) {
      // Named after the source, and not the importer's wrapping of a stray exception.
      EXPECT_EQ(error.rfind(name + ": ", 0), 0u) << error;
      EXPECT_EQ(error.find(name + ": internal error"), std::string::npos) << error;
    }
    auto expected = expectedImportErrors().find(name);
    if (expected != expectedImportErrors().end()) {
      EXPECT_FALSE(error.empty()) << "the import succeeded";
      for (const std::string &word : expected->second)
        EXPECT_NE(error.find(word), std::string::npos) << "missing '" << word << "' in: " << error;
    }
    try {
      (void)frontend::readTensorProtoBytes(bytes, "", name);
    } catch (const Error &e) {
      EXPECT_EQ(std::string(e.what()).rfind(name + ": ", 0), 0u) << e.what();
    }
  }
}

} // namespace
