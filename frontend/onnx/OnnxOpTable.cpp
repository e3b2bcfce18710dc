// The mapping table, built from OnnxOps.def and the OnnxName column of ir/ElementwiseOps.def as
// one sorted constant array (no static constructors: the array is constant-initialised), and
// the helpers the family files share.
#include "frontend/onnx/OnnxOpTable.h"

#include <algorithm>
#include <array>
#include <iterator>

#include "frontend/onnx/OnnxTensor.h"

namespace kiln::frontend {

namespace {

constexpr OnnxOpEntry kMappedOps[] = {
#define ONNX_OP(OpType, Family, Check) {#OpType, map##OpType, Check},
#include "frontend/onnx/OnnxOps.def"
};

/// An ONNX op type that is exactly one unary kiln op.
template <ir::OpKind op> std::vector<ir::Value *> mapUnaryRow(ImportContext &ctx, const onnx::NodeProto &node) {
  return {ctx.op(op, {ctx.input(node, 0)})};
}

/// An ONNX op type that is exactly one binary kiln op (with the legacy broadcast before opset 7).
template <ir::OpKind op> std::vector<ir::Value *> mapBinaryRow(ImportContext &ctx, const onnx::NodeProto &node) {
  return {mapBinaryOp(ctx, node, op)};
}

// Every row of ir/ElementwiseOps.def; those with an empty OnnxName are dropped below.
constexpr OnnxOpEntry kTableRows[] = {
#define UNARY_OP(Enum, mnemonic, apiName, domain, floatRef, intRef, spelling, f32Spelling, intSpelling, half,   \
                 gradient, onnxName)                                                                          \
  {onnxName, mapUnaryRow<ir::OpKind::Enum>, nullptr},
#define BINARY_OP(Enum, mnemonic, apiName, domain, symmetry, apiOperands, floatRef, intRef, spelling, intSpelling,  \
                  half, gradient, onnxName)                                                                       \
  {onnxName, mapBinaryRow<ir::OpKind::Enum>, nullptr},
#include "ir/ElementwiseOps.def"
};

constexpr size_t countNamed() {
  size_t count = 0;
  for (const OnnxOpEntry &row : kTableRows)
    count += row.opType.empty() ? 0 : 1;
  return count;
}

/// Both lists, sorted by op type (an insertion sort, done by the compiler).
constexpr std::array<OnnxOpEntry, std::size(kMappedOps) + countNamed()> sortedTable() {
  std::array<OnnxOpEntry, std::size(kMappedOps) + countNamed()> table{};
  size_t size = 0;
  auto insert = [&](const OnnxOpEntry &entry) {
    size_t i = size++;
    for (; i > 0 && entry.opType < table[i - 1].opType; --i)
      table[i] = table[i - 1];
    table[i] = entry;
  };
  for (const OnnxOpEntry &entry : kMappedOps)
    insert(entry);
  for (const OnnxOpEntry &row : kTableRows)
    if (!row.opType.empty())
      insert(row);
  return table;
}

constexpr auto kTable = sortedTable();

constexpr bool isStrictlyIncreasing() {
  for (size_t i = 1; i < kTable.size(); ++i)
    if (!(kTable[i - 1].opType < kTable[i].opType))
      return false;
  return true;
}
static_assert(isStrictlyIncreasing(), "an ONNX op type is listed twice (OnnxOps.def, ir/ElementwiseOps.def)");

constexpr bool isSorted() {
  for (size_t i = 1; i < std::size(kMappedOps); ++i)
    if (!(kMappedOps[i - 1].opType < kMappedOps[i].opType))
      return false;
  return true;
}
static_assert(isSorted(), "OnnxOps.def must list op types in strictly increasing (ASCII) order");

} // namespace

const OnnxOpEntry *findOnnxOp(std::string_view opType) {
  const OnnxOpEntry *end = kTable.data() + kTable.size();
  const OnnxOpEntry *it =
      std::lower_bound(kTable.data(), end, opType,
                       [](const OnnxOpEntry &entry, std::string_view key) { return entry.opType < key; });
  return it != end && it->opType == opType ? it : nullptr;
}

std::vector<std::string_view> supportedOnnxOps() {
  std::vector<std::string_view> names;
  for (const OnnxOpEntry &entry : kTable)
    names.push_back(entry.opType);
  return names;
}

bool hasOutput(const onnx::NodeProto &node, int i) { return i < node.output_size() && !node.output(i).empty(); }

ir::Value *reshapeTo(ImportContext &ctx, ir::Value *x, const Shape &shape) {
  if (x->shape() == shape)
    return x;
  return ctx.op(ir::OpKind::Reshape, {x}, {{"shape", shape}});
}

ir::Value *broadcastTo(ImportContext &ctx, ir::Value *x, const Shape &shape) {
  if (x->shape() == shape)
    return x;
  return ctx.op(ir::OpKind::Broadcast, {x}, {{"shape", shape}});
}

ir::Value *permute(ImportContext &ctx, ir::Value *x, const std::vector<int64_t> &perm) {
  return ctx.op(ir::OpKind::Permute, {x}, {{"perm", perm}});
}

DType kilnDType(int64_t onnxType, const std::string &what) {
  std::optional<DType> dtype = dtypeFromOnnx(static_cast<int32_t>(onnxType));
  if (!dtype)
    fail("{} is {}, which kiln cannot represent", what, onnxTypeName(static_cast<int32_t>(onnxType)));
  return *dtype;
}

} // namespace kiln::frontend
