// Emitters of reductions over random axes (with keepdims and negative axes), arg-reductions,
// the reduction composites, and movement: reshape, permute, broadcast, squeeze, unsqueeze,
// flatten, slice (with steps of either sign and bounds past the ends), pad in every mode,
// concat, split and tile.
#include <algorithm>
#include <cmath>

#include "tests/fuzz/compile/Generator.h"

namespace kiln::fuzz {

namespace {

/// A random subset of the axes of a rank-`rank` value (empty now and then: every axis), each
/// written as a negative axis now and then; the product of the chosen dims goes to `count`.
std::vector<int64_t> randomAxes(Gen &gen, const Shape &shape, int64_t &count) {
  auto rank = static_cast<int64_t>(shape.size());
  std::vector<int64_t> axes;
  count = 1;
  if (rank == 0 || gen.chance(15)) {
    for (int64_t dim : shape)
      count *= dim;
    return axes;
  }
  for (int64_t axis : gen.permutation(rank))
    if (gen.chance(45)) {
      axes.push_back(gen.chance(30) ? axis - rank : axis);
      count *= shape[static_cast<size_t>(axis)];
    }
  if (axes.empty()) {
    int64_t axis = gen.between(0, rank - 1);
    axes.push_back(axis);
    count = shape[static_cast<size_t>(axis)];
  }
  return axes;
}

/// `total` split into `rank` factors (a 0 total puts a 0 among them).
Shape randomFactorization(Gen &gen, int64_t total, size_t rank) {
  Shape shape(rank, 1);
  if (rank == 0)
    return shape;
  if (total == 0) {
    for (int64_t &dim : shape)
      dim = gen.between(1, 3);
    shape[static_cast<size_t>(gen.pick(static_cast<int>(rank)))] = 0;
    return shape;
  }
  int64_t rest = total;
  for (int64_t p = 2; rest > 1;) {
    if (rest % p == 0) {
      shape[static_cast<size_t>(gen.pick(static_cast<int>(rank)))] *= p;
      rest /= p;
    } else {
      ++p;
      if (p * p > rest)
        p = rest;
    }
  }
  return shape;
}

GenValue anyValue(Gen &gen, int maxRank = 4) {
  return gen.fromPool([maxRank](const GenValue &v) { return v.rank() <= maxRank; },
                      [&] { return gen.numericOperand(maxRank); });
}

} // namespace

void emitReduce(Gen &gen, OpKind op) {
  bool floatOnly = op == OpKind::ReduceMean || op == OpKind::ReduceL2 || op == OpKind::ReduceLogSum ||
                   op == OpKind::ReduceLogSumExp;
  GenValue x = floatOnly ? gen.floatOperand() : gen.numericOperand();
  int64_t count = 1;
  std::vector<int64_t> axes = randomAxes(gen, x.shape(), count);
  ir::AttrMap attrs{{"axes", axes}, {"keepdims", int64_t(gen.pick(2))}};
  auto n = static_cast<double>(count);
  double m = x.maxAbs();
  int bits = x.fracBits;
  switch (op) {
  case OpKind::ReduceSum:
    gen.add(gen.emit(op, {x}, attrs, std::min(x.lo * n, 0.0), std::max(x.hi * n, 0.0), bits));
    return;
  case OpKind::ReduceMax:
  case OpKind::ReduceMin:
    if (count == 0)
      return; // no identity: inference rejects it
    gen.add(gen.emit(op, {x}, attrs, x.lo, x.hi, bits));
    return;
  case OpKind::ReduceProd: {
    // Factors at most 1 in magnitude (integers in [-2, 2], which wrap alike when they overflow).
    x = isFloat(x.dtype()) ? gen.tame(x, 1) : gen.tame(x, 2);
    double bound = isFloat(x.dtype()) ? 1 : std::pow(2.0, std::min(n, 62.0));
    gen.add(gen.emit(op, {x}, attrs, -bound, bound, x.fracBits < 0 ? -1 : x.fracBits * static_cast<int>(std::min(n, 61.0))));
    return;
  }
  case OpKind::ReduceMean:
    if (count == 0)
      return; // 0 * inf: NaN
    gen.add(gen.emit(op, {x}, attrs, x.lo, x.hi, -1));
    return;
  case OpKind::ReduceL1: gen.add(gen.emit(op, {x}, attrs, 0, m * n, bits)); return;
  case OpKind::ReduceSumSquare:
    gen.add(gen.emit(op, {x}, attrs, 0, m * m * n, bits < 0 ? -1 : 2 * bits));
    return;
  case OpKind::ReduceL2: gen.add(gen.emit(op, {x}, attrs, 0, m * std::sqrt(n), -1)); return;
  case OpKind::ReduceLogSum: {
    if (count == 0)
      return; // log 0
    GenValue positive = gen.atLeast(x, 0.25);
    gen.add(gen.emit(op, {positive}, attrs, std::log(positive.lo * n), std::log(positive.hi * n), -1));
    return;
  }
  case OpKind::ReduceLogSumExp:
    if (count == 0)
      return;
    x = gen.tame(x, 8);
    gen.add(gen.emit(op, {x}, attrs, x.lo, x.hi + std::log(n), -1));
    return;
  default: return;
  }
}

void emitArgReduce(Gen &gen, OpKind op) {
  // Ties are common on the grid; the first (or last) one must win in both, so values are exact.
  GenValue x = gen.exactOperand();
  if (x.rank() == 0)
    x = gen.reshape(x, {1});
  auto rank = x.rank();
  int64_t axis = gen.between(-rank, rank - 1);
  int64_t dim = x.shape()[static_cast<size_t>(axis < 0 ? axis + rank : axis)];
  if (dim == 0)
    return;
  ir::AttrMap attrs{{"axis", axis}, {"keepdims", int64_t(gen.pick(2))}, {"select_last_index", int64_t(gen.pick(2))}};
  gen.add(gen.emit(op, {x}, attrs, 0, static_cast<double>(dim - 1), 0));
}

void emitMovement(Gen &gen, OpKind op) {
  GenValue x = anyValue(gen);
  auto rank = x.rank();
  auto keep = [&](OpKind kind, ir::AttrMap attrs) { gen.add(gen.emit(kind, {x}, std::move(attrs), x.lo, x.hi, x.fracBits)); };
  switch (op) {
  case OpKind::Reshape: {
    Shape shape = randomFactorization(gen, x.numElements(), static_cast<size_t>(gen.between(0, 5)));
    std::vector<int64_t> spec(shape.begin(), shape.end());
    if (!spec.empty() && x.numElements() > 0 && gen.chance(30))
      spec[static_cast<size_t>(gen.pick(static_cast<int>(spec.size())))] = -1;
    keep(op, {{"shape", spec}});
    return;
  }
  case OpKind::Permute: keep(op, {{"perm", gen.permutation(rank)}}); return;
  case OpKind::Broadcast: {
    Shape target = x.shape();
    for (int64_t &dim : target)
      if (dim == 1 && gen.chance(60))
        dim = gen.between(0, 4) == 0 ? 0 : gen.between(2, 4);
    for (int lead = gen.pick(3); lead > 0; --lead)
      target.insert(target.begin(), gen.between(1, 3));
    if (numElements(target) > gen.maxElements())
      target = x.shape();
    keep(op, {{"shape", std::vector<int64_t>(target)}});
    return;
  }
  case OpKind::Squeeze: {
    std::vector<int64_t> axes;
    for (int64_t d = 0; d < rank; ++d)
      if (x.shape()[static_cast<size_t>(d)] == 1 && gen.chance(60))
        axes.push_back(gen.chance(30) ? d - rank : d);
    keep(op, {{"axes", axes}});
    return;
  }
  case OpKind::Unsqueeze: {
    int64_t added = gen.between(1, 2), outRank = rank + added;
    std::vector<int64_t> axes;
    for (int64_t axis : gen.permutation(outRank))
      if (static_cast<int64_t>(axes.size()) < added)
        axes.push_back(gen.chance(30) ? axis - outRank : axis);
    keep(op, {{"axes", axes}});
    return;
  }
  case OpKind::Flatten: {
    int64_t r = std::max<int64_t>(rank, 1);
    int64_t start = gen.between(0, r - 1), end = gen.between(start, r - 1);
    keep(op, {{"start", gen.chance(30) ? start - r : start}, {"end", gen.chance(50) ? end - r : end}});
    return;
  }
  default: return;
  }
}

void emitRegion(Gen &gen, OpKind op) {
  GenValue x = anyValue(gen);
  if (x.rank() == 0)
    x = gen.reshape(x, {1});
  auto rank = x.rank();
  const Shape &shape = x.shape();
  switch (op) {
  case OpKind::Slice: {
    std::vector<int64_t> starts, ends, axes, steps;
    bool explicitAxes = gen.chance(70);
    int64_t count = gen.between(1, rank);
    std::vector<int64_t> order = explicitAxes ? gen.permutation(rank) : std::vector<int64_t>{};
    for (int64_t i = 0; i < count; ++i) {
      int64_t axis = explicitAxes ? order[static_cast<size_t>(i)] : i;
      int64_t dim = shape[static_cast<size_t>(axis)];
      int64_t step = gen.oneOf<int64_t>({1, 1, 1, 2, 3, -1, -2});
      starts.push_back(gen.between(-dim - 2, dim + 2));
      ends.push_back(gen.chance(10) ? (step > 0 ? INT64_MAX : INT64_MIN) : gen.between(-dim - 2, dim + 2));
      axes.push_back(gen.chance(30) ? axis - rank : axis);
      steps.push_back(step);
    }
    ir::AttrMap attrs{{"starts", starts}, {"ends", ends}};
    if (explicitAxes)
      attrs["axes"] = axes;
    if (gen.chance(80))
      attrs["steps"] = steps;
    else
      for (int64_t &step : steps)
        step = 1;
    gen.add(gen.emit(op, {x}, attrs, x.lo, x.hi, x.fracBits));
    return;
  }
  case OpKind::Pad: {
    std::string mode = gen.oneOf<std::string>({"constant", "constant", "reflect", "edge"});
    std::vector<int64_t> pads(static_cast<size_t>(2 * rank));
    for (int64_t d = 0; d < rank; ++d) {
      int64_t dim = shape[static_cast<size_t>(d)];
      for (int side = 0; side < 2; ++side) {
        int64_t &pad = pads[static_cast<size_t>(d + side * rank)];
        if (mode == "reflect")
          pad = dim > 1 ? gen.between(0, std::min<int64_t>(dim - 1, 3)) : 0;
        else if (mode == "edge" && dim == 0)
          pad = 0;
        else
          pad = gen.between(dim > 1 ? -1 : 0, 3); // a negative pad crops
      }
    }
    double value = gen.gridValue(-2, 2);
    if (x.dtype() == DType::Bool)
      value = gen.pick(2);
    else if (!isFloat(x.dtype()))
      value = std::round(value * 2);
    ir::AttrMap attrs{{"pads", pads}, {"mode", mode}};
    if (mode == "constant")
      attrs["value"] = value;
    double lo = mode == "constant" ? std::min(x.lo, value) : x.lo, hi = mode == "constant" ? std::max(x.hi, value) : x.hi;
    gen.add(gen.emit(op, {x}, attrs, lo, hi, x.fracBits < 0 ? -1 : std::max(x.fracBits, 3)));
    return;
  }
  case OpKind::Concat: {
    int64_t axis = gen.between(0, rank - 1);
    std::vector<GenValue> parts{x};
    double lo = x.lo, hi = x.hi;
    int bits = x.fracBits;
    for (int64_t k = gen.between(1, 3); k > 0; --k) {
      Shape partShape = shape;
      partShape[static_cast<size_t>(axis)] = gen.between(0, 4);
      GenValue part = gen.ofType(x.dtype(), partShape, x.dtype() == DType::Bool ? InputDomain::Kind::Bool
                                                                                 : InputDomain::Kind::Signed);
      lo = std::min(lo, part.lo), hi = std::max(hi, part.hi);
      bits = bits < 0 || part.fracBits < 0 ? -1 : std::max(bits, part.fracBits);
      parts.insert(parts.begin() + gen.pick(static_cast<int>(parts.size()) + 1), part);
    }
    int64_t total = 0;
    for (const GenValue &part : parts)
      total += part.numElements();
    if (total > gen.maxElements())
      return;
    gen.add(gen.emit(op, parts, {{"axis", gen.chance(30) ? axis - rank : axis}}, lo, hi, bits));
    return;
  }
  case OpKind::Split: {
    int64_t axis = gen.between(0, rank - 1), dim = shape[static_cast<size_t>(axis)];
    std::vector<int64_t> sizes;
    for (int64_t rest = dim; rest > 0 || sizes.empty();) {
      int64_t size = sizes.size() >= 3 ? rest : gen.between(gen.chance(10) ? 0 : std::min<int64_t>(1, rest), rest);
      sizes.push_back(size);
      rest -= size;
    }
    std::vector<Var> pieces = gen.emitMulti(op, {x}, {{"axis", gen.chance(30) ? axis - rank : axis}, {"sizes", sizes}});
    for (const Var &piece : pieces) {
      GenValue value = x;
      value.var = piece;
      gen.add(value);
    }
    return;
  }
  case OpKind::Tile: {
    std::vector<int64_t> repeats;
    for (int64_t d = 0; d < rank; ++d)
      repeats.push_back(gen.chance(5) ? 0 : gen.between(1, 3));
    Shape tiled = shape;
    for (size_t d = 0; d < tiled.size(); ++d)
      tiled[d] *= repeats[d];
    if (numElements(tiled) > gen.maxElements())
      return;
    gen.add(gen.emit(op, {x}, {{"repeats", repeats}}, x.lo, x.hi, x.fracBits));
    return;
  }
  default: return;
  }
}

} // namespace kiln::fuzz
