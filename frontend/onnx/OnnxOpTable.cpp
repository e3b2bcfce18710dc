// The mapping table, built from OnnxOps.def as a sorted constant array (no static
// constructors: the array is constant-initialised), and the helpers the family files share.
#include "frontend/onnx/OnnxOpTable.h"

#include <algorithm>
#include <iterator>

#include "frontend/onnx/OnnxTensor.h"

namespace kiln::frontend {

namespace {

constexpr OnnxOpEntry kTable[] = {
#define ONNX_OP(OpType, Family, Check) {#OpType, map##OpType, Check},
#include "frontend/onnx/OnnxOps.def"
};

constexpr bool isSorted() {
  for (size_t i = 1; i < std::size(kTable); ++i)
    if (!(kTable[i - 1].opType < kTable[i].opType))
      return false;
  return true;
}
static_assert(isSorted(), "OnnxOps.def must list op types in strictly increasing (ASCII) order");

} // namespace

const OnnxOpEntry *findOnnxOp(std::string_view opType) {
  const OnnxOpEntry *end = std::end(kTable);
  const OnnxOpEntry *it =
      std::lower_bound(std::begin(kTable), end, opType,
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
