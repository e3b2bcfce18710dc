// The ONNX backend test runner, in stages per test folder:
//   1. parse model.onnx and decide whether kiln skips it (what the model needs, not what kiln
//      happens to map: strings, sequences, optionals, control flow and random ops are outside
//      kiln's design, everything else that fails is a failure);
//   2. for each data set, read input_<i>.pb and output_<i>.pb (numbered from 0, in order);
//   3. import the model specialised to the data set's input shapes and values (a model may
//      leave dims symbolic, and passes shape-like operands as inputs), bind the inputs by the
//      model's input order, evaluate and compare every output.
#include "frontend/onnx/OnnxBackendTest.h"

#include <algorithm>
#include <chrono>
#include <climits>
#include <cmath>
#include <filesystem>
#include <map>
#include <optional>
#include <set>

#include "core/Error.h"
#include "frontend/onnx/OnnxImporter.h"
#include "frontend/onnx/OnnxLoad.h"
#include "frontend/onnx/OnnxTensor.h"
#include "ir/Evaluator.h"

namespace kiln::frontend {

namespace fs = std::filesystem;

namespace {

// ---- what kiln skips ------------------------------------------------------------------------

const std::set<std::string> &controlFlowOps() {
  static const std::set<std::string> ops{"If", "Loop", "Scan"};
  return ops;
}

const std::set<std::string> &randomOps() {
  static const std::set<std::string> ops{"Bernoulli",        "Multinomial",   "RandomNormal",
                                         "RandomNormalLike", "RandomUniform", "RandomUniformLike"};
  return ops;
}

const std::set<std::string> &sequenceOps() {
  static const std::set<std::string> ops{"ConcatFromSequence", "SequenceAt",         "SequenceConstruct",
                                         "SequenceEmpty",      "SequenceErase",      "SequenceInsert",
                                         "SequenceLength",     "SequenceMap",        "SplitToSequence",
                                         "Optional",           "OptionalGetElement", "OptionalHasElement"};
  return ops;
}

const std::set<std::string> &stringOps() {
  static const std::set<std::string> ops{"RegexFullMatch", "StringConcat", "StringNormalizer", "StringSplit"};
  return ops;
}

/// What a value type needs that kiln lacks, or nullopt for a plain non-string tensor.
std::optional<std::string> typeSkipReason(const onnx::TypeProto &type) {
  if (type.has_sequence_type())
    return "the model uses sequences";
  if (type.has_optional_type())
    return "the model uses optionals";
  if (type.has_map_type())
    return "the model uses maps";
  if (type.has_tensor_type() && type.tensor_type().elem_type() == onnx::TensorProto::STRING)
    return "the model uses strings";
  return std::nullopt;
}

/// Dropout draws its mask at random when training_mode may be on (an operand not known to be
/// false, i.e. 0) and the ratio is not known to be 0. `knownZero` holds the names of
/// constants and initializers that are all zeros.
bool isRandomDropout(const onnx::NodeProto &node, const std::set<std::string> &knownZero) {
  if (node.op_type() != "Dropout" || node.input_size() < 3 || node.input(2).empty() || knownZero.count(node.input(2)))
    return false;
  return node.input(1).empty() || !knownZero.count(node.input(1));
}

bool isZeroTensor(const onnx::TensorProto &proto) {
  try {
    Tensor t = decodeTensorProto(proto, "", "constant");
    for (int64_t i = 0; i < t.numElements(); ++i)
      if (t.getDouble(i) != 0)
        return false;
    return t.numElements() > 0;
  } catch (const Error &) {
    return false;
  }
}

std::optional<std::string> skipReason(const onnx::ModelProto &model) {
  const onnx::GraphProto &graph = model.graph();
  for (const auto *infos : {&graph.input(), &graph.output(), &graph.value_info()})
    for (const auto &info : *infos)
      if (auto reason = typeSkipReason(info.type()))
        return reason;
  std::set<std::string> knownZero;
  for (const auto &init : graph.initializer()) {
    if (init.data_type() == onnx::TensorProto::STRING)
      return "the model uses strings";
    if (isZeroTensor(init))
      knownZero.insert(init.name());
  }
  for (const auto &node : graph.node()) {
    const std::string &op = node.op_type();
    if (controlFlowOps().count(op))
      return fmt::format("control flow ({}) is outside kiln's design", op);
    if (randomOps().count(op))
      return fmt::format("{} is nondeterministic", op);
    if (sequenceOps().count(op))
      return fmt::format("the model uses sequences or optionals ({})", op);
    if (stringOps().count(op))
      return fmt::format("the model uses strings ({})", op);
    for (const auto &attr : node.attribute()) {
      if (attr.has_g() || attr.graphs_size() > 0)
        return fmt::format("control flow (a subgraph in {}) is outside kiln's design", op);
      if (op == "Constant" && (attr.name() == "value_string" || attr.name() == "value_strings"))
        return "the model uses strings";
      if (attr.has_t() && attr.t().data_type() == onnx::TensorProto::STRING)
        return "the model uses strings";
      if ((op == "Cast" || op == "CastLike") && attr.name() == "to" && attr.i() == onnx::TensorProto::STRING)
        return "the model uses strings";
    }
    if (op == "Constant" && node.output_size() == 1)
      for (const auto &attr : node.attribute())
        if (attr.name() == "value" && attr.has_t() && isZeroTensor(attr.t()))
          knownZero.insert(node.output(0));
    if (isRandomDropout(node, knownZero))
      return "Dropout in training mode is nondeterministic";
  }
  return std::nullopt;
}

// ---- data sets ------------------------------------------------------------------------------

/// The files prefix_0.pb, prefix_1.pb, ... in `dir`, stopping at the first gap.
std::vector<std::string> numberedFiles(const fs::path &dir, const std::string &prefix) {
  std::vector<std::string> files;
  for (int i = 0;; ++i) {
    fs::path file = dir / fmt::format("{}_{}.pb", prefix, i);
    if (!fs::exists(file))
      break;
    files.push_back(file.string());
  }
  return files;
}

std::vector<fs::path> dataSets(const fs::path &dir) {
  std::vector<fs::path> sets;
  for (const auto &entry : fs::directory_iterator(dir))
    if (entry.is_directory() && entry.path().filename().string().rfind("test_data_set_", 0) == 0)
      sets.push_back(entry.path());
  std::sort(sets.begin(), sets.end());
  return sets;
}

/// A data set's tensor file. ONNX 1.12 writes bfloat16 test data as uint16 tensors holding the
/// same bits (numpy has no bfloat16), so where the model declares bfloat16 a uint16 file is
/// read as bfloat16.
Tensor readTestTensor(const std::string &path, int32_t declaredType) {
  std::string bytes = readFileLimited(path, (uint64_t{1} << 31) - 1, "tensor file");
  onnx::TensorProto proto;
  if (bytes.size() > static_cast<size_t>(INT_MAX) || !proto.ParseFromString(bytes))
    fail("{}: not a valid ONNX TensorProto (malformed or truncated)", path);
  if (proto.data_type() == onnx::TensorProto::UINT16 && declaredType == onnx::TensorProto::BFLOAT16)
    proto.set_data_type(onnx::TensorProto::BFLOAT16);
  try {
    return decodeTensorProto(proto, fs::path(path).parent_path().string(), "the tensor");
  } catch (const Error &e) {
    fail("{}: {}", fs::path(path).filename().string(), e.what());
  }
}

int32_t declaredElemType(const onnx::ValueInfoProto &info) {
  return info.type().has_tensor_type() ? info.type().tensor_type().elem_type() : 0;
}

/// Compares one output as ONNX's runner does: dtype and shape exactly, floats within
/// tolerance (NaN equals NaN, infinities must match), integers and bools exactly.
std::optional<std::string> compareOutput(const Tensor &got, const Tensor &want, const OnnxTestOptions &options) {
  if (got.type() != want.type())
    return fmt::format("got {}, expected {}", got.type().toString(), want.type().toString());
  if (isFloat(want.dtype())) {
    Comparison comparison = compareTensors(got, want, options.rtol, options.atol);
    if (!comparison.ok)
      return comparison.message;
    return std::nullopt;
  }
  for (int64_t i = 0; i < want.numElements(); ++i)
    if (got.getInt(i) != want.getInt(i))
      return fmt::format("element {} (flat): got {}, expected {}", i, got.getInt(i), want.getInt(i));
  return std::nullopt;
}

std::string oneLine(std::string text) {
  for (char &c : text)
    if (c == '\n' || c == '\r')
      c = ' ';
  return text;
}

/// Reads and imports every data set; returns the first problem's reason, nullopt when all are
/// ready in `cases`.
std::optional<std::string> prepareDataSets(const fs::path &dir, const onnx::ModelProto &model,
                                           std::vector<OnnxTestCase> &cases) {
  std::set<std::string> initializers;
  for (const auto &init : model.graph().initializer())
    initializers.insert(init.name());
  std::vector<std::string> inputNames;
  std::vector<int32_t> inputTypes;
  for (const auto &input : model.graph().input())
    if (!initializers.count(input.name())) {
      inputNames.push_back(input.name());
      inputTypes.push_back(declaredElemType(input));
    }

  std::vector<fs::path> sets = dataSets(dir);
  if (sets.empty())
    return "no test_data_set_* folder";
  OnnxImportOptions importOptions;
  importOptions.baseDir = dir.string();
  for (const fs::path &set : sets) {
    std::string setName = set.filename().string();
    std::vector<std::string> inputFiles = numberedFiles(set, "input");
    std::vector<std::string> outputFiles = numberedFiles(set, "output");
    if (inputFiles.size() != inputNames.size())
      return fmt::format("{}: {} input files for the model's {} inputs", setName, inputFiles.size(), inputNames.size());
    std::map<std::string, Tensor> inputs;
    std::map<std::string, Shape> shapes;
    for (size_t i = 0; i < inputFiles.size(); ++i) {
      Tensor t = readTestTensor(inputFiles[i], inputTypes[i]);
      inputs[inputNames[i]] = t;
      shapes[inputNames[i]] = t.shape();
    }
    // The graph is imported specialised to this data set: its values, because the backend
    // tests pass shape-like operands (Reshape's shape, TopK's K, ...) as graph inputs, and its
    // shapes, because ONNX's runner feeds the data whatever the model declares (a few 1.12
    // tests declare input shapes their data do not have).
    onnx::ModelProto specialised = model;
    for (auto &input : *specialised.mutable_graph()->mutable_input()) {
      auto shape = shapes.find(input.name());
      if (shape == shapes.end() || !input.type().has_tensor_type())
        continue;
      auto *dims = input.mutable_type()->mutable_tensor_type()->mutable_shape();
      dims->clear_dim();
      for (int64_t dim : shape->second)
        dims->add_dim()->set_dim_value(dim);
    }
    importOptions.inputValues = inputs;
    OnnxTestCase testCase;
    testCase.setName = setName;
    testCase.graph = importOnnxBytes(specialised.SerializeAsString(), importOptions, "model.onnx");
    for (const ir::Value *input : testCase.graph->inputs()) {
      auto it = inputs.find(input->name());
      if (it == inputs.end())
        return fmt::format("the imported graph has an input '{}' that the model does not list", input->name());
      testCase.inputs.push_back(it->second);
    }
    size_t numOutputs = testCase.graph->outputs().size();
    if (numOutputs != outputFiles.size() || numOutputs != static_cast<size_t>(model.graph().output_size()))
      return fmt::format("{}: {} outputs, but {} expected output files", setName, numOutputs, outputFiles.size());
    for (size_t i = 0; i < numOutputs; ++i) {
      const onnx::ValueInfoProto &info = model.graph().output(static_cast<int>(i));
      testCase.expected.push_back(readTestTensor(outputFiles[i], declaredElemType(info)));
      testCase.outputNames.push_back(info.name());
    }
    cases.push_back(std::move(testCase));
  }
  return std::nullopt;
}

std::string testName(const std::string &dir) {
  std::string name = fs::path(dir).filename().string();
  if (name.empty()) // "dir/" names the folder before the slash
    name = fs::path(dir).parent_path().filename().string();
  return name;
}

} // namespace

std::vector<std::string> findOnnxTestDirs(const std::vector<std::string> &paths) {
  std::vector<std::string> dirs;
  for (const std::string &path : paths) {
    std::error_code error;
    if (!fs::is_directory(path, error))
      fail("{}: not a folder (expected an ONNX backend test folder or a folder of them)", path);
    if (fs::exists(fs::path(path) / "model.onnx")) {
      dirs.push_back(path);
      continue;
    }
    std::vector<std::string> found;
    for (const auto &entry : fs::directory_iterator(path, error))
      if (entry.is_directory() && fs::exists(entry.path() / "model.onnx"))
        found.push_back(entry.path().string());
    if (found.empty())
      fail("{}: holds neither model.onnx nor subfolders with one", path);
    std::sort(found.begin(), found.end());
    dirs.insert(dirs.end(), found.begin(), found.end());
  }
  return dirs;
}

OnnxPreparedTest prepareOnnxTestDir(const std::string &dir) {
  OnnxPreparedTest prepared;
  OnnxTestResult &result = prepared.result;
  result.name = testName(dir);
  auto start = std::chrono::steady_clock::now();
  try {
    std::string modelPath = (fs::path(dir) / "model.onnx").string();
    std::string bytes = readFileLimited(modelPath, (uint64_t{1} << 31) - 1, "ONNX model");
    onnx::ModelProto model;
    parseOnnxModelAnyOpset(bytes, model);
    if (std::optional<std::string> reason = skipReason(model)) {
      result.status = OnnxTestStatus::Skip;
      result.reason = *reason;
    } else if (std::optional<std::string> failure = prepareDataSets(dir, model, prepared.cases)) {
      result.reason = *failure;
    } else {
      result.status = OnnxTestStatus::Pass;
    }
  } catch (const Error &e) {
    result.reason = e.what();
  } catch (const std::bad_alloc &) {
    result.reason = "out of memory";
  } catch (const std::exception &e) {
    result.reason = fmt::format("internal error: {}", e.what());
  } catch (...) {
    result.reason = "internal error: an unknown exception";
  }
  if (result.status != OnnxTestStatus::Pass)
    prepared.cases.clear();
  result.reason = oneLine(result.reason);
  result.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return prepared;
}

std::optional<std::string> checkOnnxTestOutputs(const OnnxTestCase &testCase, const std::vector<Tensor> &outputs,
                                                const OnnxTestOptions &options) {
  if (outputs.size() != testCase.expected.size())
    return fmt::format("{}: {} outputs, expected {}", testCase.setName, outputs.size(), testCase.expected.size());
  for (size_t i = 0; i < outputs.size(); ++i)
    if (auto mismatch = compareOutput(outputs[i], testCase.expected[i], options))
      return oneLine(fmt::format("{} output {} ('{}'): {}", testCase.setName, i, testCase.outputNames[i], *mismatch));
  return std::nullopt;
}

OnnxTestResult runOnnxTestDir(const std::string &dir, const OnnxTestOptions &options) {
  auto start = std::chrono::steady_clock::now();
  OnnxPreparedTest prepared = prepareOnnxTestDir(dir);
  OnnxTestResult result = prepared.result;
  if (result.status == OnnxTestStatus::Pass) {
    try {
      for (const OnnxTestCase &testCase : prepared.cases) {
        std::vector<Tensor> outputs = ir::evaluate(*testCase.graph, testCase.inputs);
        if (std::optional<std::string> mismatch = checkOnnxTestOutputs(testCase, outputs, options)) {
          result.status = OnnxTestStatus::Fail;
          result.reason = *mismatch;
          break;
        }
      }
    } catch (const Error &e) {
      result.status = OnnxTestStatus::Fail;
      result.reason = oneLine(e.what());
    } catch (const std::bad_alloc &) {
      result.status = OnnxTestStatus::Fail;
      result.reason = "out of memory";
    } catch (const std::exception &e) {
      result.status = OnnxTestStatus::Fail;
      result.reason = oneLine(fmt::format("internal error: {}", e.what()));
    }
  }
  result.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return result;
}

} // namespace kiln::frontend
