#pragma once
// Typed node attributes. A node's attributes are a sorted map, so printing and hashing are
// deterministic; every attribute an op declares is present on its nodes (the Builder fills
// defaults), so op semantics read them without checks.
#include <map>
#include <optional>
#include <string>
#include <variant>
#include <vector>

#include "core/Tensor.h"

namespace kiln::ir {

/// The kinds in the same order as the Attribute variant's alternatives.
enum class AttrKind : uint8_t { Int, Float, Ints, Floats, String, DType, Tensor };

using Attribute =
    std::variant<int64_t, double, std::vector<int64_t>, std::vector<double>, std::string, DType, Tensor>;
using AttrMap = std::map<std::string, Attribute>;

inline AttrKind attrKind(const Attribute &attr) { return static_cast<AttrKind>(attr.index()); }
std::string_view attrKindName(AttrKind kind);
bool attributesEqual(const Attribute &a, const Attribute &b);
bool attrMapsEqual(const AttrMap &a, const AttrMap &b);

/// Typed reads; a missing attribute or one of another kind is an internal error (the Builder
/// guarantees presence and kind), reported as kiln::Error naming the attribute.
int64_t attrInt(const AttrMap &attrs, const std::string &name);
double attrFloat(const AttrMap &attrs, const std::string &name);
const std::vector<int64_t> &attrInts(const AttrMap &attrs, const std::string &name);
const std::vector<double> &attrFloats(const AttrMap &attrs, const std::string &name);
const std::string &attrString(const AttrMap &attrs, const std::string &name);
DType attrDType(const AttrMap &attrs, const std::string &name);
const Tensor &attrTensor(const AttrMap &attrs, const std::string &name);

/// One declared attribute of an op. An attribute without a default is required.
struct AttrSpec {
  std::string name;
  AttrKind kind;
  std::optional<Attribute> defaultValue;
};

} // namespace kiln::ir
