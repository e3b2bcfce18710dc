#include "ir/Op.h"

#include <array>

#include "core/Error.h"

namespace kiln::ir {

namespace {
constexpr std::array<OpTraits, kNumOps> kTraits = {{
#define OP(Enum, mnemonic, minIn, maxIn, tier, fusion, flags, family)                             \
  {mnemonic, minIn, maxIn, OpTier::tier, FusionKind::fusion, flags, #family},
#include "ir/Ops.def"
}};
} // namespace

const OpTraits &opTraits(OpKind op) { return kTraits[static_cast<size_t>(op)]; }

std::optional<OpKind> parseOpName(std::string_view name) {
  for (int i = 0; i < kNumOps; ++i)
    if (kTraits[i].name == name)
      return static_cast<OpKind>(i);
  return std::nullopt;
}

std::string_view tierName(OpTier tier) {
  switch (tier) {
  case OpTier::Source: return "source";
  case OpTier::Primitive: return "primitive";
  case OpTier::Composite: return "composite";
  }
  return "?";
}

std::string_view fusionKindName(FusionKind kind) {
  switch (kind) {
  case FusionKind::Elementwise: return "elementwise";
  case FusionKind::Broadcast: return "broadcast";
  case FusionKind::Injective: return "injective";
  case FusionKind::Reduction: return "reduction";
  case FusionKind::OutFusable: return "out-fusable";
  case FusionKind::Opaque: return "opaque";
  }
  return "?";
}

const OpDef &opDef(OpKind op) {
  // Built on first use rather than by static constructors, so there is no init-order hazard.
  static const std::array<OpDef, kNumOps> table = {{
#define OP(Enum, ...) define##Enum(),
#include "ir/Ops.def"
  }};
  return table[static_cast<size_t>(op)];
}

} // namespace kiln::ir
