#pragma once
// OpKind and everything known about an op: the static traits from ir/Ops.def and the
// semantics (attribute schema, inference, evaluation or decomposition) from its family file.
#include <functional>
#include <optional>
#include <string_view>
#include <vector>

#include "ir/Attribute.h"

namespace kiln::ir {

enum class OpKind : uint16_t {
#define OP(Enum, ...) Enum,
#include "ir/Ops.def"
};

inline constexpr int kNumOps = 0
#define OP(Enum, ...) +1
#include "ir/Ops.def"
    ;

enum class OpTier : uint8_t { Source, Primitive, Composite };
/// How an op may fuse with its neighbours (TVM's OpPatternKind).
enum class FusionKind : uint8_t { Elementwise, Broadcast, Injective, Reduction, OutFusable, Opaque };

enum OpFlags : uint32_t { kNoFlags = 0, kInPlace = 1u << 0, kCommutative = 1u << 1 };

struct OpTraits {
  std::string_view name;
  int minInputs;
  int maxInputs; // -1: variadic
  OpTier tier;
  FusionKind fusion;
  uint32_t flags;
  std::string_view family;
};

const OpTraits &opTraits(OpKind op);
inline std::string_view opName(OpKind op) { return opTraits(op).name; }
std::optional<OpKind> parseOpName(std::string_view name);
std::string_view tierName(OpTier tier);
std::string_view fusionKindName(FusionKind kind);
inline bool isComposite(OpKind op) { return opTraits(op).tier == OpTier::Composite; }

class Builder;
class Value;

/// Type and shape inference: input types and (complete) attributes in, output types out.
/// Throws kiln::Error describing the problem; the Builder adds the op and input types.
using InferFn = std::vector<TensorType> (*)(const std::vector<TensorType> &inputs, const AttrMap &attrs);
/// Reference evaluation of a primitive. `outputs` are the inferred output types.
using EvalFn = std::vector<Tensor> (*)(const std::vector<Tensor> &inputs, const AttrMap &attrs,
                                       const std::vector<TensorType> &outputs);
/// A composite's meaning: builds equivalent ops at the builder's insertion point.
using DecomposeFn = std::vector<Value *> (*)(Builder &builder, const std::vector<Value *> &inputs,
                                             const AttrMap &attrs);

/// For a primitive that has a decomposition: whether the pipelines expand a node of these
/// operand types and attributes too, not only autodiff (passes/decompose/Decompose.h).
using ExpandFn = bool (*)(const std::vector<TensorType> &inputs, const AttrMap &attrs);

/// The semantics of one op, defined in its family file under ir/ops/.
struct OpDef {
  std::vector<AttrSpec> attrs;
  InferFn infer = nullptr;
  EvalFn eval = nullptr;           // primitives and sources
  DecomposeFn decompose = nullptr; // composites, and primitives with an unrolled form (recurrences)
  ExpandFn expandIf = nullptr;     // such a primitive: when the pipelines expand it as well
};

const OpDef &opDef(OpKind op);

/// Each family file defines `OpDef define<Enum>()` for its ops.
#define OP(Enum, ...) OpDef define##Enum();
#include "ir/Ops.def"

} // namespace kiln::ir
