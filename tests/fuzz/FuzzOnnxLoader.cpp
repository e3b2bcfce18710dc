// libFuzzer target for the ONNX loader. Any bytes must either import or throw kiln::Error -
// never crash, hang, read out of bounds, allocate without bound, or throw anything else. What
// imports must verify and print, and a small graph must evaluate (or fail with kiln::Error) on
// random inputs. The same bytes also go through the TensorProto reader, which shares the
// tensor decoding with initializers.
//
// External data resolves against a scratch folder holding one small data file, so that the
// location checks and byte-range reads are exercised too (inputs can name "w.bin").
//
// Byte mutations of a protobuf mostly break its framing, so half of the mutations are made on
// the parsed ModelProto instead (LLVMFuzzerCustomMutator): a dim, an attribute, an integer of
// an initializer set to an edge value, an op type swapped for another kiln maps, an operand
// rewired. That reaches the op mappings with well-formed models holding bad values.
// An error that reports an "internal error" is a stray std::exception the importer wrapped:
// it is treated as a finding, since every problem a file can cause needs its own message.
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "core/Error.h"
#include "core/ShapeMath.h"
#include "frontend/onnx/OnnxImporter.h"
#include "frontend/onnx/OnnxOpTable.h"
#include "ir/Evaluator.h"
#include "ir/Printer.h"
#include "ir/Verifier.h"

using namespace kiln;

namespace {

/// Graphs up to these sizes are evaluated: enough for every model of the ONNX node suite's
/// size, small enough that one evaluation stays in milliseconds.
constexpr int64_t kMaxEvalElements = 4096;
constexpr size_t kMaxEvalNodes = 64;

std::string &externalDataDir() {
  static std::string dir;
  return dir;
}

void removeExternalDataDir() {
  std::error_code ignored;
  if (!externalDataDir().empty())
    std::filesystem::remove_all(externalDataDir(), ignored);
}

[[noreturn]] void finding(const std::string &what) {
  std::fprintf(stderr, "finding: %s\n", what.c_str());
  std::abort();
}

/// A kiln::Error is the expected outcome of bad input, unless it is the importer's wrapping
/// of a stray std::exception or bad_alloc. Those messages start right after the source name,
/// where no text from the input can appear (it would, anywhere later: a value name).
void checkError(const Error &error, const std::string &sourceName) {
  std::string message = error.what();
  for (const char *wrapped : {": internal error while importing", ": out of memory while importing"})
    if (message.rfind(sourceName + wrapped, 0) == 0)
      finding("a stray exception: " + message);
}

bool smallEnoughToEvaluate(const ir::Graph &graph) {
  if (graph.numNodes() > kMaxEvalNodes)
    return false;
  for (const ir::Value *input : graph.inputs())
    if (input->type().numElements() > kMaxEvalElements)
      return false;
  for (const ir::Node *node : graph.nodes())
    for (const ir::Value *output : node->outputs())
      if (output->type().numElements() > kMaxEvalElements)
        return false;
  return true;
}

void fuzzModel(const std::string &bytes) {
  frontend::OnnxImportOptions options;
  options.baseDir = externalDataDir();
  std::unique_ptr<ir::Graph> graph;
  try {
    graph = frontend::importOnnxBytes(bytes, options, "fuzz.onnx");
  } catch (const Error &e) {
    checkError(e, "fuzz.onnx");
    return;
  }
  try {
    ir::verify(*graph);
  } catch (const Error &e) {
    finding(std::string("an imported graph does not verify: ") + e.what() + "\n" + ir::printGraph(*graph));
  }
  (void)ir::printGraph(*graph);
  if (!smallEnoughToEvaluate(*graph))
    return;
  std::vector<Tensor> inputs;
  uint64_t seed = 1;
  for (const ir::Value *input : graph->inputs())
    inputs.push_back(randomTensor(input->type(), seed++));
  try {
    std::vector<Tensor> outputs = ir::evaluate(*graph, inputs);
    if (outputs.size() != graph->outputs().size())
      finding("the evaluator returned a different number of outputs than the graph has");
    for (size_t i = 0; i < outputs.size(); ++i)
      if (outputs[i].type() != graph->outputs()[i]->type())
        finding("output " + std::to_string(i) + " evaluates to " + outputs[i].type().toString() + " but is typed " +
                graph->outputs()[i]->type().toString() + "\n" + ir::printGraph(*graph));
  } catch (const Error &) {
    // e.g. a Gather index out of range in the random data: fine
  }
}

void fuzzTensorProto(const std::string &bytes) {
  try {
    Tensor tensor = frontend::readTensorProtoBytes(bytes, externalDataDir(), "fuzz.pb");
    (void)tensorSummary(tensor);
  } catch (const Error &e) {
    checkError(e, "fuzz.pb");
  }
}

// ---- structure-aware mutation ------------------------------------------------------------

using Rng = std::mt19937_64;

size_t pick(Rng &rng, size_t count) { return static_cast<size_t>(rng() % count); }

/// Edge values of dims, axes, counts and indices, and small ones.
int64_t edgeInt(Rng &rng) {
  static const int64_t edges[] = {0, 1, 2, 3, -1, -2, -3, 7, 64, 4096, 65536, int64_t{1} << 31, int64_t{1} << 32,
                                  int64_t{1} << 40, kMaxElements / 2, kMaxElements, kMaxElements + 1,
                                  int64_t{1} << 62, std::numeric_limits<int64_t>::max(),
                                  std::numeric_limits<int64_t>::min(), std::numeric_limits<int32_t>::max(),
                                  std::numeric_limits<int32_t>::min()};
  if (rng() % 3 == 0)
    return static_cast<int64_t>(rng() % 17) - 8;
  return edges[pick(rng, std::size(edges))];
}

float edgeFloat(Rng &rng) {
  static const float edges[] = {0.0f, -0.0f, 1.0f, -1.0f, 0.5f, 2.0f, 1e-30f, 1e30f, -1e30f,
                                std::numeric_limits<float>::infinity(), -std::numeric_limits<float>::infinity(),
                                std::numeric_limits<float>::quiet_NaN()};
  return edges[pick(rng, std::size(edges))];
}

void mutateInts(google::protobuf::RepeatedField<int64_t> &ints, Rng &rng) {
  size_t choice = pick(rng, 4);
  if (choice == 0 || ints.empty())
    ints.Add(edgeInt(rng));
  else if (choice == 1)
    ints.RemoveLast();
  else
    ints.Set(static_cast<int>(pick(rng, static_cast<size_t>(ints.size()))), edgeInt(rng));
}

void mutateShape(onnx::ValueInfoProto &info, Rng &rng) {
  onnx::TypeProto_Tensor &tensor = *info.mutable_type()->mutable_tensor_type();
  if (rng() % 8 == 0) {
    tensor.set_elem_type(static_cast<int32_t>(rng() % 17));
    return;
  }
  auto &dims = *tensor.mutable_shape()->mutable_dim();
  if (dims.empty() || rng() % 4 == 0)
    dims.Add()->set_dim_value(edgeInt(rng));
  else if (rng() % 4 == 0)
    dims.RemoveLast();
  else
    dims.Mutable(static_cast<int>(pick(rng, static_cast<size_t>(dims.size()))))->set_dim_value(edgeInt(rng));
}

/// One element, dim or the dtype of a tensor (integer data is what shapes and indices read).
void mutateTensor(onnx::TensorProto &tensor, Rng &rng) {
  size_t choice = pick(rng, 6);
  if (choice == 0) {
    mutateInts(*tensor.mutable_dims(), rng);
  } else if (choice == 1) {
    tensor.set_data_type(static_cast<int32_t>(rng() % 17));
  } else if (tensor.int64_data_size() > 0) {
    tensor.set_int64_data(static_cast<int>(pick(rng, static_cast<size_t>(tensor.int64_data_size()))), edgeInt(rng));
  } else if (tensor.float_data_size() > 0) {
    tensor.set_float_data(static_cast<int>(pick(rng, static_cast<size_t>(tensor.float_data_size()))), edgeFloat(rng));
  } else if (tensor.raw_data().size() >= 8 && tensor.data_type() == onnx::TensorProto::INT64) {
    int64_t value = edgeInt(rng);
    size_t slot = pick(rng, tensor.raw_data().size() / 8);
    std::memcpy(&(*tensor.mutable_raw_data())[slot * 8], &value, 8);
  } else if (tensor.raw_data().size() >= 4) {
    float value = edgeFloat(rng);
    size_t slot = pick(rng, tensor.raw_data().size() / 4);
    std::memcpy(&(*tensor.mutable_raw_data())[slot * 4], &value, 4);
  }
}

void mutateAttribute(onnx::AttributeProto &attr, Rng &rng) {
  switch (attr.type()) {
  case onnx::AttributeProto::INT:
    attr.set_i(edgeInt(rng));
    break;
  case onnx::AttributeProto::INTS:
    mutateInts(*attr.mutable_ints(), rng);
    break;
  case onnx::AttributeProto::FLOAT:
    attr.set_f(edgeFloat(rng));
    break;
  case onnx::AttributeProto::TENSOR:
    mutateTensor(*attr.mutable_t(), rng);
    break;
  default:
    attr.set_type(onnx::AttributeProto::INT); // a wrong attribute type
    attr.set_i(edgeInt(rng));
    break;
  }
}

/// Attribute names the mappings read, to add where a node has none.
const char *attributeName(Rng &rng) {
  static const char *names[] = {"axis", "axes", "perm", "pads", "kernel_shape", "strides", "dilations", "group",
                                "keepdims", "to", "k", "split", "blocksize", "batch_dims", "num_outputs", "starts",
                                "ends", "ceil_mode", "largest", "reduction", "allowzero", "onesided"};
  return names[pick(rng, std::size(names))];
}

/// Every value name a node operand could refer to.
std::vector<std::string> valueNames(const onnx::GraphProto &graph) {
  std::vector<std::string> names;
  for (const auto &input : graph.input())
    names.push_back(input.name());
  for (const auto &init : graph.initializer())
    names.push_back(init.name());
  for (const auto &node : graph.node())
    names.insert(names.end(), node.output().begin(), node.output().end());
  return names;
}

void mutateNode(onnx::GraphProto &graph, onnx::NodeProto &node, Rng &rng) {
  switch (pick(rng, 5)) {
  case 0: {
    static const std::vector<std::string_view> ops = frontend::supportedOnnxOps();
    node.set_op_type(std::string(ops[pick(rng, ops.size())]));
    break;
  }
  case 1: { // rewire, add or drop an operand
    std::vector<std::string> names = valueNames(graph);
    names.push_back("");
    const std::string &name = names[pick(rng, names.size())];
    if (node.input_size() == 0 || rng() % 3 == 0)
      node.add_input(name);
    else if (rng() % 2 == 0)
      node.mutable_input()->RemoveLast();
    else
      node.set_input(static_cast<int>(pick(rng, static_cast<size_t>(node.input_size()))), name);
    break;
  }
  case 2: {
    onnx::AttributeProto &attr = *node.add_attribute();
    attr.set_name(attributeName(rng));
    attr.set_type(rng() % 2 ? onnx::AttributeProto::INT : onnx::AttributeProto::INTS);
    mutateAttribute(attr, rng);
    break;
  }
  default:
    if (node.attribute_size() > 0)
      mutateAttribute(*node.mutable_attribute(static_cast<int>(pick(rng, static_cast<size_t>(node.attribute_size())))),
                      rng);
    break;
  }
}

void mutateModel(onnx::ModelProto &model, Rng &rng) {
  onnx::GraphProto &graph = *model.mutable_graph();
  auto some = [&](auto &repeated) { return repeated.Mutable(static_cast<int>(pick(rng, repeated.size()))); };
  switch (pick(rng, 6)) {
  case 0:
    if (graph.input_size() > 0)
      mutateShape(*some(*graph.mutable_input()), rng);
    break;
  case 1:
    if (graph.output_size() > 0)
      mutateShape(*some(*graph.mutable_output()), rng);
    break;
  case 2:
    if (graph.initializer_size() > 0)
      mutateTensor(*some(*graph.mutable_initializer()), rng);
    break;
  case 3:
    if (model.opset_import_size() > 0)
      some(*model.mutable_opset_import())->set_version(static_cast<int64_t>(rng() % 20));
    break;
  default:
    if (graph.node_size() > 0)
      mutateNode(graph, *some(*graph.mutable_node()), rng);
    break;
  }
}

} // namespace

extern "C" size_t LLVMFuzzerMutate(uint8_t *data, size_t size, size_t maxSize);

extern "C" size_t LLVMFuzzerCustomMutator(uint8_t *data, size_t size, size_t maxSize, unsigned int seed) {
  Rng rng(seed);
  onnx::ModelProto model;
  if (rng() % 2 == 0 || size > static_cast<size_t>(std::numeric_limits<int>::max()) ||
      !model.ParseFromArray(data, static_cast<int>(size)) || !model.has_graph())
    return LLVMFuzzerMutate(data, size, maxSize);
  for (int mutations = 1 + static_cast<int>(rng() % 3); mutations > 0; --mutations)
    mutateModel(model, rng);
  std::string bytes = model.SerializeAsString();
  if (bytes.size() > maxSize)
    return LLVMFuzzerMutate(data, size, maxSize);
  std::memcpy(data, bytes.data(), bytes.size());
  return bytes.size();
}

extern "C" int LLVMFuzzerInitialize(int *, char ***) {
  std::string pattern = (std::filesystem::temp_directory_path() / "kiln-fuzz-onnx-XXXXXX").string();
  std::vector<char> buffer(pattern.begin(), pattern.end());
  buffer.push_back('\0');
  if (!mkdtemp(buffer.data()))
    finding("mkdtemp failed");
  externalDataDir() = buffer.data();
  std::ofstream data(externalDataDir() + "/w.bin", std::ios::binary);
  for (int i = 0; i < 256; ++i)
    data.put(static_cast<char>(i));
  std::atexit(removeExternalDataDir);
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  std::string bytes(reinterpret_cast<const char *>(data), size);
  fuzzTensorProto(bytes);
  fuzzModel(bytes);
  return 0;
}
