#pragma once
// The kernel emitter: writes the C++ of one generated function at a time (a stage's row
// function or a contraction's epilogue) and computes body values inline at given coordinates.
//
// Scopes: a function is a stack of open scopes (level 0 the function body, then one per
// open loop). A line goes to the deepest scope whose variables it uses, so work that does not
// depend on an inner loop is hoisted out of it: a scope's lines are spliced into its parent
// only when it closes, so a line appended to an outer scope lands before the inner loop.
// Every computed value is cached per (value, coordinates) in the scope where it was placed,
// and forgotten when that scope closes.
//
// value(v, coords) reads v from its buffer when an earlier stage (or the caller) stored it,
// takes an override (a reduction's per-row result, a contraction's tile element) when one is
// set, and otherwise computes v from its producer: elementwise ops from their operands,
// re-indexing ops by mapping the coordinates, pad/concat as clamped loads and selects, gather
// as an indirect load with a clamped index, iota from the coordinate, random_uniform from the
// linear index.
//
// f16 and bf16 values are floats (codegen/ScalarOps.h): loads widen the buffer's 16-bit
// patterns, stores narrow, and every value computed is rounded to its dtype. A value it cannot
// compute inline (a reduction without override, a contraction) or an override requested at
// other coordinates throws StrategyMismatch.
#include <map>
#include <string>
#include <unordered_map>
#include <vector>

#include "codegen/LoopNest.h"
#include "passes/fusion/AccumulatedOperand.h"

namespace kiln::codegen {

struct Scalar {
  std::string code;
  int level = 0;
};

class KernelEmitter {
public:
  /// `prefix` names the kernel's symbols; `restrictPointers` is false when the launch's
  /// buffers may overlap (an in-place op). Operand buffers come first in `buffers`.
  KernelEmitter(const KernelPlan &plan, std::string prefix, bool restrictPointers, int numOperandBuffers);

  const KernelPlan &plan() const { return plan_; }
  const std::string &prefix() const { return prefix_; }

  /// Whether kernel buffer `buffer` is an operand holding a weight that only this kernel reads
  /// (Unit::soleWeightOperands), so that its layout is the kernel's to choose.
  bool isSoleWeightOperand(int buffer) const;
  void setSoleWeightOperands(std::vector<bool> flags) { soleWeightOperands_ = std::move(flags); }
  /// Whether convolutions must be exact sums of products (Unit::exactConvolutions).
  bool exactConvolutions() const { return exactConvolutions_; }
  void setExactConvolutions(bool exact) { exactConvolutions_ = exact; }
  /// What contractions multiply in (Unit::precision).
  ContractionPrecision precision() const { return precision_; }
  void setPrecision(ContractionPrecision precision) { precision_ = precision; }
  /// The `X + r` of a unit whose convolution accumulates into r's buffer (Unit::
  /// accumulatedOperand): its conv stage has conv2d add into the output, and its epilogue takes
  /// the node's value as X's, the tile already holding r. Empty (add == nullptr) otherwise.
  const passes::AccumulatedAdd &accumulatedAdd() const { return accumulatedAdd_; }
  void setAccumulatedAdd(passes::AccumulatedAdd add) { accumulatedAdd_ = add; }
  std::string contextType() const { return prefix_ + "_ctx"; }

  /// Starts a function body for stage `stage` whose context pointer is `c`; resets the
  /// index arena, caches, overrides and local pointers.
  void beginFunction(int stage);
  /// Closes the function and returns its body (indented, without braces).
  std::string endFunction();

  void open(const std::string &header);
  void close();
  void line(const std::string &text);
  void lineAt(int level, const std::string &text);
  int depth() const { return static_cast<int>(scopes_.size()) - 1; }

  IndexArena &arena() { return arena_; }
  std::string fresh(const std::string &prefix);
  /// Declares `const int64_t name = code;` in the current scope, as a variable with values in
  /// [0, extent).
  Index declareIndex(const std::string &code, int64_t extent, const std::string &prefix = "t");
  /// Opens `for (int64_t i = 0; i < extent; ++i)` and returns i as an index variable.
  Index openLoop(int64_t extent, const std::string &prefix = "i");
  /// As open(header) for the inner loop of a stage whose iterations are independent (each
  /// stores only at its own coordinates): the loop gets `#pragma GCC ivdep`. GCC 12 otherwise
  /// gives up on some loops with many restrict pointers ("complicated access pattern"): a
  /// BatchNorm+ReLU stage with two loads and four stores ran scalar, with a branch per
  /// element, 6x slower (ResNet-18 training, [8,128,28,28]).
  void openIndependent(const std::string &header);
  /// As openLoop, for such a loop (openIndependent); one of 8 or more steps is also kept a loop.
  Index openIndependentLoop(int64_t extent);

  /// The local pointer to `buffer` in the current function (declared on first use).
  std::string pointer(int buffer);
  /// The buffer's address in the kernel function itself (`buffers[k]`, `ctx.temps[t]`, ...).
  std::string kernelAddress(int buffer) const;

  Scalar value(const ir::Value *value, const std::vector<Index> &coords);
  void store(const Store &store, const std::vector<Index> &coords, const Scalar &scalar);
  void setOverride(const ir::Value *value, std::vector<Index> coords, Scalar scalar);
  void clearOverride(const ir::Value *value) { overrides_.erase(value); }

  /// Declares `const T name = expr;` at `level` and returns it (T = cType(dtype)); `expr` is
  /// rounded to the dtype first (f16, bf16: see codegen/ScalarOps.h).
  Scalar declare(DType dtype, const std::string &expr, int level);
  /// As declare, for an `expr` that already is a value of the dtype (no rounding).
  Scalar declareExact(DType dtype, const std::string &expr, int level);

  /// Watches loop variable `name`: loads whose address moves by more than one element per
  /// step of it (a transposed read) are counted, so a stage can choose a tiled loop order.
  void watchInnerLoop(const std::string &name);
  int stridedInnerLoads() const { return stridedInnerLoads_; }
  /// Loads and stores whose address moves with the watched loop through a division or a
  /// remainder (not a fixed stride): what merging dims into one inner loop must not cause.
  int irregularInnerAccesses() const { return irregularInnerAccesses_; }

private:
  void noteInnerAccess(const Index &address);
  struct Scope {
    std::vector<std::string> pragmas; // lines before the header
    std::string header;
    std::vector<std::string> lines;
    std::unordered_map<std::string, Scalar> cache;
  };
  struct Override {
    std::vector<Index> coords;
    Scalar scalar;
  };

  Scalar compute(const ir::Value *value, const std::vector<Index> &coords);
  Scalar load(int buffer, const std::vector<Index> &coords);
  Scalar pad(const ir::Node &node, const std::vector<Index> &coords);
  Scalar concat(const ir::Node &node, const std::vector<Index> &coords);
  Scalar gather(const ir::Node &node, const std::vector<Index> &coords);
  std::string cacheKey(const ir::Value *value, const std::vector<Index> &coords) const;
  bool available(int buffer) const;
  int levelOf(const std::vector<Index> &coords) const;

  const KernelPlan &plan_;
  std::string prefix_;
  bool restrict_;
  int numOperandBuffers_;
  std::vector<bool> soleWeightOperands_;
  bool exactConvolutions_ = false;
  ContractionPrecision precision_ = ContractionPrecision::F32;
  passes::AccumulatedAdd accumulatedAdd_;
  int stage_ = 0;
  int counter_ = 0;
  IndexArena arena_;
  std::vector<Scope> scopes_;
  std::map<int, std::string> pointers_;
  std::unordered_map<const ir::Value *, Override> overrides_;
  std::string watched_;
  int watchedLevel_ = 0;
  int stridedInnerLoads_ = 0, irregularInnerAccesses_ = 0;
};

} // namespace kiln::codegen
