// Scatters as Direct stages (see EmitDirect.h): scatter_elements, scatter_add (scatter_elements
// with reduction "add") and scatter_nd. The output starts as a copy of data; updates are then
// folded in one by one in row-major order over the indices, so repeated indices combine in the
// reference evaluator's order (with "none" the last write wins). scatter_elements runs one
// parallel row per value of the dims before its axis (no two rows write the same element);
// scatter_nd runs on one thread.
//
// The reference combines floats in double and rounds once at the end. Only sums and products
// can tell the difference from combining in f32, so f32 "add" and "mul" run on a double copy of
// the output; "none", "max" and "min" (and every other dtype) combine in the output itself:
// integer sums and products wrap, which narrowing the reference's int64 result also gives.
#include "codegen/EmitDirect.h"

#include "codegen/ScalarOps.h"
#include "core/Error.h"
#include "core/ShapeMath.h"
#include "ir/ops/ScatterReduction.h"

namespace kiln::codegen::direct {

using ir::OpKind;

namespace {

using Reduction = ir::ops::ScatterReduction;

/// The scatter's accumulator over one slab of the output (a row of the row function, or the
/// whole output): the output buffer itself, or a double copy of the slab (f32 sums and
/// products). `load` copies data's slab in, `finish` writes a double slab back.
class Accumulator {
public:
  Accumulator(DirectOp &op, Reduction reduction, int64_t slab) : e_(op.e), reduction_(reduction), slab_(slab) {
    dtype_ = op.node.input(0)->dtype();
    scratch_ = dtype_ == DType::F32 && (reduction == Reduction::Add || reduction == Reduction::Mul);
    accType_ = scratch_ ? "double" : cType(dtype_);
    in_ = e_.pointer(op.inputs.at(0));
    out_ = e_.pointer(op.outputs.at(0));
    updates_ = e_.pointer(op.inputs.at(2));
  }

  /// Before the row loop: the double slab, allocated once per call.
  void allocate() const {
    if (!scratch_)
      return;
    e_.line(fmt::format("double *acc = (double *)malloc(sizeof(double) * {});", slab_));
    e_.line("if (!acc) abort();");
  }

  /// Copies data's slab starting at element `base` into the accumulator.
  void load(const std::string &pad, const std::string &base) const {
    if (scratch_)
      e_.line(fmt::format("{}for (int64_t s = 0; s < {}; ++s) acc[s] = (double){}[{} + s];", pad, slab_, in_, base));
    else
      e_.line(fmt::format("{0}for (int64_t s = 0; s < {1}; ++s) {2}[{3} + s] = {4}[{3} + s];", pad, slab_, out_, base,
                          in_));
  }

  /// The statement folding updates[source] into element `target` of the slab at `base`. The
  /// target goes through an empty asm, so that no compiler vectorizes the loops around it:
  /// GCC 12.2 at -O3 -march=native miscompiled an i64 scatter_add's loops over its index rows,
  /// where repeated indices fold several updates into one element: output rows 1-3 of
  /// tests/fuzz/compile/regressions/scatter-add-i64-duplicates.kir came out wrong, and right
  /// with -fno-tree-loop-vectorize, at -O2 or without -march=native (the loop nest alone, in a
  /// standalone program). Repeated indices are a scatter's normal case.
  std::string apply(const std::string &base, const std::string &target, const std::string &source) const {
    std::string slot = scratch_ ? "acc[slot]" : fmt::format("{}[{} + slot]", out_, base);
    std::string update = fmt::format("({}){}[{}]", accType_, updates_, source);
    return fmt::format("{{ int64_t slot = {}; __asm__(\"\" : \"+r\"(slot)); {} = {}; }}", target, slot,
                       combine(slot, update));
  }

  /// Writes a double slab back to the output at `base`.
  void store(const std::string &pad, const std::string &base) const {
    if (scratch_)
      e_.line(fmt::format("{}for (int64_t s = 0; s < {}; ++s) {}[{} + s] = (float)acc[s];", pad, slab_, out_, base));
  }

  /// After the row loop.
  void release() const {
    if (scratch_)
      e_.line("free(acc);");
  }

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
  int64_t slab_ = 0;
  DType dtype_ = DType::F32;
  bool scratch_ = false;
  std::string accType_, in_, out_, updates_;
};

} // namespace

// out[i... with i[axis] replaced by indices[i...]] (reduce)= updates[i...], i over indices' shape.
// An update's target differs from its own coordinates only at `axis`, so each row (a value of
// data's dims before the axis) owns its slab of the output: rows run in parallel, and within a
// row the updates are folded in the reference's row-major order. A row past indices' extent in
// those dims is only copied.
RowSplit emitScatterElements(DirectOp &op, std::string &) {
  KernelEmitter &e = op.e;
  const ir::Value *data = op.node.input(0), *indices = op.node.input(1);
  const Shape &dataShape = data->shape(), &indexShape = indices->shape();
  int64_t rank = data->rank();
  int64_t axis = op.node.attrInt("axis") < 0 ? op.node.attrInt("axis") + rank : op.node.attrInt("axis");
  auto uaxis = static_cast<size_t>(axis), urank = static_cast<size_t>(rank);
  int64_t rows = elementCount(dataShape, 0, uaxis, "data"), slab = elementCount(dataShape, uaxis, urank, "data");
  int64_t indexSlab = elementCount(indexShape, uaxis, urank, "indices");
  std::vector<int64_t> strides = contiguousStrides(dataShape);
  std::string index = e.pointer(op.inputs.at(1));
  Accumulator acc(op, ir::ops::scatterReductionOf(op.node), slab);
  acc.allocate();
  e.line("for (int64_t r = begin; r < end; ++r) {");
  e.line(fmt::format("  const int64_t base = r * {};", slab));
  acc.load("  ", "base");
  if (numElements(indexShape) > 0) {
    // The row's coordinates before the axis, and its row of indices when they reach it.
    e.line("  int64_t rest = r, row = 0, scale = 1;");
    e.line("  bool covered = true;");
    for (int64_t d = axis; d-- > 0;) {
      auto ud = static_cast<size_t>(d);
      e.line(fmt::format("  {{ const int64_t c = rest % {0}; rest /= {0}; covered = covered && c < {1}; row += c * "
                         "scale; scale *= {1}; }}",
                         dataShape[ud], indexShape[ud]));
    }
    e.line("  (void)rest;");
    e.line("  (void)scale;");
    e.line("  if (covered) {");
    e.line(fmt::format("    int64_t n = row * {};", indexSlab));
    std::string target;
    for (int64_t d = axis; d < rank; ++d) {
      auto ud = static_cast<size_t>(d);
      e.line(fmt::format("{0}for (int64_t k{1} = 0; k{1} < {2}; ++k{1}) {{", std::string(2 * (ud - uaxis) + 4, ' '),
                         d, indexShape[ud]));
      std::string coordinate = d == axis ? fmt::format("kiln_gather_index((int64_t){}[n], {})", index, dataShape[ud])
                                         : fmt::format("k{}", d);
      target += fmt::format("{}{} * {}", target.empty() ? "" : " + ", coordinate, strides[ud]);
    }
    std::string pad(2 * (urank - uaxis) + 4, ' ');
    e.line(fmt::format("{}const int64_t t = {};", pad, target));
    e.line(pad + acc.apply("base", "t", "n"));
    e.line(pad + "++n;");
    for (int64_t d = rank; d-- > axis;)
      e.line(std::string(2 * static_cast<size_t>(d - axis) + 4, ' ') + "}");
    e.line("  }");
  }
  acc.store("  ", "base");
  e.line("}");
  acc.release();
  return {rows, slab, ""};
}

// Tuple t (the last dim of indices) addresses the slice data[tuple...], of the dims after the
// tuple's; out[slice] (reduce)= updates[t, ...], tuple by tuple.
RowSplit emitScatterNd(DirectOp &op, std::string &) {
  KernelEmitter &e = op.e;
  const ir::Value *data = op.node.input(0), *indices = op.node.input(1);
  const Shape &dataShape = data->shape(), &indexShape = indices->shape();
  auto length = static_cast<size_t>(indexShape.back());
  int64_t slice = elementCount(dataShape, length, dataShape.size(), "data");
  int64_t tuples = elementCount(indexShape, 0, indexShape.size() - 1, "indices");
  std::string index = e.pointer(op.inputs.at(1));
  Accumulator acc(op, ir::ops::scatterReductionOf(op.node), numElements(dataShape));
  acc.allocate();
  acc.load("", "0");
  if (tuples > 0 && slice > 0) {
    e.line(fmt::format("for (int64_t t = 0; t < {}; ++t) {{", tuples));
    e.line("  int64_t base = 0;");
    for (size_t j = 0; j < length; ++j)
      e.line(fmt::format("  base = base * {0} + kiln_gather_index((int64_t){1}[t * {2} + {3}], {0});", dataShape[j],
                         index, length, j));
    e.line(fmt::format("  for (int64_t s = 0; s < {}; ++s) {{", slice));
    e.line(fmt::format("    const int64_t at = base * {} + s;", slice));
    e.line("    " + acc.apply("0", "at", fmt::format("t * {} + s", slice)));
    e.line("  }");
    e.line("}");
  }
  acc.store("", "0");
  acc.release();
  return {1, numElements(dataShape), ""};
}

} // namespace kiln::codegen::direct
