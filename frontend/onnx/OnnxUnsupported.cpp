// The unsupported-feature scan and the coverage report built on it.
#include "frontend/onnx/OnnxUnsupported.h"

#include <map>
#include <set>
#include <unordered_map>

#include "frontend/onnx/OnnxImporter.h"
#include "frontend/onnx/OnnxLoad.h"
#include "frontend/onnx/OnnxOpTable.h"
#include "frontend/onnx/OnnxTensor.h"

namespace kiln::frontend {

namespace {

bool isDefaultDomain(const std::string &domain) { return domain.empty() || domain == "ai.onnx"; }

bool isControlFlow(const std::string &opType) {
  return opType == "If" || opType == "Loop" || opType == "Scan" || opType == "SequenceMap";
}

using ElemTypes = std::unordered_map<std::string, int32_t>;

/// Element types ONNX declares or inferred for value names (value_info, inputs, outputs,
/// initializers).
ElemTypes declaredElemTypes(const onnx::GraphProto &graph) {
  ElemTypes types;
  auto add = [&](const onnx::ValueInfoProto &info) {
    if (info.type().has_tensor_type() && info.type().tensor_type().elem_type() != onnx::TensorProto::UNDEFINED)
      types[info.name()] = info.type().tensor_type().elem_type();
  };
  for (const auto &info : graph.value_info())
    add(info);
  for (const auto &info : graph.output())
    add(info);
  for (const auto &info : graph.input())
    add(info);
  for (const auto &init : graph.initializer())
    types[init.name()] = init.data_type();
  return types;
}

const onnx::AttributeProto *findAttribute(const onnx::NodeProto &node, const std::string &name) {
  for (const auto &attr : node.attribute())
    if (attr.name() == name)
      return &attr;
  return nullptr;
}

// ---- widened integer types ------------------------------------------------------------------
// kiln holds int16 and uint16 in i32, uint32 and uint64 in i64 (OnnxTensor.h). That is exact
// as long as no op produces a value outside the narrow type, where ONNX wraps around and the
// held type does not. So a node with a widened operand or result is imported only where its op
// cannot leave the narrow range:
//   - it moves, copies or selects elements: Identity, Reshape, Squeeze, Unsqueeze, Flatten,
//     Transpose, Concat, Slice, Gather, Expand, Tile, Where; Shape and Size read only dims;
//   - it compares: Equal, Less, Greater, LessOrEqual, GreaterOrEqual (bool results; the held
//     values order as the narrow ones do);
//   - its result lies within its operands' range: Max and Min pick an operand; Mod's remainder
//     is smaller in magnitude than the divisor (int16's -32768 mod -1 is 0); for the unsigned
//     types Div's quotient is at most the dividend and Abs is the identity; BitShift RIGHT only
//     shrinks the value;
//   - it converts *from* the widened type: Cast's and CastLike's input, and Pow's exponent,
//     which is cast to the base's type (the held value is the narrow value, so the conversion
//     gives the same result);
//   - BitShift LEFT of uint16 and uint32: the mapping shifts within the held type, which has the
//     room, and reduces the result modulo 2^16 or 2^32, as the narrow type wraps.
// Everything else can wrap around: Add, Sub, Mul, Neg, Sum, CumSum, a widened Pow base, Abs of
// int16 -32768 and Div of -32768 by -1, BitShift LEFT of uint64 (whose result may not fit i64),
// a Cast or CastLike *into* a widened type (from a wider or float value), and reductions (a
// ReduceMax of an empty axis gives the held type's lowest value, not the narrow one's).
const std::set<std::string> &opsExactOnAnyWidenedOperand() {
  static const std::set<std::string> ops{"Concat", "Equal", "Expand", "Flatten", "Gather", "Greater",
                                         "GreaterOrEqual", "Identity", "Less", "LessOrEqual", "Max", "Min",
                                         "Mod", "Reshape", "Shape", "Size", "Slice", "Squeeze", "Tile",
                                         "Transpose", "Unsqueeze", "Where"};
  return ops;
}

bool isUnsignedOnnxType(int32_t type) {
  return type == onnx::TensorProto::UINT16 || type == onnx::TensorProto::UINT32 || type == onnx::TensorProto::UINT64;
}

bool isLeftShift(const onnx::NodeProto &node) {
  const onnx::AttributeProto *direction = findAttribute(node, "direction");
  return direction && direction->s() == "LEFT";
}

/// Whether operand `input` of `node` may hold a value of widened ONNX type `type`.
bool widenedInputIsExact(const onnx::NodeProto &node, int input, int32_t type) {
  const std::string &op = node.op_type();
  if (opsExactOnAnyWidenedOperand().count(op))
    return true;
  if (op == "Cast")
    return true;
  if (op == "CastLike")
    return input == 0; // input 1 gives the target type
  if (op == "Pow")
    return input == 1;
  if (op == "Div" || op == "Abs")
    return isUnsignedOnnxType(type);
  if (op == "BitShift")
    return !isLeftShift(node) || type != onnx::TensorProto::UINT64;
  return false;
}

/// Whether `node` may produce a value of a widened ONNX type (all its widened operands having
/// passed widenedInputIsExact).
bool widenedOutputIsExact(const onnx::NodeProto &node) {
  const std::string &op = node.op_type();
  return opsExactOnAnyWidenedOperand().count(op) || op == "Div" || op == "Abs" || op == "BitShift" ||
         op == "Constant" || op == "ConstantOfShape";
}

/// The problem of the first widened operand or result of `node` whose op could wrap around in
/// its ONNX type, or "" when there is none.
std::string widenedTypeProblem(const onnx::NodeProto &node, const ElemTypes &types) {
  auto problem = [&](const char *role, const std::string &name, int32_t type) {
    std::string typeName = onnxTypeName(type);
    return fmt::format("{} '{}' is {}, which kiln holds as {}; {} could wrap around in {}, so it is not supported",
                       role, name, typeName, dtypeName(*heldDTypeFromOnnx(type)), node.op_type(), typeName);
  };
  for (int i = 0; i < node.input_size(); ++i) {
    auto it = types.find(node.input(i));
    if (!node.input(i).empty() && it != types.end() && isWidenedOnnxType(it->second) &&
        !widenedInputIsExact(node, i, it->second))
      return problem("input", node.input(i), it->second);
  }
  for (const std::string &output : node.output()) {
    auto it = types.find(output);
    if (!output.empty() && it != types.end() && isWidenedOnnxType(it->second) && !widenedOutputIsExact(node))
      return problem("output", output, it->second);
  }
  return "";
}

/// Cast's target type: an element type number, or before opset 6 its name ("FLOAT").
int32_t castTargetType(const onnx::NodeProto &node) {
  const onnx::AttributeProto *to = findAttribute(node, "to");
  if (!to)
    return onnx::TensorProto::UNDEFINED;
  if (to->type() != onnx::AttributeProto::STRING)
    return static_cast<int32_t>(to->i());
  onnx::TensorProto::DataType type;
  return onnx::TensorProto::DataType_Parse(to->s(), &type) ? type : onnx::TensorProto::UNDEFINED;
}

/// The element type of `node`'s outputs as far as the scan can tell without ONNX's shape
/// inference (which must not run on unvalidated models): where a widened type can arise from
/// other types (Cast, CastLike, Constant, ConstantOfShape), and through the ops that pass it
/// on (the result has the type of the first operand for all but a few). UNDEFINED when
/// unknown. Declared types (value_info, graph outputs) take precedence over this.
int32_t inferredOutputType(const onnx::NodeProto &node, const ElemTypes &types) {
  auto operandType = [&](int i) {
    auto it = i < node.input_size() ? types.find(node.input(i)) : types.end();
    return it == types.end() ? static_cast<int32_t>(onnx::TensorProto::UNDEFINED) : it->second;
  };
  const std::string &op = node.op_type();
  if (op == "Cast")
    return castTargetType(node);
  if (op == "CastLike" || op == "Where")
    return operandType(1);
  if (op == "Constant" || op == "ConstantOfShape") {
    if (const onnx::AttributeProto *value = findAttribute(node, "value"); value && value->has_t())
      return value->t().data_type();
    if (op == "ConstantOfShape" || findAttribute(node, "value_float") || findAttribute(node, "value_floats"))
      return onnx::TensorProto::FLOAT;
    return findAttribute(node, "value_int") || findAttribute(node, "value_ints") ? onnx::TensorProto::INT64
                                                                                 : onnx::TensorProto::UNDEFINED;
  }
  if (op == "Equal" || op == "Less" || op == "Greater" || op == "LessOrEqual" || op == "GreaterOrEqual")
    return onnx::TensorProto::BOOL;
  if (op == "Shape" || op == "Size")
    return onnx::TensorProto::INT64;
  return operandType(0);
}

} // namespace

std::string describeNode(const onnx::NodeProto &node, int index) {
  if (!node.name().empty())
    return fmt::format("node '{}' ({})", node.name(), node.op_type());
  if (node.output_size() > 0)
    return fmt::format("node #{} ({}, output '{}')", index, node.op_type(), node.output(0));
  return fmt::format("node #{} ({})", index, node.op_type());
}

ModelScan scanModel(const onnx::ModelProto &model, int64_t opset) {
  const onnx::GraphProto &graph = model.graph();
  ElemTypes elemTypes = declaredElemTypes(graph);
  ModelScan scan;
  for (int i = 0; i < graph.node_size(); ++i) {
    const onnx::NodeProto &node = graph.node(i);
    NodeScan result;
    result.index = i;
    bool defaultDomain = isDefaultDomain(node.domain());
    result.opType = defaultDomain ? node.op_type() : node.domain() + ":" + node.op_type();
    const OnnxOpEntry *entry = defaultDomain ? findOnnxOp(node.op_type()) : nullptr;
    result.knownOpType = entry != nullptr;
    if (!defaultDomain) {
      result.problems.push_back(fmt::format("ops of domain '{}' are not supported", node.domain()));
    } else if (!entry) {
      result.problems.push_back(isControlFlow(node.op_type())
                                    ? fmt::format("control flow ({}) is not supported", node.op_type())
                                    : fmt::format("kiln has no mapping for op type '{}'", node.op_type()));
    } else if (entry->check) {
      try {
        entry->check(node, opset, result.problems);
      } catch (const Error &e) {
        result.problems.push_back(e.what());
      }
    }
    for (const std::string &output : node.output()) { // declared types only
      auto it = elemTypes.find(output);
      if (it != elemTypes.end() && !heldDTypeFromOnnx(it->second))
        result.problems.push_back(
            fmt::format("output '{}' has type {}, which kiln cannot represent", output, onnxTypeName(it->second)));
    }
    // Node by node, so that each node sees its operands' types (declared or inferred here).
    int32_t inferred = inferredOutputType(node, elemTypes);
    for (const std::string &output : node.output())
      if (!output.empty() && inferred != onnx::TensorProto::UNDEFINED)
        elemTypes.emplace(output, inferred); // a declared type stays
    if (entry) {
      std::string widened = widenedTypeProblem(node, elemTypes);
      if (!widened.empty())
        result.problems.push_back(std::move(widened));
    }
    scan.nodes.push_back(std::move(result));
  }
  for (const auto &init : graph.initializer())
    if (!heldDTypeFromOnnx(init.data_type()))
      scan.otherProblems.push_back(fmt::format("initializer '{}' has type {}, which kiln cannot represent", init.name(),
                                               onnxTypeName(init.data_type())));
  for (const auto &input : graph.input())
    if (input.type().has_tensor_type() && !heldDTypeFromOnnx(input.type().tensor_type().elem_type()))
      scan.otherProblems.push_back(fmt::format("graph input '{}' has type {}, which kiln cannot represent",
                                               input.name(), onnxTypeName(input.type().tensor_type().elem_type())));
  return scan;
}

std::string unsupportedSummary(const onnx::ModelProto &model, const ModelScan &scan) {
  std::vector<std::string> lines = scan.otherProblems;
  size_t badNodes = 0;
  for (const NodeScan &node : scan.nodes) {
    if (node.problems.empty())
      continue;
    ++badNodes;
    lines.push_back(fmt::format("{}: {}", describeNode(model.graph().node(node.index), node.index),
                                fmt::join(node.problems, ", ")));
  }
  if (lines.empty())
    return "";
  return fmt::format("kiln cannot import {} node(s){}: {}", badNodes,
                     scan.otherProblems.empty() ? "" : " and some values", fmt::join(lines, "; "));
}

bool OnnxCoverage::fullySupported() const {
  if (!otherProblems.empty())
    return false;
  for (const OnnxOpCoverage &op : ops)
    if (!op.supported || !op.problems.empty())
      return false;
  return true;
}

OnnxCoverage onnxCoverage(const std::string &path, const OnnxImportOptions &options) {
  try {
    onnx::ModelProto model;
    int64_t opset = parseOnnxModelAnyOpset(readFileLimited(path, options.maxFileBytes, "ONNX model"), model);
    // No ONNX shape inference here: its functions trust the model, and coverage reports are
    // asked for exactly the models that kiln has not validated.
    ModelScan scan = scanModel(model, opset);
    OnnxCoverage coverage;
    coverage.opset = opset;
    coverage.nodeCount = static_cast<int64_t>(scan.nodes.size());
    coverage.otherProblems = scan.otherProblems;
    if (opset < kMinOnnxOpset || opset > kMaxOnnxOpset)
      coverage.otherProblems.push_back(
          fmt::format("opset {} is outside the opsets kiln imports ({} to {})", opset, kMinOnnxOpset, kMaxOnnxOpset));
    std::map<std::string, OnnxOpCoverage> byType;
    for (const NodeScan &node : scan.nodes) {
      OnnxOpCoverage &op = byType[node.opType];
      op.opType = node.opType;
      op.count += 1;
      op.supported = node.knownOpType;
      if (node.knownOpType)
        for (const std::string &problem : node.problems)
          op.problems.push_back(
              fmt::format("{}: {}", describeNode(model.graph().node(node.index), node.index), problem));
    }
    for (auto &[type, op] : byType)
      coverage.ops.push_back(std::move(op));
    return coverage;
  } catch (const Error &e) {
    fail("{}: {}", path, e.what());
  }
}

} // namespace kiln::frontend
