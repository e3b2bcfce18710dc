// Emitters of the indexing ops (gather, gather_elements, gather_nd and the scatter family with
// every reduction) and the sequence ops (cumsum, topk, trilu, one_hot). Indices are graph
// inputs of an index domain (tests/fuzz/compile/InputDomains.h): valid, negative ones
// included, and repeated (scatters combine repeats in update order in both).
#include <algorithm>
#include <cmath>

#include "tests/fuzz/compile/Generator.h"

namespace kiln::fuzz {

namespace {

GenValue dataOperand(Gen &gen, bool allowBool, bool allowHalf) {
  GenValue x = gen.fromPool(
      [&](const GenValue &v) { return v.rank() >= 1 && (allowBool || v.dtype() != DType::Bool); },
      [&] { return gen.leaf(gen.chance(25) ? gen.intType : gen.floatType, gen.randomShape(1, 4), InputDomain::Kind::Signed); });
  return allowHalf ? x : gen.noHalf(x);
}

DType indexType(Gen &gen, bool allowI32) { return allowI32 && gen.chance(40) ? DType::I32 : DType::I64; }

/// An indices shape for the elementwise forms: data's rank, at most data's dims off `axis`.
Shape elementwiseIndexShape(Gen &gen, const Shape &data, int64_t axis) {
  Shape shape = data;
  for (size_t d = 0; d < shape.size(); ++d)
    shape[d] = static_cast<int64_t>(d) == axis ? gen.between(data[d] == 0 ? 0 : 1, 5) : gen.between(0, data[d]);
  if (gen.chance(80))
    for (int64_t &dim : shape)
      dim = std::max<int64_t>(dim, 1);
  for (size_t d = 0; d < shape.size(); ++d)
    if (static_cast<int64_t>(d) != axis)
      shape[d] = std::min(shape[d], data[d]);
  if (data[static_cast<size_t>(axis)] == 0) // no index is valid on an empty axis
    shape[static_cast<size_t>(axis)] = 0;
  return shape;
}

} // namespace

void emitGather(Gen &gen, OpKind op) {
  GenValue data = dataOperand(gen, true, true);
  auto rank = data.rank();
  const Shape &shape = data.shape();
  switch (op) {
  case OpKind::Gather: {
    int64_t axis = gen.between(-rank, rank - 1);
    int64_t dim = shape[static_cast<size_t>(axis < 0 ? axis + rank : axis)];
    Shape indexShape = gen.randomShape(0, 2, 16);
    if (dim == 0)
      indexShape = {0};
    GenValue indices = gen.input(indexType(gen, true), indexShape, InputDomain::Kind::Index, {std::max<int64_t>(dim, 1)});
    gen.add(gen.emit(op, {data, indices}, {{"axis", axis}}, data.lo, data.hi, data.fracBits));
    return;
  }
  case OpKind::GatherElements: {
    int64_t axis = gen.between(0, rank - 1);
    Shape indexShape = elementwiseIndexShape(gen, shape, axis);
    int64_t dim = std::max<int64_t>(shape[static_cast<size_t>(axis)], 1);
    GenValue indices = gen.input(indexType(gen, true), indexShape, InputDomain::Kind::Index, {dim});
    gen.add(gen.emit(op, {data, indices}, {{"axis", gen.chance(30) ? axis - rank : axis}}, data.lo, data.hi,
                     data.fracBits));
    return;
  }
  case OpKind::GatherNd: {
    int64_t batch = gen.chance(70) ? 0 : gen.between(0, rank - 1);
    int64_t length = gen.between(1, rank - batch);
    Shape indexShape(shape.begin(), shape.begin() + batch);
    for (int64_t extra = gen.between(0, 2); extra > 0; --extra)
      indexShape.push_back(gen.between(1, 3));
    indexShape.push_back(length);
    if (static_cast<int64_t>(indexShape.size()) <= batch) // batch_dims must stay below the indices' rank
      return;
    std::vector<int64_t> dims;
    for (int64_t j = 0; j < length; ++j)
      dims.push_back(shape[static_cast<size_t>(batch + j)]);
    if (std::find(dims.begin(), dims.end(), 0) != dims.end())
      return;
    GenValue indices = gen.input(DType::I64, indexShape, InputDomain::Kind::Index, dims);
    gen.add(gen.emit(op, {data, indices}, {{"batch_dims", batch}}, data.lo, data.hi, data.fracBits));
    return;
  }
  default: return;
  }
}

void emitScatter(Gen &gen, OpKind op) {
  std::string reduction = op == OpKind::ScatterAdd ? "add" : gen.oneOf<std::string>({"none", "none", "add", "mul", "max", "min"});
  GenValue data = dataOperand(gen, reduction == "none", false);
  if (reduction == "mul") // products of repeated updates stay small and on a short grid
    data = gen.tame(data, isFloat(data.dtype()) ? 1 : 2);
  auto rank = data.rank();
  const Shape &shape = data.shape();
  InputDomain::Kind kind = data.dtype() == DType::Bool ? InputDomain::Kind::Bool : InputDomain::Kind::Signed;
  GenValue indices, updates;
  int64_t repeats = 1; // how many updates can land on one element
  if (op == OpKind::ScatterNd) {
    int64_t length = gen.between(0, rank);
    Shape indexShape = gen.randomShape(1, 2, 6, false);
    indexShape.push_back(length);
    std::vector<int64_t> dims(shape.begin(), shape.begin() + length);
    if (std::find(dims.begin(), dims.end(), 0) != dims.end())
      return;
    if (dims.empty())
      dims.push_back(1);
    indices = gen.input(DType::I64, indexShape, InputDomain::Kind::Index, dims);
    Shape updateShape(indexShape.begin(), indexShape.end() - 1);
    updateShape.insert(updateShape.end(), shape.begin() + length, shape.end());
    if (numElements(updateShape) > gen.maxElements())
      return;
    updates = gen.ofType(data.dtype(), updateShape, kind);
    repeats = numElements(Shape(indexShape.begin(), indexShape.end() - 1));
  } else {
    int64_t axis = gen.between(0, rank - 1);
    Shape indexShape = elementwiseIndexShape(gen, shape, axis);
    indices = gen.input(indexType(gen, true), indexShape, InputDomain::Kind::Index,
                        {std::max<int64_t>(shape[static_cast<size_t>(axis)], 1)});
    updates = gen.ofType(data.dtype(), indexShape, kind);
    repeats = indexShape[static_cast<size_t>(axis)];
    ir::AttrMap attrs{{"axis", gen.chance(30) ? axis - rank : axis}};
    if (op == OpKind::ScatterElements)
      attrs["reduction"] = reduction;
    if (reduction == "mul")
      updates = gen.tame(updates, isFloat(data.dtype()) ? 1 : 2);
    double m = std::max(data.maxAbs(), updates.maxAbs()), n = static_cast<double>(repeats);
    double bound = reduction == "add" ? data.maxAbs() + n * updates.maxAbs() : reduction == "mul" ? std::pow(m, n + 1) : m;
    int bits = data.fracBits < 0 || updates.fracBits < 0 ? -1 : std::max(data.fracBits, updates.fracBits);
    if (reduction == "mul" && bits >= 0)
      bits *= static_cast<int>(n + 1);
    gen.add(gen.emit(op, {data, indices, updates}, attrs, -bound, bound, bits));
    return;
  }
  if (reduction == "mul")
    updates = gen.tame(updates, isFloat(data.dtype()) ? 1 : 2);
  double m = std::max(data.maxAbs(), updates.maxAbs()), n = static_cast<double>(repeats);
  double bound = reduction == "add" ? data.maxAbs() + n * updates.maxAbs() : reduction == "mul" ? std::pow(m, n + 1) : m;
  int bits = data.fracBits < 0 || updates.fracBits < 0 ? -1 : std::max(data.fracBits, updates.fracBits);
  if (reduction == "mul" && bits >= 0)
    bits *= static_cast<int>(std::min(n + 1, 61.0));
  gen.add(gen.emit(op, {data, indices, updates}, {{"reduction", reduction}}, -bound, bound, bits));
}

void emitSequence(Gen &gen, OpKind op) {
  switch (op) {
  case OpKind::CumSum: {
    GenValue x = gen.noHalf(gen.numericOperand());
    if (x.rank() == 0)
      x = gen.reshape(x, {1});
    auto rank = x.rank();
    int64_t axis = gen.between(-rank, rank - 1);
    auto n = static_cast<double>(x.shape()[static_cast<size_t>(axis < 0 ? axis + rank : axis)]);
    ir::AttrMap attrs{{"axis", axis}, {"exclusive", int64_t(gen.pick(2))}, {"reverse", int64_t(gen.pick(2))}};
    gen.add(gen.emit(op, {x}, attrs, std::min(0.0, x.lo * n), std::max(0.0, x.hi * n), x.fracBits));
    return;
  }
  case OpKind::TopK: {
    // Ties are common on the grid; both must order them the same way, so values are exact.
    GenValue x = gen.noHalf(gen.exactOperand());
    if (x.rank() == 0)
      x = gen.reshape(x, {1});
    auto rank = x.rank();
    int64_t axis = gen.between(-rank, rank - 1);
    int64_t dim = x.shape()[static_cast<size_t>(axis < 0 ? axis + rank : axis)];
    ir::AttrMap attrs{{"k", gen.between(0, dim)}, {"axis", axis}, {"largest", int64_t(gen.pick(2))},
                      {"sorted", int64_t(gen.chance(80))}};
    std::vector<Var> outs = gen.emitMulti(op, {x}, attrs);
    GenValue values = x, indices = x;
    values.var = outs[0];
    indices.var = outs[1];
    indices.lo = 0, indices.hi = static_cast<double>(std::max<int64_t>(dim - 1, 0)), indices.fracBits = 0;
    gen.add(values);
    gen.add(indices);
    return;
  }
  case OpKind::Trilu: {
    GenValue x = gen.fromPool([](const GenValue &v) { return v.rank() >= 2; },
                              [&] { return gen.leaf(gen.floatType, gen.randomShape(2, 4), InputDomain::Kind::Signed); });
    double lo = std::min(x.lo, 0.0), hi = std::max(x.hi, 0.0);
    gen.add(gen.emit(op, {x}, {{"upper", int64_t(gen.pick(2))}, {"k", gen.between(-3, 3)}}, lo, hi, x.fracBits));
    return;
  }
  case OpKind::OneHot: {
    int64_t depth = gen.between(1, 6);
    // One index in a few lies outside [-depth, depth): its row is all off.
    int64_t reach = gen.chance(30) ? depth + 2 : depth;
    GenValue indices = gen.input(gen.oneOf<DType>({DType::I64, DType::I32, gen.intType}), gen.randomShape(0, 3, 64),
                                 InputDomain::Kind::Index, {reach});
    DType dtype = gen.oneOf<DType>({gen.floatType, gen.intType, DType::F32});
    GenValue values = gen.leaf(dtype, {2}, InputDomain::Kind::Signed);
    auto rank = indices.rank();
    gen.add(gen.emit(op, {indices, values}, {{"depth", depth}, {"axis", gen.between(-rank - 1, rank)}}, values.lo,
                     values.hi, values.fracBits));
    return;
  }
  default: return;
  }
}

} // namespace kiln::fuzz
