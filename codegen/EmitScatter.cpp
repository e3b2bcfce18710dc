// Scatters as Direct stages (see EmitDirect.h): scatter_elements, scatter_add (scatter_elements
// with reduction "add") and scatter_nd. The output starts as a copy of data; updates are then
// folded in one by one in row-major order over the indices, on one thread, so repeated indices
// combine in the reference evaluator's order (with "none" the last write wins).
//
// The reference combines floats in double and rounds once at the end. Only sums and products
// can tell the difference from combining in f32, so f32 "add" and "mul" run on a double copy of
// the output; "none", "max" and "min" (and every other dtype) combine in the output itself:
// integer sums and products wrap, which narrowing the reference's int64 result also gives.
#include "codegen/EmitDirect.h"

#include "codegen/ScalarOps.h"
#include "ir/Error.h"

namespace kiln::codegen::direct {

using ir::OpKind;

namespace {

enum class Reduction { None, Add, Mul, Max, Min };

Reduction reductionOf(const ir::Node &node) {
  if (node.op() == OpKind::ScatterAdd)
    return Reduction::Add;
  const std::string &name = node.attrString("reduction");
  if (name == "add")
    return Reduction::Add;
  if (name == "mul")
    return Reduction::Mul;
  if (name == "max")
    return Reduction::Max;
  if (name == "min")
    return Reduction::Min;
  return Reduction::None;
}

/// The scatter's accumulator: the output buffer itself, or a double copy of it (f32 sums and
/// products).
class Accumulator {
public:
  Accumulator(DirectOp &op, Reduction reduction) : e_(op.e), reduction_(reduction) {
    const ir::Value *data = op.node.input(0);
    dtype_ = data->dtype();
    count_ = data->type().numElements();
    scratch_ = dtype_ == DType::F32 && (reduction == Reduction::Add || reduction == Reduction::Mul);
    accType_ = scratch_ ? "double" : cType(dtype_);
    std::string in = e_.pointer(op.inputs.at(0));
    out_ = e_.pointer(op.outputs.at(0));
    updates_ = e_.pointer(op.inputs.at(2));
    name_ = scratch_ ? "acc" : out_;
    if (scratch_) {
      e_.line(fmt::format("double *acc = (double *)malloc(sizeof(double) * {});", count_));
      e_.line("if (!acc) abort();");
      e_.line(fmt::format("for (int64_t n = 0; n < {}; ++n) acc[n] = (double){}[n];", count_, in));
    } else {
      e_.line(fmt::format("for (int64_t n = 0; n < {}; ++n) {}[n] = {}[n];", count_, out_, in));
    }
  }

  /// The statement folding updates[source] into element `target` of the output.
  std::string apply(const std::string &target, const std::string &source) const {
    std::string slot = fmt::format("{}[{}]", name_, target);
    std::string update = fmt::format("({}){}[{}]", accType_, updates_, source);
    return fmt::format("{} = {};", slot, combine(slot, update));
  }

  void finish() {
    if (!scratch_)
      return;
    e_.line(fmt::format("for (int64_t n = 0; n < {}; ++n) {}[n] = (float)acc[n];", count_, out_));
    e_.line("free(acc);");
  }

  int64_t count() const { return count_; }

private:
  std::string combine(const std::string &old, const std::string &update) const {
    bool floating = isFloat(dtype_);
    switch (reduction_) {
    case Reduction::None:
      return update;
    case Reduction::Add:
      return floating ? fmt::format("{} + {}", old, update)
                      : fmt::format("({})kiln_wadd((int64_t){}, (int64_t){})", accType_, old, update);
    case Reduction::Mul:
      return floating ? fmt::format("{} * {}", old, update)
                      : fmt::format("({})kiln_wmul((int64_t){}, (int64_t){})", accType_, old, update);
    case Reduction::Max:
    case Reduction::Min: {
      const char *pick = reduction_ == Reduction::Max ? "std::max" : "std::min";
      if (!floating)
        return fmt::format("{}<{}>({}, {})", pick, accType_, old, update);
      // NaN on either side gives NaN, like the reference (and numpy's maximum/minimum).
      return fmt::format(
          "(({0}) != ({0}) || ({1}) != ({1})) ? std::numeric_limits<{2}>::quiet_NaN() : {3}<{2}>({0}, {1})", old,
          update, accType_, pick);
    }
    }
    return update;
  }

  KernelEmitter &e_;
  Reduction reduction_;
  DType dtype_ = DType::F32;
  int64_t count_ = 0;
  bool scratch_ = false;
  std::string accType_, out_, updates_, name_;
};

} // namespace

// out[i... with i[axis] replaced by indices[i...]] (reduce)= updates[i...], i over indices' shape.
RowSplit emitScatterElements(DirectOp &op, std::string &) {
  KernelEmitter &e = op.e;
  const ir::Value *data = op.node.input(0), *indices = op.node.input(1);
  const Shape &dataShape = data->shape(), &indexShape = indices->shape();
  int64_t rank = data->rank();
  int64_t axis = op.node.attrInt("axis") < 0 ? op.node.attrInt("axis") + rank : op.node.attrInt("axis");
  std::vector<int64_t> strides = contiguousStrides(dataShape);
  std::string index = e.pointer(op.inputs.at(1));
  Accumulator acc(op, reductionOf(op.node));
  if (numElements(indexShape) > 0) {
    e.line("int64_t n = 0;");
    std::string target;
    for (int64_t d = 0; d < rank; ++d) {
      auto ud = static_cast<size_t>(d);
      e.line(
          fmt::format("{0}for (int64_t k{1} = 0; k{1} < {2}; ++k{1}) {{", std::string(2 * ud, ' '), d, indexShape[ud]));
      std::string coordinate = d == axis ? fmt::format("kiln_gather_index((int64_t){}[n], {})", index, dataShape[ud])
                                         : fmt::format("k{}", d);
      target += fmt::format("{}{} * {}", target.empty() ? "" : " + ", coordinate, strides[ud]);
    }
    std::string pad(2 * static_cast<size_t>(rank), ' ');
    e.line(fmt::format("{}const int64_t t = {};", pad, target));
    e.line(pad + acc.apply("t", "n"));
    e.line(pad + "++n;");
    for (int64_t d = rank; d-- > 0;)
      e.line(std::string(2 * static_cast<size_t>(d), ' ') + "}");
  }
  acc.finish();
  return {1, acc.count(), ""};
}

// Tuple t (the last dim of indices) addresses the slice data[tuple...], of the dims after the
// tuple's; out[slice] (reduce)= updates[t, ...], tuple by tuple.
RowSplit emitScatterNd(DirectOp &op, std::string &) {
  KernelEmitter &e = op.e;
  const ir::Value *data = op.node.input(0), *indices = op.node.input(1);
  const Shape &dataShape = data->shape(), &indexShape = indices->shape();
  auto length = static_cast<size_t>(indexShape.back());
  int64_t slice = 1;
  for (size_t d = length; d < dataShape.size(); ++d)
    slice *= dataShape[d];
  int64_t tuples = 1;
  for (size_t d = 0; d + 1 < indexShape.size(); ++d)
    tuples *= indexShape[d];
  std::string index = e.pointer(op.inputs.at(1));
  Accumulator acc(op, reductionOf(op.node));
  if (tuples > 0 && slice > 0) {
    e.line(fmt::format("for (int64_t t = 0; t < {}; ++t) {{", tuples));
    e.line("  int64_t base = 0;");
    for (size_t j = 0; j < length; ++j)
      e.line(fmt::format("  base = base * {0} + kiln_gather_index((int64_t){1}[t * {2} + {3}], {0});", dataShape[j],
                         index, length, j));
    e.line(fmt::format("  for (int64_t s = 0; s < {}; ++s) {{", slice));
    e.line(fmt::format("    const int64_t at = base * {} + s;", slice));
    e.line("    " + acc.apply("at", fmt::format("t * {} + s", slice)));
    e.line("  }");
    e.line("}");
  }
  acc.finish();
  return {1, acc.count(), ""};
}

} // namespace kiln::codegen::direct
