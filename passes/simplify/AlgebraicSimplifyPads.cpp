// Zero-padding rules of simplify-algebra (AlgebraicSimplifyPads.h).
#include "passes/simplify/AlgebraicSimplifyPads.h"

#include <algorithm>
#include <optional>

namespace kiln::passes::simplify {

using ir::Node;
using ir::OpKind;
using ir::Value;

namespace {

/// A pad that fills with zeros and crops nothing.
bool isZeroPad(const Node *n) {
  if (!n || n->op() != OpKind::Pad || n->attrString("mode") != "constant" || n->attrFloat("value") != 0.0)
    return false;
  const std::vector<int64_t> &pads = n->attrInts("pads");
  return std::all_of(pads.begin(), pads.end(), [](int64_t p) { return p >= 0; });
}

/// Where a zero pad puts its operand along its one padded axis.
struct Placement {
  size_t axis = 0;
  int64_t begin = 0, end = 0; // operand occupies [begin, end) of the output's axis
};

/// The placement of zero pad `n` when it pads at most one axis (an unpadded pad places its
/// operand on axis `fallback`, covering it).
std::optional<Placement> placementOf(const Node *n, std::optional<size_t> fallback) {
  const std::vector<int64_t> &pads = n->attrInts("pads");
  const size_t rank = pads.size() / 2;
  std::optional<size_t> axis;
  for (size_t d = 0; d < rank; ++d) {
    if (pads[d] == 0 && pads[d + rank] == 0)
      continue;
    if (axis)
      return std::nullopt;
    axis = d;
  }
  if (!axis)
    axis = fallback;
  if (!axis)
    return std::nullopt;
  const int64_t dim = n->output()->shape()[*axis];
  return Placement{*axis, pads[*axis], dim - pads[*axis + rank]};
}

} // namespace

Value *padNothing(ir::Builder &, Node *n) {
  const std::vector<int64_t> &pads = n->attrInts("pads");
  bool nothing = std::all_of(pads.begin(), pads.end(), [](int64_t p) { return p == 0; });
  return nothing && n->input(0)->type() == n->output()->type() ? n->input(0) : nullptr;
}

Value *addAdjacentPads(ir::Builder &b, Node *n) {
  Node *first = n->input(0)->producer(), *second = n->input(1)->producer();
  if (!isZeroPad(first) || !isZeroPad(second) || first->output()->type() != n->output()->type() ||
      second->output()->type() != n->output()->type())
    return nullptr;
  std::optional<Placement> a = placementOf(first, std::nullopt);
  std::optional<Placement> c = placementOf(second, a ? std::optional<size_t>(a->axis) : std::nullopt);
  if (a && !c)
    return nullptr;
  if (!a && c)
    a = placementOf(first, c->axis);
  if (!a || !c || a->axis != c->axis)
    return nullptr;
  if (a->end != c->begin && c->end != a->begin)
    return nullptr; // overlapping, or a gap of zeros between them
  bool firstBefore = a->end == c->begin;
  Value *lower = firstBefore ? first->input(0) : second->input(0);
  Value *upper = firstBefore ? second->input(0) : first->input(0);
  const int64_t begin = std::min(a->begin, c->begin), end = std::max(a->end, c->end);
  const size_t rank = n->output()->shape().size();
  Value *joined = b.create(OpKind::Concat, {lower, upper}, {{"axis", static_cast<int64_t>(a->axis)}});
  std::vector<int64_t> pads(2 * rank, 0);
  pads[a->axis] = begin;
  pads[a->axis + rank] = n->output()->shape()[a->axis] - end;
  return b.create(OpKind::Pad, {joined}, {{"pads", pads}});
}

Value *avgPoolOfZeroPad(ir::Builder &b, Node *n) {
  Node *pad = n->input(0)->producer();
  if (!isZeroPad(pad))
    return nullptr;
  const std::vector<int64_t> &padPads = pad->attrInts("pads");
  const size_t rank = padPads.size() / 2;
  if (rank < 3 || n->output()->shape().size() != rank)
    return nullptr;
  const size_t spatial = rank - 2;
  for (size_t d = 0; d < 2; ++d) // batch and channels stay as they are
    if (padPads[d] != 0 || padPads[d + rank] != 0)
      return nullptr;
  const std::vector<int64_t> &poolPads = n->attrInts("pads");
  if (std::any_of(poolPads.begin(), poolPads.end(), [](int64_t p) { return p != 0; }))
    return nullptr;
  std::vector<int64_t> pads(2 * spatial);
  for (size_t d = 0; d < spatial; ++d)
    pads[d] = padPads[2 + d], pads[spatial + d] = padPads[rank + 2 + d];
  ir::AttrMap attrs = n->attrs();
  attrs["pads"] = pads;
  attrs["count_include_pad"] = int64_t{1};
  Value *folded = b.create(OpKind::AvgPool, {pad->input(0)}, attrs);
  return folded->type() == n->output()->type() ? folded : nullptr;
}

} // namespace kiln::passes::simplify
