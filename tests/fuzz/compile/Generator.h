#pragma once
// Internal to the graph generator (tests/fuzz/compile/GraphGenerator.h): the state one graph is
// built with, the value pool and the helpers every op emitter uses (Generator.cpp), and the
// emitters of each op family (Generate*.cpp).
//
// Every value the generator makes carries what it knows about the value's elements: bounds
// (so that guards keep log, sqrt, division and pow in their domain and magnitudes small) and a
// grid (every element a multiple of 2^-fracBits). A float value on a grid whose magnitude is
// small enough for its dtype's mantissa is exact: the reference evaluator (double, rounded
// once) and generated code (f32, in another order) compute the same bits. Ops that are not
// continuous (floor, comparisons, casts to integers, argmax and topk ties, mod) only ever see
// exact operands, so that a last-bit difference upstream cannot flip their result.
#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "frontend/GraphBuilder.h"
#include "tests/fuzz/compile/InputDomains.h"

namespace kiln::fuzz {

using frontend::Var;
using ir::OpKind;

struct GenValue {
  Var var;
  double lo = 0, hi = 0; // every element lies in [lo, hi] (infinite: unknown or non-finite)
  int fracBits = -1;     // every element is a multiple of 2^-fracBits; -1: no grid

  DType dtype() const { return var.dtype(); }
  const Shape &shape() const { return var.shape(); }
  int64_t rank() const { return var.rank(); }
  int64_t numElements() const { return var.numElements(); }
  double maxAbs() const;
};

/// Whether `value` is computed exactly everywhere (integers and bools always; floats on a grid
/// within their dtype's mantissa).
bool isExact(const GenValue &value);

/// The largest element count a generated value has (in a large case, 16 times that): keeps
/// the reference evaluator fast.
inline constexpr int64_t kMaxElements = 4096;
/// Float values are scaled (by a power of two, exactly) back under this magnitude.
inline constexpr double kMaxMagnitude = 16;

class Gen {
public:
  Gen(uint64_t seed, frontend::GraphBuilder &builder);

  frontend::GraphBuilder &gb;

  // --- randomness: integer mappings of the raw generator, the same on every machine -------
  int pick(int n);
  int64_t between(int64_t lo, int64_t hi); // inclusive
  bool chance(int percent);
  template <typename T> const T &oneOf(const std::vector<T> &items) {
    return items[static_cast<size_t>(pick(static_cast<int>(items.size())))];
  }
  /// A grid value (a multiple of 1/8) in [lo, hi].
  double gridValue(double lo, double hi);
  /// A random permutation of 0..n-1 (Fisher-Yates; std::shuffle is not portable).
  std::vector<int64_t> permutation(int64_t n);
  uint64_t nextSeed() { return rng_(); }

  /// The case's main float dtype (f32 most often, then f64, f16, bf16) and integer dtype.
  DType floatType = DType::F32;
  DType intType = DType::I64;
  /// One case in twenty is large: dims up to about 8 times longer, so that generated kernels
  /// take their parallel and blocked paths (work below a few ten thousand elements runs on
  /// one thread).
  bool large = false;
  int64_t maxElements() const { return large ? 16 * kMaxElements : kMaxElements; }
  /// A dim in [1, small], or in [1, largeMax] in a large case.
  int64_t dim(int64_t small, int64_t largeMax) { return between(1, large ? largeMax : small); }

  // --- shapes ----------------------------------------------------------------------------------
  /// A shape of rank in [minRank, maxRank] with at most `maxElements` elements; now and then
  /// with a size-0 dim when `allowEmpty`.
  Shape randomShape(int minRank, int maxRank, int64_t maxElements = 256, bool allowEmpty = true);
  /// A shape that broadcasts with `shape` to `shape` (dims dropped from the front or set to 1).
  Shape broadcastableTo(const Shape &shape);

  // --- the pool of values made so far ----------------------------------------------------------
  /// Adds `value` to the pool (a float scaled under kMaxMagnitude first, an integer clipped when
  /// its bounds are lost) and returns what was added.
  GenValue add(GenValue value);
  const std::vector<GenValue> &pool() const { return pool_; }
  /// Makes `value` an output of the graph whatever later steps do (what an emitter tests
  /// would otherwise often be dead code).
  void keepAsOutput(const GenValue &value) { kept_.push_back(value.var); }
  const std::vector<Var> &keptOutputs() const { return kept_; }

  // --- operands --------------------------------------------------------------------------------
  /// A new graph input (or now and then a constant or an initialised parameter) of `type`
  /// whose values come from `domain`.
  GenValue leaf(DType dtype, const Shape &shape, InputDomain::Kind kind, std::vector<int64_t> indexDims = {});
  /// A constant or an initialised parameter of `type`: a value known when compiling.
  GenValue known(DType dtype, const Shape &shape, InputDomain::Kind kind);
  /// A graph input, always (indices, labels: values a constant would let the compiler fold).
  GenValue input(DType dtype, const Shape &shape, InputDomain::Kind kind, std::vector<int64_t> indexDims = {});
  /// A rank-0 constant.
  GenValue scalarConstant(DType dtype, double value);
  /// A value from the pool that `accept` takes (recent ones more often), or `fallback()`.
  template <typename Accept, typename Fallback> GenValue fromPool(Accept accept, Fallback fallback) {
    std::vector<size_t> candidates;
    for (size_t i = 0; i < pool_.size(); ++i)
      if (accept(pool_[i]))
        candidates.push_back(i);
    if (candidates.empty() || chance(15))
      return fallback();
    // Two in three picks take one of the three newest candidates: chains grow deep.
    size_t n = candidates.size();
    size_t at = chance(66) ? n - 1 - static_cast<size_t>(pick(static_cast<int>(std::min<size_t>(n, 3))))
                           : static_cast<size_t>(pick(static_cast<int>(n)));
    return pool_[candidates[at]];
  }
  /// A float value (of any float dtype; `floatType` when new).
  GenValue floatOperand(int maxRank = 4);
  /// A float or integer value.
  GenValue numericOperand(int maxRank = 4);
  /// An exact float or integer value (see isExact).
  GenValue exactOperand(int maxRank = 4);
  /// A bool value: a pool value, a comparison of exact values, or an input.
  GenValue boolOperand();
  /// A value of `dtype` and a shape that broadcasts with `shape`: from the pool, new, or a
  /// scalar constant. Its domain, when new, is `kind`.
  GenValue partner(DType dtype, const Shape &shape, InputDomain::Kind kind = InputDomain::Kind::Signed);
  /// A value of exactly this type: from the pool or new.
  GenValue ofType(DType dtype, const Shape &shape, InputDomain::Kind kind = InputDomain::Kind::Signed);

  // --- emitting ----------------------------------------------------------------------------------
  /// Creates one node of `op` and returns its output with the given knowledge.
  GenValue emit(OpKind op, const std::vector<GenValue> &operands, ir::AttrMap attrs, double lo, double hi,
                int fracBits);
  std::vector<Var> emitMulti(OpKind op, const std::vector<GenValue> &operands, ir::AttrMap attrs);
  /// `value` (numeric) times 2^exponent: exact.
  GenValue scaleByPowerOfTwo(const GenValue &value, int exponent);
  /// `value` scaled by a power of two so that its magnitude is at most `limit`.
  GenValue tame(const GenValue &value, double limit);
  /// abs(value) + offset, or `value` when it is already >= offset: for log, sqrt, divisors.
  GenValue atLeast(const GenValue &value, double offset);
  /// `value` converted to `dtype` (nothing when it has it).
  GenValue cast(const GenValue &value, DType dtype);
  /// `value` as a float value: itself, or cast to `floatType` (integers, bools).
  GenValue asFloat(const GenValue &value);
  /// `value` in a dtype the library and direct kernels take: f16/bf16 become f32.
  GenValue noHalf(const GenValue &value);
  /// `value` reshaped to `shape` (same element count).
  GenValue reshape(const GenValue &value, const Shape &shape);

private:
  std::mt19937_64 rng_;
  std::vector<GenValue> pool_;
  std::vector<Var> kept_;
  int inputs_ = 0, params_ = 0;
};

/// Builds one op of `op`'s kind into the graph: each family file defines its emitters.
using Emitter = void (*)(Gen &gen, OpKind op);

// GenerateElementwise.cpp
void emitUnaryFloat(Gen &gen, OpKind op);
void emitUnaryNumeric(Gen &gen, OpKind op);
void emitBoolUnary(Gen &gen, OpKind op);
void emitArithmetic(Gen &gen, OpKind op);
void emitComparison(Gen &gen, OpKind op);
void emitLogical(Gen &gen, OpKind op);
void emitWhere(Gen &gen, OpKind op);
void emitCast(Gen &gen, OpKind op);
void emitClip(Gen &gen, OpKind op);
void emitSource(Gen &gen, OpKind op); // iota, random_uniform
void emitSpecialValues(Gen &gen, OpKind op); // NaN and infinities through NaN-aware ops

// GenerateReduceMovement.cpp
void emitReduce(Gen &gen, OpKind op);
void emitArgReduce(Gen &gen, OpKind op);
void emitMovement(Gen &gen, OpKind op);
void emitRegion(Gen &gen, OpKind op); // slice, pad, concat, split, tile

// GenerateIndexing.cpp
void emitGather(Gen &gen, OpKind op);
void emitScatter(Gen &gen, OpKind op);
void emitSequence(Gen &gen, OpKind op); // cumsum, topk, trilu, one_hot

// GenerateContraction.cpp
void emitMatMul(Gen &gen, OpKind op);
void emitConv(Gen &gen, OpKind op); // conv, conv_transpose, conv_weight_grad
void emitPool(Gen &gen, OpKind op); // max_pool, avg_pool, max_pool_grad
void emitEinsum(Gen &gen, OpKind op);
void emitResize(Gen &gen, OpKind op);
void emitRecurrence(Gen &gen, OpKind op); // rnn_sequence, gru_sequence, lstm_sequence
void emitQuantizedProduct(Gen &gen, OpKind op); // qmatmul, qconv

// GenerateComposite.cpp
void emitNormalization(Gen &gen, OpKind op); // batch_norm, layer_norm, instance_norm, lrn, softmax...
void emitActivation(Gen &gen, OpKind op);
void emitLoss(Gen &gen, OpKind op);
void emitLinear(Gen &gen, OpKind op);
void emitOptimizer(Gen &gen, OpKind op);

} // namespace kiln::fuzz
