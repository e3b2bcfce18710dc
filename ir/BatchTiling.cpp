#include "ir/BatchTiling.h"

#include <algorithm>
#include <cstring>
#include <optional>
#include <set>

#include "core/Error.h"
#include "core/SymbolicDim.h"
#include "ir/Builder.h"
#include "ir/Reinference.h"
#include "ir/SymbolicShapes.h"
#include "ir/Verifier.h"

namespace kiln::ir {

namespace {

/// A static tensor as [before, rows, rowBytes] around axis `d`.
struct RowBlocks {
  int64_t before = 1, rows = 1, rowBytes = 1;
};

RowBlocks rowBlocks(const Tensor &tensor, size_t d) {
  RowBlocks blocks;
  const Shape &shape = tensor.shape();
  for (size_t i = 0; i < d; ++i)
    blocks.before *= shape[i];
  blocks.rows = shape[d];
  blocks.rowBytes = static_cast<int64_t>(dtypeSize(tensor.dtype()));
  for (size_t i = d + 1; i < shape.size(); ++i)
    blocks.rowBytes *= shape[i];
  return blocks;
}

/// The first `rows` entries of axis `d` of `tensor`.
Tensor firstRows(const Tensor &tensor, size_t d, int64_t rows) {
  Shape shape = tensor.shape();
  shape[d] = rows;
  Tensor cut(tensor.dtype(), shape);
  RowBlocks blocks = rowBlocks(tensor, d);
  const auto *from = static_cast<const unsigned char *>(tensor.data());
  auto *to = static_cast<unsigned char *>(cut.data());
  for (int64_t b = 0; b < blocks.before; ++b)
    std::memcpy(to + b * rows * blocks.rowBytes, from + b * blocks.rows * blocks.rowBytes,
                static_cast<size_t>(rows * blocks.rowBytes));
  return cut;
}

} // namespace

int64_t BatchAxis::extentAt(int64_t rows) const {
  return dimMul(dimMul(outer, rows, "batch axis"), inner, "batch axis");
}

namespace {

using Axis = std::optional<BatchAxis>; // none: the value does not carry the batch

// Attributes are read directly: the Builder fills every declared default (ir/Attribute.h).
int64_t normalized(int64_t axis, int64_t rank) { return normalizeAxis(axis, rank, "axis"); }

/// Why a node is not separable (thrown inside the walk, caught by findBatchAxes).
struct NotSeparable {
  std::string reason;
};

[[noreturn]] void refuse(const Node &node, const std::string &why) {
  throw NotSeparable{fmt::format("{} {}", node.opName(), why)};
}

class Walk {
public:
  explicit Walk(BatchAxes &axes) : axes_(axes) {}

  Axis axis(const Value *value) const {
    auto found = axes_.axisOf.find(value);
    return found == axes_.axisOf.end() ? Axis() : Axis(found->second);
  }

  void set(const Value *value, Axis axis) {
    if (axis)
      axes_.axisOf[value] = *axis;
  }

  static Axis moved(Axis axis, int64_t to) {
    if (axis)
      axis->axis = to;
    return axis;
  }

  /// Numpy broadcasting: operands right-aligned into the output's rank. Every operand that
  /// carries the batch must hold it at one output position (with one inner factor), and every
  /// other operand must broadcast along it (extent 1 there, or not reach it).
  Axis broadcastRule(const Node &node, int64_t outRank) {
    Axis result;
    for (size_t i = 0; i < node.numInputs(); ++i) {
      const Value *in = node.input(i);
      Axis a = moved(axis(in), axis(in) ? axis(in)->axis + outRank - in->rank() : 0);
      if (a && result && *a != *result)
        refuse(node, "combines operands whose batches lie on different axes");
      if (a)
        result = a;
    }
    for (size_t i = 0; i < node.numInputs(); ++i) {
      const Value *in = node.input(i);
      if (axis(in))
        continue;
      int64_t d = result->axis - (outRank - in->rank());
      if (d >= 0 && in->shape()[static_cast<size_t>(d)] != 1)
        refuse(node, fmt::format("broadcasts operand {} (no batch, extent {} on the batch axis) against the batch", i,
                                 dimToString(in->shape()[static_cast<size_t>(d)])));
    }
    return result;
  }

  /// Operand 0 carries the batch (if any) and every other operand must not.
  Axis firstOperandOnly(const Node &node) {
    for (size_t i = 1; i < node.numInputs(); ++i)
      if (axis(node.input(i)))
        refuse(node, fmt::format("takes the batch in operand {}", i));
    return axis(node.input(0));
  }

  /// A reshape keeps rows whole when the output has an axis that can hold the batch with the
  /// same elements before each row's run and the same run length: row-major order then puts
  /// each row's elements in the same runs in both (merging the batch with heads or windows,
  /// or with the sequence, or splitting it back out).
  Axis reshapeRule(const Node &node) {
    BatchAxis a = *axis(node.input(0));
    const Shape &in = node.input(0)->shape();
    const Shape &out = node.output(0)->shape();
    auto at = static_cast<size_t>(a.axis);
    // Elements before a row's first run, and the length of each run.
    int64_t before = dimMul(dimProduct(in, 0, at, "reshape"), a.outer, "reshape");
    int64_t run = dimMul(a.inner, dimProduct(in, at + 1, in.size(), "reshape"), "reshape");
    int64_t outBefore = 1;
    for (size_t b = 0; b < out.size(); ++b) {
      int64_t after = dimProduct(out, b + 1, out.size(), "reshape");
      std::optional<int64_t> outer = dimDivExact(before, outBefore);
      std::optional<int64_t> inner = dimDivExact(run, after);
      if (outer && inner && out[b] == dimMul(dimMul(*outer, axes_.extent, "reshape"), *inner, "reshape"))
        return BatchAxis{static_cast<int64_t>(b), *outer, *inner};
      outBefore = dimMul(outBefore, out[b], "reshape");
    }
    refuse(node, fmt::format("{} -> {} splits or merges the batch axis", shapeToString(in), shapeToString(out)));
  }

  /// Ops that compute along `along` axes of operand 0 (normalisations, softmax, scans):
  /// separable when the batch is not one of them. `keepdims` false removes them from the output.
  Axis alongAxes(const Node &node, const std::vector<int64_t> &along, bool keepdims) {
    Axis a = firstOperandOnly(node);
    int64_t rank = node.input(0)->rank();
    int64_t removedBefore = 0;
    for (int64_t r : along) {
      int64_t n = normalized(r, rank);
      if (n == a->axis)
        refuse(node, "computes along the batch axis");
      if (n < a->axis)
        ++removedBefore;
    }
    return keepdims ? a : moved(a, a->axis - removedBefore);
  }

  Axis matmulRule(const Node &node) {
    const Value *A = node.input(0), *B = node.input(1);
    int64_t ra = A->rank(), rb = B->rank(), ro = node.output(0)->rank();
    if (ra < 2 || rb < 2)
      refuse(node, "of a vector operand");
    Axis a = axis(A), b = axis(B);
    if ((a && a->axis == ra - 1) || (b && b->axis == rb - 2))
      refuse(node, "contracts the batch axis");
    Axis pa = a ? moved(a, a->axis + ro - ra) : a;
    Axis pb = b ? moved(b, b->axis + ro - rb) : b;
    if (pa && pb && *pa != *pb)
      refuse(node, "has its batch in both M and N, or on different axes");
    Axis p = pa ? pa : pb;
    if (p->axis >= ro - 2)
      return p; // M (of A) or N (of B)
    // A broadcast (leading) dim: an operand without the batch must broadcast along it.
    for (const Value *other : {A, B})
      if (!axis(other)) {
        int64_t d = p->axis - (ro - other->rank());
        if (d >= 0 && other->shape()[static_cast<size_t>(d)] != 1)
          refuse(node, "pairs the batch with a dim of an operand without it");
      }
    return p;
  }

  Axis gatherRule(const Node &node) {
    const Value *data = node.input(0), *indices = node.input(1);
    int64_t gatherAxis = normalized(node.attrInt("axis"), data->rank());
    Axis a = axis(data), b = axis(indices);
    if (a && b)
      refuse(node, "has the batch in both data and indices");
    if (b)
      return moved(b, gatherAxis + b->axis);
    if (a->axis == gatherAxis)
      refuse(node, "indexes the batch axis");
    return a->axis < gatherAxis ? a : moved(a, a->axis - 1 + indices->rank());
  }

  /// A broadcast of a value without the batch that turns one dim of extent 1 (or a new one)
  /// into the batch's extent: its rows are identical, so it carries the batch there.
  Axis broadcastMakesRows(const Node &node) {
    const Value *in = node.input(0);
    const Shape &out = node.output(0)->shape();
    int64_t offset = static_cast<int64_t>(out.size()) - in->rank();
    Axis found;
    for (int64_t d = 0; d < static_cast<int64_t>(out.size()); ++d) {
      bool grown = d < offset || in->shape()[static_cast<size_t>(d - offset)] == 1;
      if (grown && out[static_cast<size_t>(d)] == axes_.extent) {
        if (found)
          return Axis(); // more than one candidate: leave it without the batch
        found = BatchAxis{d, 1, 1};
      }
    }
    return found;
  }

  Axis recurrenceRule(const Node &node) {
    // xw [T, B, ...], h0 and c0 [D, B, H]: every batch entry runs its own sequence.
    Axis x = axis(node.input(0));
    if (!x || x->axis != 1)
      refuse(node, "without the batch on axis 1 of its input sequence");
    for (size_t i = 1; i < node.numInputs(); ++i) {
      const Value *operand = node.input(i);
      bool state = i == 3 || (i == 4 && node.op() == OpKind::LstmSequence);
      // A state exported as a constant the same for every batch entry (torch's zeros): its
      // rows are those of any tile, so it carries the batch too (retileBatch cuts it).
      if (state && !axis(operand) && *x == BatchAxis{1, 1, 1} && sameRowsConstant(*operand, 1))
        set(operand, x);
      Axis a = axis(operand);
      if (state ? (a != x) : bool(a))
        refuse(node, fmt::format("with operand {} {}", i, state ? "not batched as its sequence" : "batched"));
    }
    return x;
  }

  /// A constant with this one use whose entries are the same at every index of axis `d`,
  /// which has the batch's extent.
  bool sameRowsConstant(const Value &value, size_t d) const {
    const Node *source = value.producer();
    if (!source || source->op() != OpKind::Constant || value.uses().size() != 1 ||
        static_cast<size_t>(value.rank()) <= d || value.shape()[d] != axes_.extent || !isStaticShape(value.shape()))
      return false;
    const Tensor &tensor = source->attrTensor("value");
    RowBlocks blocks = rowBlocks(tensor, d);
    const auto *bytes = static_cast<const unsigned char *>(tensor.data());
    for (int64_t b = 0; b < blocks.before; ++b)
      for (int64_t r = 1; r < blocks.rows; ++r)
        if (std::memcmp(bytes + (b * blocks.rows + r) * blocks.rowBytes, bytes + b * blocks.rows * blocks.rowBytes,
                        static_cast<size_t>(blocks.rowBytes)) != 0)
          return false;
    return true;
  }

  /// The output batch axes of `node` given its operands' (or throws NotSeparable).
  std::vector<Axis> rule(const Node &node) {
    size_t outputs = node.numOutputs();
    auto same = [&](Axis a) { return std::vector<Axis>(outputs, a); };
    bool anyBatch = false;
    for (const Value *in : node.inputs())
      anyBatch = anyBatch || axis(in);
    if (!anyBatch)
      // Weights, constants and what is computed from them alone; a broadcast of such a value
      // to the batch's extent makes identical rows of it (a class token for each image).
      return same(node.op() == OpKind::Broadcast ? broadcastMakesRows(node) : Axis());
    int64_t outRank = node.output(0)->rank();
    std::string_view family = opTraits(node.op()).family;
    switch (node.op()) {
    case OpKind::Squeeze:
      if (node.attrInts("axes").empty())
        refuse(node, "drops every dim of extent 1, the batch's too at a tile of one row");
      return same(reshapeRule(node));
    case OpKind::Reshape:
    case OpKind::Unsqueeze:
    case OpKind::Flatten:
      return same(reshapeRule(node));
    case OpKind::Permute: {
      const std::vector<int64_t> &perm = node.attrInts("perm");
      Axis a = axis(node.input(0));
      for (size_t j = 0; j < perm.size(); ++j)
        if (normalized(perm[j], outRank) == a->axis)
          return same(moved(a, static_cast<int64_t>(j)));
      refuse(node, "drops the batch axis");
    }
    case OpKind::Broadcast:
    case OpKind::Where:
    case OpKind::Clip:
    case OpKind::Cast:
    case OpKind::Mod:
      return same(broadcastRule(node, outRank));
    case OpKind::Tile: {
      Axis a = axis(node.input(0));
      if (node.attrInts("repeats").at(static_cast<size_t>(a->axis)) != 1)
        refuse(node, "repeats the batch axis");
      return same(a);
    }
    case OpKind::Slice: {
      Axis a = axis(node.input(0));
      int64_t rank = node.input(0)->rank();
      std::vector<int64_t> sliced = node.attrInts("axes");
      if (sliced.empty())
        for (size_t i = 0; i < node.attrInts("starts").size(); ++i)
          sliced.push_back(static_cast<int64_t>(i));
      for (int64_t d : sliced)
        if (normalized(d, rank) == a->axis)
          refuse(node, "slices the batch axis");
      return same(a);
    }
    case OpKind::Pad: {
      const std::vector<int64_t> &pads = node.attrInts("pads");
      Axis a = axis(node.input(0));
      int64_t rank = node.input(0)->rank();
      if (pads.at(static_cast<size_t>(a->axis)) != 0 || pads.at(static_cast<size_t>(a->axis + rank)) != 0)
        refuse(node, "pads the batch axis");
      return same(a);
    }
    case OpKind::Concat: {
      Axis a = axis(node.input(0));
      for (const Value *in : node.inputs())
        if (axis(in) != a)
          refuse(node, "joins operands with and without the batch (or with it on different axes)");
      if (normalized(node.attrInt("axis"), outRank) == a->axis)
        refuse(node, "joins along the batch axis");
      return same(a);
    }
    case OpKind::Split: {
      Axis a = axis(node.input(0));
      if (normalized(node.attrInt("axis"), outRank) == a->axis)
        refuse(node, "splits the batch axis");
      return same(a);
    }
    case OpKind::Gather:
      return same(gatherRule(node));
    case OpKind::MatMul:
      return same(matmulRule(node));
    case OpKind::Linear: {
      Axis a = firstOperandOnly(node);
      if (a->axis == node.input(0)->rank() - 1)
        refuse(node, "contracts the batch axis");
      return same(a);
    }
    case OpKind::Conv:
    case OpKind::ConvTranspose:
    case OpKind::MaxPool:
    case OpKind::AvgPool:
    case OpKind::InstanceNorm:
    case OpKind::Lrn:
    case OpKind::BatchNorm: {
      // NC... layouts: each entry of axis 0 on its own; channels and space mix.
      Axis a = firstOperandOnly(node);
      if (a->axis != 0)
        refuse(node, "with the batch on an axis other than 0");
      return same(a);
    }
    case OpKind::RnnSequence:
    case OpKind::GruSequence:
    case OpKind::LstmSequence:
      return same(recurrenceRule(node));
    case OpKind::Resize: {
      Axis a = firstOperandOnly(node);
      auto at = static_cast<size_t>(a->axis);
      const std::vector<int64_t> &sizes = node.attrInts("sizes");
      const std::vector<double> &scales = attrFloats(node.attrs(), "scales");
      if ((!sizes.empty() && sizes.at(at) != node.input(0)->shape()[at]) || (!scales.empty() && scales.at(at) != 1.0))
        refuse(node, "resizes the batch axis");
      return same(a);
    }
    case OpKind::ReduceSum:
    case OpKind::ReduceMax:
    case OpKind::ReduceMin:
    case OpKind::ReduceProd:
    case OpKind::ReduceMean:
    case OpKind::ReduceL1:
    case OpKind::ReduceL2:
    case OpKind::ReduceLogSum:
    case OpKind::ReduceLogSumExp:
    case OpKind::ReduceSumSquare: {
      std::vector<int64_t> reduced = node.attrInts("axes");
      if (reduced.empty())
        refuse(node, "reduces every axis");
      return same(alongAxes(node, reduced, node.attrInt("keepdims") != 0));
    }
    case OpKind::ArgMax:
    case OpKind::ArgMin:
      return same(alongAxes(node, {node.attrInt("axis")}, node.attrInt("keepdims") != 0));
    case OpKind::Softmax:
    case OpKind::LogSoftmax:
    case OpKind::Hardmax:
    case OpKind::CumSum:
    case OpKind::TopK:
      return same(alongAxes(node, {node.attrInt("axis")}, true));
    case OpKind::LayerNorm: {
      int64_t rank = node.input(0)->rank();
      std::vector<int64_t> normalisedAxes;
      for (int64_t d = normalized(node.attrInt("axis"), rank); d < rank; ++d)
        normalisedAxes.push_back(d);
      return same(alongAxes(node, normalisedAxes, true));
    }
    case OpKind::Trilu: {
      Axis a = axis(node.input(0));
      if (a->axis >= outRank - 2)
        refuse(node, "masks the batch axis");
      return same(a);
    }
    case OpKind::QMatMul:
    case OpKind::QConv:
      refuse(node, "has no batch rule yet");
    default:
      break;
    }
    // Whole families that compute element by element with numpy broadcasting.
    if (family == "Unary" || family == "Binary" || family == "Activation" || family == "Quantize" ||
        node.op() == OpKind::Gelu || node.op() == OpKind::Silu)
      return same(broadcastRule(node, outRank));
    refuse(node, "has no batch rule");
  }

  void walk(const Graph &graph) {
    for (const Node *node : graph.nodes()) {
      if (node->body())
        refuse(*node, "is a kernel: tile the graph before outlining kernels");
      std::vector<Axis> out = rule(*node);
      for (size_t i = 0; i < out.size(); ++i)
        set(node->output(i), out[i]);
    }
  }

private:
  BatchAxes &axes_;
};

} // namespace

BatchAxes findBatchAxes(const Graph &graph) {
  BatchAxes axes;
  if (graph.inputs().empty() || graph.inputs()[0]->rank() == 0) {
    axes.reason = "the graph has no input with a batch axis";
    return axes;
  }
  axes.extent = graph.inputs()[0]->shape()[0];
  for (const Value *input : graph.inputs())
    if (input->rank() > 0 && input->shape()[0] == axes.extent)
      axes.axisOf[input] = BatchAxis{0, 1, 1};
  Walk walk(axes);
  try {
    walk.walk(graph);
  } catch (const NotSeparable &why) {
    axes.reason = why.reason;
    axes.axisOf.clear();
    return axes;
  }
  for (size_t i = 0; i < graph.outputs().size(); ++i)
    if (walk.axis(graph.outputs()[i]) != BatchAxis{0, 1, 1}) {
      axes.reason = fmt::format("output '{}' does not hold the batch on axis 0", graph.outputName(i));
      axes.axisOf.clear();
      return axes;
    }
  axes.separable = true;
  return axes;
}

bool servesEveryBatch(const Graph &graph) {
  std::vector<std::string> symbols = graphSymbols(graph);
  if (symbols.size() != 1)
    return false;
  BatchAxes axes = findBatchAxes(graph);
  if (!axes.separable || dimSymbolName(axes.extent) != symbols[0])
    return false;
  // The symbol only as the batch: a tile's graph is then static.
  for (const Value *input : graph.inputs())
    for (size_t d = 0; d < input->shape().size(); ++d)
      if (isSymbolicDim(input->shape()[d]) && (d != 0 || !axes.axisOf.count(input)))
        return false;
  return true;
}

namespace {

/// `shape` at a tile of `tile` rows where it holds the batch as `axis` says.
Shape tiledShape(Shape shape, const std::optional<BatchAxis> &axis, int64_t tile) {
  if (axis)
    shape[static_cast<size_t>(axis->axis)] = axis->extentAt(tile);
  return shape;
}

} // namespace

std::unique_ptr<Graph> retileBatch(const Graph &graph, int64_t tile) {
  if (tile <= 0)
    fail("graph @{}: a batch tile of {} rows", graph.name(), tile);
  std::unique_ptr<Graph> copy = graph.clone();
  BatchAxes axes = findBatchAxes(*copy);
  if (!axes.separable)
    fail("graph @{} is not batch-separable: {}", graph.name(), axes.reason);
  auto axisOf = [&](const Value *value) {
    auto found = axes.axisOf.find(value);
    return found == axes.axisOf.end() ? std::optional<BatchAxis>() : std::optional<BatchAxis>(found->second);
  };
  for (Value *input : copy->inputs())
    input->setType({input->dtype(), tiledShape(input->shape(), axisOf(input), tile)});
  reinferInPlace(
      *copy,
      [&](const Node &node, AttrMap &attrs) {
        // Attributes that spell the output's dims name the batch extent on its batch axis.
        std::optional<BatchAxis> outAxis = axisOf(node.output(0));
        if (!outAxis)
          return;
        for (auto &[name, value] : attrs)
          if (attrHoldsDims(node.op(), name)) {
            auto &dims = std::get<std::vector<int64_t>>(value);
            auto at = static_cast<size_t>(outAxis->axis);
            if (at < dims.size() && dims[at] == outAxis->extentAt(axes.extent))
              dims[at] = outAxis->extentAt(tile);
          }
        if (node.op() == OpKind::Constant) // a constant of identical rows (sameRowsConstant)
          attrs["value"] = firstRows(node.attrTensor("value"), static_cast<size_t>(outAxis->axis), tile);
      },
      [&](const Value &output) { return tiledShape(output.shape(), axisOf(&output), tile); },
      fmt::format("at a batch tile of {}", tile));
  verify(*copy);
  return copy;
}

} // namespace kiln::ir
