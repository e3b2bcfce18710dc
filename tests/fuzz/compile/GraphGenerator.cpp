// generateCase: the op table (which emitter builds each op) and the loop that builds a case
// around its focus op.
#include "tests/fuzz/compile/GraphGenerator.h"

#include "core/Error.h"
#include "frontend/GraphBuilder.h"
#include "tests/fuzz/compile/Generator.h"

namespace kiln::fuzz {

namespace {

struct OpEntry {
  OpKind op;
  Emitter emit;
};

const std::vector<OpEntry> &opTable() {
  static const std::vector<OpEntry> table = [] {
    std::vector<OpEntry> t;
    auto add = [&t](Emitter emit, std::initializer_list<OpKind> ops) {
      for (OpKind op : ops)
        t.push_back({op, emit});
    };
    using K = OpKind;
    add(emitUnaryFloat, {K::Exp, K::Expm1, K::Log, K::Log1p, K::Sqrt, K::Rsqrt, K::Reciprocal, K::Tanh, K::Sigmoid,
                         K::Erf, K::Sin, K::Cos, K::Tan, K::Asin, K::Acos, K::Atan, K::Sinh, K::Cosh, K::Asinh,
                         K::Acosh, K::Atanh});
    add(emitUnaryNumeric, {K::Neg, K::Abs, K::Relu, K::Floor, K::Ceil, K::Round, K::Sign});
    add(emitBoolUnary, {K::Not});
    add(emitSpecialValues, {K::IsNan, K::IsInf});
    add(emitArithmetic, {K::Add, K::Sub, K::Mul, K::Div, K::Pow, K::Max, K::Min, K::Mod});
    add(emitComparison, {K::Eq, K::Ne, K::Lt, K::Le, K::Gt, K::Ge});
    add(emitLogical, {K::And, K::Or, K::Xor});
    add(emitWhere, {K::Where});
    add(emitCast, {K::Cast});
    add(emitClip, {K::Clip});
    add(emitSource, {K::Iota, K::RandomUniform});
    add(emitReduce, {K::ReduceSum, K::ReduceMax, K::ReduceMin, K::ReduceProd, K::ReduceMean, K::ReduceL1,
                     K::ReduceL2, K::ReduceLogSum, K::ReduceLogSumExp, K::ReduceSumSquare});
    add(emitArgReduce, {K::ArgMax, K::ArgMin});
    add(emitMovement, {K::Reshape, K::Permute, K::Broadcast, K::Squeeze, K::Unsqueeze, K::Flatten});
    add(emitRegion, {K::Slice, K::Pad, K::Concat, K::Split, K::Tile});
    add(emitGather, {K::Gather, K::GatherElements, K::GatherNd});
    add(emitScatter, {K::ScatterAdd, K::ScatterElements, K::ScatterNd});
    add(emitSequence, {K::CumSum, K::TopK, K::Trilu, K::OneHot});
    add(emitMatMul, {K::MatMul});
    add(emitConv, {K::Conv, K::ConvTranspose, K::ConvWeightGrad});
    add(emitPool, {K::MaxPool, K::AvgPool, K::MaxPoolGrad});
    add(emitEinsum, {K::Einsum});
    add(emitResize, {K::Resize});
    add(emitRecurrence, {K::RnnSequence, K::GruSequence, K::LstmSequence});
    add(emitQuantizedProduct, {K::QMatMul, K::QConv});
    add(emitNormalization, {K::Softmax, K::LogSoftmax, K::LayerNorm, K::BatchNorm, K::InstanceNorm, K::Lrn});
    add(emitActivation, {K::Gelu, K::Silu, K::Elu, K::Selu, K::LeakyRelu, K::PRelu, K::HardSigmoid, K::HardSwish,
                         K::Softplus, K::Softsign, K::Celu, K::ThresholdedRelu, K::Mish, K::Shrink, K::Hardmax});
    add(emitLinear, {K::Linear});
    add(emitLoss, {K::MseLoss, K::CrossEntropy, K::NllLoss});
    add(emitOptimizer, {K::SgdUpdate, K::AdamUpdate});
    return t;
  }();
  return table;
}

/// Runs one emitter; an op its inference rejects leaves at most dead nodes behind.
bool tryEmit(Gen &gen, const OpEntry &entry) {
  try {
    entry.emit(gen, entry.op);
    return true;
  } catch (const Error &) {
    return false;
  }
}

} // namespace

std::vector<OpKind> generatorOps() {
  std::vector<OpKind> ops;
  for (const OpEntry &entry : opTable())
    ops.push_back(entry.op);
  return ops;
}

std::vector<OpKind> loweredOps() {
  std::vector<OpKind> ops;
  for (int i = 0; i < ir::kNumOps; ++i) {
    auto op = static_cast<OpKind>(i);
    if (ir::opTraits(op).tier == ir::OpTier::Primitive && op != OpKind::Kernel)
      ops.push_back(op);
  }
  return ops;
}

GeneratedCase generateCase(uint64_t seed) {
  const std::vector<OpEntry> &table = opTable();
  GeneratedCase result;
  result.seed = seed;
  const OpEntry &focus = table[mixSeed(seed ^ 0x5EEDull) % table.size()];
  result.focus = focus.op;
  frontend::GraphBuilder gb("fuzz" + std::to_string(seed));
  Gen gen(seed, gb);
  int steps = 1 + gen.pick(9);
  int focusStep = gen.pick(steps);
  for (int step = 0; step < steps; ++step) {
    if (step == focusStep) {
      // The focus op gets a few tries: its emitter may ask for what its inference rejects.
      bool built = false;
      for (int attempt = 0; attempt < 4 && !built; ++attempt) {
        built = tryEmit(gen, focus);
        result.rejectedSteps += !built;
      }
      continue;
    }
    result.rejectedSteps += !tryEmit(gen, table[static_cast<size_t>(gen.pick(static_cast<int>(table.size())))]);
  }
  if (gen.pool().empty())
    gen.add(gen.floatOperand());
  // The newest value, and now and then one or two earlier ones (a value several kernels read
  // that is also an output, or a graph input returned as it is).
  const std::vector<GenValue> &pool = gen.pool();
  std::vector<Var> outputs{pool.back().var};
  for (int extra = gen.pick(3); extra > 0 && pool.size() > 1; --extra)
    outputs.push_back(pool[static_cast<size_t>(gen.pick(static_cast<int>(pool.size()) - 1))].var);
  for (const Var &kept : gen.keptOutputs())
    outputs.push_back(kept);
  result.graph = gb.finish(outputs);
  return result;
}

} // namespace kiln::fuzz
