// Stage planning: which strategy lowers a unit, and the stages, buffers and stores it needs
// (codegen/LoopNest.h describes the strategies).
//
// Stages:
//  1. Buffers: operands (inlined small constants become constants), results, body constants.
//  2. The strategy from the body's ops: contraction (one matmul/conv), rows (reductions),
//     elementwise (neither), or per-op when asked or when the body mixes kinds.
//  3. Contraction operands that are not strided views the library accepts are materialised
//     into temporaries by Loop stages first.
#include <algorithm>

#include "codegen/EmitDirect.h"
#include "codegen/GenericContraction.h"
#include "codegen/LoopNest.h"
#include "codegen/OpLowering.h"
#include "core/Error.h"
#include "core/ShapeMath.h"

namespace kiln::codegen {

using ir::OpKind;

namespace {

// What each op is to the planner: codegen/OpLowering.h's one table.
bool isReduction(OpKind op) { return loweringOf(op) == Lowering::Reduction; }
bool isContraction(OpKind op) { return loweringOf(op) == Lowering::Contraction; }
bool isPool(OpKind op) { return loweringOf(op) == Lowering::Pool; }
bool isDirectOp(OpKind op) { return loweringOf(op) == Lowering::Direct; }
bool isRecurrence(OpKind op) { return loweringOf(op) == Lowering::Recurrence; }

// f16 and bf16 are stored as 16-bit patterns and computed in float by the inline and row
// emitters (codegen/ScalarOps.h); library and direct stages take no 16-bit floats.
bool supportedDType(DType dtype, OpKind op) {
  bool half = dtype == DType::F16 || dtype == DType::BF16;
  return !half || op == OpKind::Constant || isInlinable(op) || isReduction(op);
}

// Reduced axes of a reduction node, as flags over its input dims.
std::vector<bool> reducedAxes(const ir::Node &node) {
  size_t rank = node.input(0)->shape().size();
  std::vector<bool> reduced(rank, false);
  if (node.op() == OpKind::ArgMax || node.op() == OpKind::ArgMin) {
    int64_t axis = node.attrInt("axis");
    reduced[static_cast<size_t>(axis < 0 ? axis + static_cast<int64_t>(rank) : axis)] = true;
    return reduced;
  }
  const auto &axes = node.attrInts("axes");
  if (axes.empty())
    reduced.assign(rank, true);
  for (int64_t axis : axes)
    reduced[static_cast<size_t>(axis < 0 ? axis + static_cast<int64_t>(rank) : axis)] = true;
  return reduced;
}

class Planner {
public:
  explicit Planner(const Unit &unit) : unit_(unit), body_(*unit.body) {}

  KernelPlan run(bool perOp) {
    setUpBuffers();
    std::vector<const ir::Node *> ops;
    for (const ir::Node *node : body_.nodes())
      if (node->op() != OpKind::Constant)
        ops.push_back(node);
    int contractions = 0, reductions = 0, pools = 0;
    for (const ir::Node *node : ops) {
      contractions += isContraction(node->op());
      reductions += isReduction(node->op());
      pools += isPool(node->op());
      perOp = perOp || isDirectOp(node->op()) || isRecurrence(node->op()); // these stages exist only per op
      perOp = perOp || loweringOf(node->op()) == Lowering::WeightGrad; // as do weight-gradient stages
    }
    if (ops.size() == 1 && pools == 1) {
      planPerOp(ops);
      plan_.strategy = "pool";
    } else if (perOp || pools > 0 || contractions > 1 || (contractions > 0 && reductions > 0)) {
      planPerOp(ops);
    } else if (contractions == 1) {
      planContraction(ops);
    } else if (reductions > 0) {
      planRows(ops);
    } else {
      planElementwise();
    }
    return std::move(plan_);
  }

private:
  int addBuffer(KernelBuffer::Kind kind, int index, TensorType type, Tensor constant = Tensor()) {
    KernelBuffer buffer;
    buffer.kind = kind;
    buffer.index = index;
    buffer.type = std::move(type);
    buffer.constant = std::move(constant);
    plan_.buffers.push_back(std::move(buffer));
    return static_cast<int>(plan_.buffers.size() - 1);
  }

  int addTemp(const TensorType &type) {
    int buffer = addBuffer(KernelBuffer::Kind::Temp, plan_.numTemps++, type);
    plan_.buffers[static_cast<size_t>(buffer)].producedByStage = static_cast<int>(plan_.stages.size());
    return buffer;
  }

  void setUpBuffers() {
    int operandBuffers = 0, constants = 0;
    const auto &inputs = body_.inputs();
    for (size_t i = 0; i < inputs.size(); ++i) {
      const Tensor &inlined = unit_.inlinedOperands.at(i);
      plan_.bufferOf[inputs[i]] = inlined.defined()
                                      ? addBuffer(KernelBuffer::Kind::Constant, constants++, inlined.type(), inlined)
                                      : addBuffer(KernelBuffer::Kind::Operand, operandBuffers++, inputs[i]->type());
    }
    for (size_t j = 0; j < body_.outputs().size(); ++j) {
      int buffer = addBuffer(KernelBuffer::Kind::Result, static_cast<int>(j), body_.outputs()[j]->type());
      // Results are written by the stages; until then they hold nothing to read.
      plan_.buffers[static_cast<size_t>(buffer)].producedByStage = 1 << 30;
      exports_.push_back({body_.outputs()[j], buffer});
    }
    for (const ir::Node *node : body_.nodes())
      if (node->op() == OpKind::Constant)
        plan_.bufferOf[node->output()] =
            addBuffer(KernelBuffer::Kind::Constant, constants++, node->output()->type(), node->attrTensor("value"));
  }

  // One Loop stage per distinct shape, in order of first appearance.
  void addLoopStages(const std::vector<Store> &stores) {
    std::vector<Shape> shapes;
    for (const Store &store : stores)
      if (std::find(shapes.begin(), shapes.end(), store.value->shape()) == shapes.end())
        shapes.push_back(store.value->shape());
    for (const Shape &shape : shapes) {
      Stage stage;
      stage.kind = StageKind::Loop;
      stage.domain = shape;
      for (const Store &store : stores)
        if (store.value->shape() == shape)
          stage.stores.push_back(store);
      plan_.stages.push_back(std::move(stage));
    }
  }

  void markStored(const Store &store) {
    if (!plan_.bufferOf.count(store.value)) {
      plan_.bufferOf[store.value] = store.buffer;
      plan_.buffers[static_cast<size_t>(store.buffer)].producedByStage = static_cast<int>(plan_.stages.size()) - 1;
    }
  }

  void planElementwise() {
    plan_.strategy = "elementwise";
    addLoopStages(exports_);
  }

  void planRows(const std::vector<const ir::Node *> &ops) {
    plan_.strategy = "rows";
    Stage stage;
    stage.kind = StageKind::Rows;
    for (const ir::Node *node : ops) {
      if (!isReduction(node->op()))
        continue;
      if (stage.reductions.empty()) {
        stage.domain = node->input(0)->shape();
        stage.reduced = reducedAxes(*node);
      } else if (node->input(0)->shape() != stage.domain || reducedAxes(*node) != stage.reduced) {
        throw StrategyMismatch("reductions over different domains or axes");
      }
      stage.reductions.push_back(node);
    }
    int64_t rows = 1;
    for (size_t d = 0; d < stage.domain.size(); ++d)
      if (!stage.reduced[d])
        rows = checkedMul(rows, stage.domain[d], "row count");
    for (const Store &store : exports_) {
      const Shape &shape = store.value->shape();
      if (shape != stage.domain && numElements(shape) != rows)
        throw StrategyMismatch("a result is neither over the rows nor over the whole domain");
    }
    stage.stores = exports_;
    plan_.stages.push_back(std::move(stage));
  }

  // The library takes an operand as a strided view only if one of its two matrix dims is
  // contiguous (gemm) or the whole operand is contiguous (conv, pool); otherwise it is copied
  // into a temporary first.
  StridedAccess operandAccess(const ir::Value &value, bool gemm) {
    int stage = static_cast<int>(plan_.stages.size());
    std::optional<StridedAccess> access = stridedAccess(plan_, stage, value);
    if (access && (gemm ? gemmLayoutOk(value.shape(), access->strides) : access->rowMajor(value.shape())))
      return *access;
    int temp = addTemp(value.type());
    Stage copy;
    copy.kind = StageKind::Loop;
    copy.domain = value.shape();
    copy.stores.push_back({&value, temp});
    plan_.stages.push_back(std::move(copy));
    markStored({&value, temp});
    StridedAccess contiguous;
    contiguous.buffer = temp;
    contiguous.strides = contiguousStrides(value.shape());
    return contiguous;
  }

  // A matrix [rows, cols] (the last two dims; a vector is one row) is usable when either
  // dim is unit-stride and the other's stride leaves room for a whole row/column.
  static bool gemmLayoutOk(const Shape &shape, const std::vector<int64_t> &strides) {
    if (shape.empty())
      return false;
    size_t rank = shape.size();
    int64_t rows = rank >= 2 ? shape[rank - 2] : 1, cols = shape[rank - 1];
    int64_t rowStride = rank >= 2 ? strides[rank - 2] : 0, colStride = strides[rank - 1];
    bool rowMajor = (cols <= 1 || colStride == 1) && (rows <= 1 || rowStride >= cols);
    bool colMajor = (rows <= 1 || rowStride == 1) && (cols <= 1 || colStride >= rows);
    return rowMajor || colMajor;
  }

  void planContraction(const std::vector<const ir::Node *> &ops) {
    const ir::Node *anchor = nullptr;
    for (const ir::Node *node : ops)
      if (isContraction(node->op()))
        anchor = node;
    if (anchor->output()->dtype() != DType::F32 || needsGenericStage(*anchor))
      throw StrategyMismatch("not a contraction the library kernels take");
    for (const Store &store : exports_)
      if (store.value->shape() != anchor->output()->shape())
        throw StrategyMismatch("a result is not over the contraction's output");
    plan_.strategy = "contraction";
    addAnchorStage(*anchor, exports_);
  }

  void addAnchorStage(const ir::Node &anchor, const std::vector<Store> &stores) {
    // Generic stages read every operand contiguously, as conv and pooling do.
    bool generic = needsGenericStage(anchor);
    bool gemm = anchor.op() == OpKind::MatMul && !generic;
    Stage stage;
    stage.kind = generic ? StageKind::Generic
                 : gemm    ? StageKind::Gemm
                 : anchor.op() == OpKind::QMatMul || anchor.op() == OpKind::QConv ? StageKind::QuantizedProduct
                 : anchor.op() == OpKind::ConvTranspose ? StageKind::ConvTranspose
                 : anchor.op() == OpKind::ConvWeightGrad ? StageKind::ConvWeightGrad
                 : isPool(anchor.op()) ? StageKind::Pool
                                       : StageKind::Conv;
    stage.anchor = &anchor;
    stage.domain = anchor.output()->shape();
    for (const ir::Value *operand : anchor.inputs())
      stage.anchorOperands.push_back(operandAccess(*operand, gemm));
    stage.stores = stores;
    stage.tileBuffer = -1;
    for (const Store &store : stores)
      if (store.value == anchor.output())
        stage.tileBuffer = store.buffer;
    // The library writes the anchor's dtype: a result of another one (a cast in the epilogue)
    // cannot hold the tile.
    if (stage.tileBuffer < 0) {
      bool fits = !stores.empty() &&
                  plan_.buffers[static_cast<size_t>(stores.front().buffer)].type.dtype == anchor.output()->dtype();
      stage.tileBuffer = fits ? stores.front().buffer : addTemp(anchor.output()->type());
    }
    plan_.stages.push_back(std::move(stage));
    for (const Store &store : plan_.stages.back().stores)
      markStored(store);
  }

  // Every node its own stage; values cross stages through results or temporaries.
  void planPerOp(const std::vector<const ir::Node *> &ops) {
    plan_.strategy = "per-op";
    std::vector<Store> pending = exports_;
    auto takeExport = [&](const ir::Value *value) {
      for (auto it = pending.begin(); it != pending.end(); ++it)
        if (it->value == value) {
          int buffer = it->buffer;
          pending.erase(it);
          return buffer;
        }
      return addTemp(value->type());
    };
    for (const ir::Node *node : ops) {
      std::vector<Store> stores;
      for (const ir::Value *output : node->outputs())
        stores.push_back({output, takeExport(output)});
      if (isContraction(node->op()) || isPool(node->op()) || loweringOf(node->op()) == Lowering::WeightGrad) {
        addAnchorStage(*node, stores);
        continue;
      }
      if (isRecurrence(node->op())) {
        Stage stage;
        stage.kind = StageKind::Recurrence;
        stage.domain = node->output()->shape();
        stage.anchor = node;
        for (const ir::Value *operand : node->inputs()) // the kernel reads them contiguous
          stage.anchorOperands.push_back(operandAccess(*operand, false));
        stage.stores = stores;
        plan_.stages.push_back(std::move(stage));
        for (const Store &store : stores)
          markStored(store);
        continue;
      }
      if (isDirectOp(node->op())) {
        Stage stage;
        stage.kind = StageKind::Direct;
        stage.domain = node->output()->shape();
        stage.anchor = node;
        stage.stores = stores;
        plan_.stages.push_back(std::move(stage));
        for (const Store &store : stores)
          markStored(store);
        continue;
      }
      if (isReduction(node->op())) {
        Stage stage;
        stage.kind = StageKind::Rows;
        stage.domain = node->input(0)->shape();
        stage.reduced = reducedAxes(*node);
        stage.reductions = {node};
        stage.stores = stores;
        plan_.stages.push_back(std::move(stage));
        for (const Store &store : stores)
          markStored(store);
        continue;
      }
      for (const Store &store : stores) {
        addLoopStages({store});
        markStored(store);
      }
    }
    // What is left: results that are operands, constants, or a value returned twice.
    if (!pending.empty())
      addLoopStages(pending);
  }

  const Unit &unit_;
  const ir::Graph &body_;
  KernelPlan plan_;
  std::vector<Store> exports_;
};

} // namespace

void checkSupported(const ir::Node &node, const std::string &label) {
  auto unsupported = [&](DType dtype) {
    fail("codegen: op {} on dtype {} is not supported yet (node {})", node.opName(), dtypeName(dtype), label);
  };
  DType dtype = node.numInputs() > 0 ? node.input(0)->dtype() : node.output()->dtype();
  for (const ir::Value *value : node.inputs())
    if (!supportedDType(value->dtype(), node.op()))
      unsupported(value->dtype());
  for (const ir::Value *value : node.outputs())
    if (!supportedDType(value->dtype(), node.op()))
      unsupported(value->dtype());
  OpKind op = node.op();
  if (op == OpKind::Constant || isInlinable(op) || isReduction(op) || isDirectOp(op))
    return;
  if (op == OpKind::MatMul && node.output()->dtype() == DType::F32)
    return;
  if (op == OpKind::Conv && dtype == DType::F32 && (node.input(0)->rank() == 3 || node.input(0)->rank() == 4))
    return;
  if (isPool(op) && dtype == DType::F32 && (node.input(0)->rank() == 3 || node.input(0)->rank() == 4))
    return;
  if (isRecurrence(op) && dtype == DType::F32)
    return;
  if (op == OpKind::QMatMul || op == OpKind::QConv) // its operand types are checked by its inference rule
    return;
  if (op == OpKind::ConvWeightGrad && isFloat(dtype)) // f32 as im2col + gemm, others as loops
    return;
  if (genericStageSupports(node)) // the other dtypes, ranks and attributes: codegen/GenericContraction.h
    return;
  unsupported(dtype);
}

KernelPlan planKernel(const Unit &unit, bool perOp) {
  for (const ir::Node *node : unit.body->nodes())
    checkSupported(*node, unit.nodeLabel);
  return Planner(unit).run(perOp);
}

} // namespace kiln::codegen
