// gather_elements and gather_nd as indirect loads (see EmitDirect.h): the index is loaded (or
// computed inline) at coordinates derived from the output's, wrapped and clamped with
// kiln_gather_index, and becomes an opaque coordinate of the data read. Like gather, they
// therefore fuse with whatever produces their operands and consumes their output.
#include "codegen/EmitDirect.h"
#include "codegen/ScalarOps.h"

namespace kiln::codegen {

namespace {

// The data coordinate an index value selects on an axis of size `dim`: negative indices count
// from the end, out-of-range ones are clamped (the reference evaluator reports them).
Index resolvedIndex(KernelEmitter &e, const Scalar &index, int64_t dim) {
  std::string name = e.fresh("g");
  e.lineAt(index.level, fmt::format("const int64_t {} = kiln_gather_index((int64_t){}, {});", name, index.code, dim));
  return e.arena().opaque(name, {0, dim - 1}, index.level);
}

} // namespace

// ONNX GatherElements: out[i...] = data[i... with i[axis] replaced by indices[i...]]; off the
// axis indices never exceed data (inference checks it), so only the axis needs resolving.
Scalar gatherElementsLoad(KernelEmitter &e, const ir::Node &node, const std::vector<Index> &coords) {
  const ir::Value *data = node.input(0), *indices = node.input(1);
  int64_t rank = data->rank();
  int64_t axis = node.attrInt("axis") < 0 ? node.attrInt("axis") + rank : node.attrInt("axis");
  int64_t dim = data->shape().at(static_cast<size_t>(axis));
  if (dim == 0) // then indices are empty too, or the evaluator rejects them: never read
    return {literal(node.output()->dtype(), 0), 0};
  Scalar index = e.value(indices, coords);
  std::vector<Index> source = coords;
  source[static_cast<size_t>(axis)] = resolvedIndex(e, index, dim);
  return e.value(data, source);
}

// ONNX GatherND: output coords are indices' coords without its last dim, then data's dims
// after batch_dims + L (L the tuple length); the data coords are the batch coords, the L
// tuple entries, then those trailing coords.
Scalar gatherNdLoad(KernelEmitter &e, const ir::Node &node, const std::vector<Index> &coords) {
  const ir::Value *data = node.input(0), *indices = node.input(1);
  const Shape &dataShape = data->shape();
  auto batch = static_cast<size_t>(node.attrInt("batch_dims"));
  size_t tupleDims = indices->shape().size() - 1;
  auto length = static_cast<size_t>(indices->shape().back());
  std::vector<Index> source(coords.begin(), coords.begin() + static_cast<std::ptrdiff_t>(batch));
  std::vector<Index> tupleCoords(coords.begin(), coords.begin() + static_cast<std::ptrdiff_t>(tupleDims));
  tupleCoords.push_back(IndexArena::constant(0));
  for (size_t j = 0; j < length; ++j) {
    int64_t dim = dataShape.at(batch + j);
    if (dim == 0)
      return {literal(node.output()->dtype(), 0), 0};
    tupleCoords.back() = IndexArena::constant(static_cast<int64_t>(j));
    source.push_back(resolvedIndex(e, e.value(indices, tupleCoords), dim));
  }
  source.insert(source.end(), coords.begin() + static_cast<std::ptrdiff_t>(tupleDims), coords.end());
  return e.value(data, source);
}

} // namespace kiln::codegen
