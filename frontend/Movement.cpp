#include "frontend/Movement.h"

#include "core/Error.h"
#include "frontend/Math.h"

namespace kiln::frontend {

using ir::OpKind;

Var reshape(const Var &x, std::vector<int64_t> shape) {
  // The IR's reshape resolves the -1 itself, with an error naming both shapes.
  return x.builder().op(OpKind::Reshape, {x}, {{"shape", std::move(shape)}});
}

Var permute(const Var &x, std::vector<int64_t> perm) {
  return x.builder().op(OpKind::Permute, {x}, {{"perm", std::move(perm)}});
}

Var transpose(const Var &x, int64_t axis0, int64_t axis1) {
  std::string what = fmt::format("transpose({}, {}, {})", x.type().toString(), axis0, axis1);
  int64_t a = normalizeAxis(axis0, x.rank(), what), b = normalizeAxis(axis1, x.rank(), what);
  std::vector<int64_t> perm;
  for (int64_t d = 0; d < x.rank(); ++d)
    perm.push_back(d == a ? b : d == b ? a : d);
  return permute(x, std::move(perm));
}

Var broadcastTo(const Var &x, Shape shape) {
  return x.builder().op(OpKind::Broadcast, {x}, {{"shape", std::move(shape)}});
}

Var slice(const Var &x, std::vector<int64_t> starts, std::vector<int64_t> ends, std::vector<int64_t> axes,
          std::vector<int64_t> steps) {
  return x.builder().op(OpKind::Slice, {x},
                        {{"starts", std::move(starts)},
                         {"ends", std::move(ends)},
                         {"axes", std::move(axes)},
                         {"steps", std::move(steps)}});
}

Var narrow(const Var &x, int64_t axis, int64_t start, int64_t length) {
  // torch.narrow rejects a range that leaves the axis, where slice would clamp it silently.
  std::string what = fmt::format("narrow({}, axis {}, start {}, length {})", x.type().toString(), axis, start, length);
  int64_t dim = x.shape()[static_cast<size_t>(normalizeAxis(axis, x.rank(), what))];
  int64_t first = start < 0 ? start + dim : start;
  if (first < 0 || length < 0 || length > dim - first) // not first + length: both may be near 2^63
    fail("{}: the range does not fit in an axis of size {}", what, dim);
  return slice(x, {first}, {first + length}, {axis});
}

Var pad(const Var &x, std::vector<int64_t> pads, const std::string &mode, double value) {
  return x.builder().op(OpKind::Pad, {x}, {{"pads", std::move(pads)}, {"mode", mode}, {"value", value}});
}

Var concat(const std::vector<Var> &xs, int64_t axis) {
  if (xs.empty())
    fail("concat: needs at least one operand");
  for (size_t i = 0; i < xs.size(); ++i)
    if (!xs[i].defined())
      fail("concat: operand {} is undefined", i);
  DType common = xs[0].dtype();
  for (const Var &x : xs)
    common = promoteTypes(common, x.dtype());
  std::vector<Var> operands;
  for (const Var &x : xs)
    operands.push_back(&x.builder() == &xs[0].builder() ? cast(x, common) : x); // op() reports the mix
  return xs[0].builder().op(OpKind::Concat, operands, {{"axis", axis}});
}

std::vector<Var> split(const Var &x, std::vector<int64_t> sizes, int64_t axis) {
  return x.builder().opMulti(OpKind::Split, {x}, {{"axis", axis}, {"sizes", std::move(sizes)}});
}

std::vector<Var> chunk(const Var &x, int64_t chunks, int64_t axis) {
  std::string what = fmt::format("chunk({}, {} chunks, axis {})", x.type().toString(), chunks, axis);
  if (chunks <= 0)
    fail("{}: the number of chunks must be positive", what);
  int64_t dim = x.shape()[static_cast<size_t>(normalizeAxis(axis, x.rank(), what))];
  int64_t each = dim / chunks + (dim % chunks != 0 ? 1 : 0); // not (dim + chunks - 1): chunks may be near 2^63
  if (each == 0)
    return {x}; // torch gives the one empty piece
  std::vector<int64_t> sizes;
  for (int64_t offset = 0; offset < dim; offset += each)
    sizes.push_back(std::min(each, dim - offset));
  return split(x, std::move(sizes), axis);
}

Var squeeze(const Var &x, std::vector<int64_t> axes) {
  return x.builder().op(OpKind::Squeeze, {x}, {{"axes", std::move(axes)}});
}

Var unsqueeze(const Var &x, std::vector<int64_t> axes) {
  return x.builder().op(OpKind::Unsqueeze, {x}, {{"axes", std::move(axes)}});
}

Var unsqueeze(const Var &x, int64_t axis) { return unsqueeze(x, std::vector<int64_t>{axis}); }

Var flatten(const Var &x, int64_t start, int64_t end) {
  return x.builder().op(OpKind::Flatten, {x}, {{"start", start}, {"end", end}});
}

Var gather(const Var &x, const Var &indices, int64_t axis) {
  return x.builder().op(OpKind::Gather, {x, indices}, {{"axis", axis}});
}

Var scatterAdd(const Var &x, const Var &indices, const Var &updates, int64_t axis) {
  // No promotion: the result has the data's dtype, so updates of another dtype are an error
  // (as in torch) rather than a silent conversion.
  return x.builder().op(OpKind::ScatterAdd, {x, indices, updates}, {{"axis", axis}});
}

} // namespace kiln::frontend
