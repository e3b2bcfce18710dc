// Direct stages (see EmitDirect.h): the dispatch, and the two scans along an axis, cumsum and
// topk. Both view their input as [outer, extent, inner] around the axis; each (outer, inner)
// pair is one line along the axis and one parallel row.
#include "codegen/EmitDirect.h"

#include "codegen/ScalarOps.h"
#include "core/Error.h"
#include "core/ShapeMath.h"

namespace kiln::codegen {

using ir::OpKind;

namespace direct {

std::string intList(const std::vector<int64_t> &values) {
  if (values.empty())
    return "{0}"; // a static array needs at least one element
  return fmt::format("{{{}}}", fmt::join(values, ", "));
}

namespace {

/// `shape` viewed as [outer, extent, inner] around `axis`.
struct AxisView {
  int64_t outer = 1, extent = 1, inner = 1;
};

AxisView axisView(const Shape &shape, int64_t axis) {
  if (axis < 0)
    axis += static_cast<int64_t>(shape.size());
  AxisView view;
  for (int64_t d = 0; d < static_cast<int64_t>(shape.size()); ++d) {
    int64_t size = shape[static_cast<size_t>(d)];
    if (d < axis)
      view.outer = checkedMul(view.outer, size, "outer extent");
    else if (d > axis)
      view.inner = checkedMul(view.inner, size, "inner extent");
    else
      view.extent = size;
  }
  return view;
}

} // namespace

// Floats run in double and round once per output, integers in uint64 (wrapping like
// two's-complement), narrowed on the store: exactly the reference's scanLine.
RowSplit emitCumSum(DirectOp &op, std::string &) {
  KernelEmitter &e = op.e;
  const ir::Value *x = op.node.input(0);
  AxisView view = axisView(x->shape(), op.node.attrInt("axis"));
  bool exclusive = op.node.attrInt("exclusive") == 1, reverse = op.node.attrInt("reverse") == 1;
  bool floating = isFloat(x->dtype());
  std::string type = cType(x->dtype());
  std::string in = e.pointer(op.inputs.at(0)), out = e.pointer(op.outputs.at(0));
  std::string position = reverse ? fmt::format("{} - s", view.extent - 1) : "s";
  std::string write = floating ? fmt::format("{}[f] = ({})running;", out, type)
                               : fmt::format("{}[f] = ({})(int64_t)running;", out, type);
  e.line("for (int64_t r = begin; r < end; ++r) {");
  e.line(fmt::format("  const int64_t o = r / {0}, i = r % {0};", view.inner));
  e.line(floating ? "  double running = 0;" : "  uint64_t running = 0;");
  e.line(fmt::format("  for (int64_t s = 0; s < {}; ++s) {{", view.extent));
  e.line(fmt::format("    const int64_t f = (o * {} + {}) * {} + i;", view.extent, position, view.inner));
  e.line(floating ? fmt::format("    const double v = (double){}[f];", in)
                  : fmt::format("    const uint64_t v = (uint64_t)(int64_t){}[f];", in));
  if (exclusive)
    e.line("    " + write);
  e.line("    running += v;");
  if (!exclusive)
    e.line("    " + write);
  e.line("  }");
  e.line("}");
  return {view.outer * view.inner, view.extent, ""};
}

// Each line is copied into a scratch array (double for floats: f32 and f64 order the same way
// there, integers as int64), its positions partially sorted by the reference's strict total
// order (by value, largest or smallest first, NaN above every number, ties by position), so any
// correct sort gives the reference's answer; values are written back from the scratch copy.
RowSplit emitTopK(DirectOp &op, std::string &) {
  KernelEmitter &e = op.e;
  const ir::Value *x = op.node.input(0);
  AxisView view = axisView(x->shape(), op.node.attrInt("axis"));
  int64_t k = op.node.attrInt("k");
  bool largest = op.node.attrInt("largest") == 1;
  bool floating = isFloat(x->dtype());
  std::string acc = floating ? "double" : "int64_t", type = cType(x->dtype());
  std::string in = e.pointer(op.inputs.at(0));
  std::string values = e.pointer(op.outputs.at(0)), indices = e.pointer(op.outputs.at(1));
  e.line(fmt::format("{0} *line = ({0} *)malloc(sizeof({0}) * {1});", acc, view.extent));
  e.line(fmt::format("int64_t *order = (int64_t *)malloc(sizeof(int64_t) * {});", view.extent));
  e.line("if (!line || !order) abort();");
  e.line("auto before = [line](int64_t a, int64_t b) {");
  e.line(fmt::format("  const {} va = line[a], vb = line[b];", acc));
  if (floating) {
    e.line("  const bool na = va != va, nb = vb != vb;");
    e.line(fmt::format("  if (na || nb) return (na && nb) ? a < b : {};", largest ? "na" : "nb"));
  }
  e.line(fmt::format("  if (va != vb) return va {} vb;", largest ? ">" : "<"));
  e.line("  return a < b;");
  e.line("};");
  e.line("for (int64_t r = begin; r < end; ++r) {");
  e.line(fmt::format("  const int64_t o = r / {0}, i = r % {0};", view.inner));
  e.line(fmt::format("  for (int64_t j = 0; j < {}; ++j) {{", view.extent));
  e.line(fmt::format("    line[j] = ({}){}[(o * {} + j) * {} + i];", acc, in, view.extent, view.inner));
  e.line("    order[j] = j;");
  e.line("  }");
  e.line(fmt::format("  std::partial_sort(order, order + {}, order + {}, before);", k, view.extent));
  e.line(fmt::format("  for (int64_t q = 0; q < {}; ++q) {{", k));
  e.line(fmt::format("    const int64_t to = (o * {} + q) * {} + i;", k, view.inner));
  e.line(fmt::format("    {}[to] = ({})line[order[q]];", values, type));
  e.line(fmt::format("    {}[to] = order[q];", indices));
  e.line("  }");
  e.line("}");
  e.line("free(line);");
  e.line("free(order);");
  return {view.outer * view.inner, view.extent, ""};
}

} // namespace direct

direct::Emitter direct::emitterOf(OpKind op) {
  switch (op) {
  case OpKind::ScatterElements:
  case OpKind::ScatterAdd: return emitScatterElements;
  case OpKind::ScatterNd: return emitScatterNd;
  case OpKind::CumSum: return emitCumSum;
  case OpKind::TopK: return emitTopK;
  case OpKind::Resize: return emitResize;
  case OpKind::MaxPoolGrad: return emitMaxPoolGrad;
  default: return nullptr;
  }
}

void emitDirectStage(KernelEmitter &e, int stageIndex, KernelText &out) {
  const Stage &stage = e.plan().stages.at(static_cast<size_t>(stageIndex));
  const ir::Node &node = *stage.anchor;
  bool anything = false;
  for (const ir::Value *output : node.outputs())
    anything = anything || output->type().numElements() > 0;
  if (!anything) // nothing to write (and nothing valid to read: an empty axis)
    return;
  e.beginFunction(stageIndex);
  direct::DirectOp op{e, node, {}, {}, fmt::format("{}_s{}", e.prefix(), stageIndex)};
  for (const ir::Value *input : node.inputs())
    op.inputs.push_back(e.plan().bufferOf.at(input));
  for (const ir::Value *output : node.outputs()) {
    int buffer = -1;
    for (const Store &store : stage.stores)
      if (store.value == output)
        buffer = store.buffer;
    if (buffer < 0)
      fail("codegen: internal error: an output of {} has no buffer", node.opName());
    op.outputs.push_back(buffer);
  }
  std::string tables;
  direct::Emitter emit = direct::emitterOf(node.op());
  if (!emit)
    fail("codegen: internal error: {} is not a direct op", node.opName());
  direct::RowSplit split = emit(op, tables);
  std::string body = e.endFunction();
  out.functions += tables;
  out.functions +=
      fmt::format("static void {}{}(void *vctx, int64_t begin, int64_t end) {{\n{}  (void)begin;\n  (void)end;\n}}\n\n",
                  split.attributes, op.fn, body);
  out.body.push_back(runRows(op.fn, split.rows, split.rowElements));
}

} // namespace kiln::codegen
