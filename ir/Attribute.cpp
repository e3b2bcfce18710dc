#include "ir/Attribute.h"

#include "core/Error.h"

namespace kiln::ir {

std::string_view attrKindName(AttrKind kind) {
  switch (kind) {
  case AttrKind::Int: return "int";
  case AttrKind::Float: return "float";
  case AttrKind::Ints: return "ints";
  case AttrKind::Floats: return "floats";
  case AttrKind::String: return "string";
  case AttrKind::DType: return "dtype";
  case AttrKind::Tensor: return "tensor";
  }
  return "?";
}

bool attributesEqual(const Attribute &a, const Attribute &b) {
  if (a.index() != b.index())
    return false;
  if (auto *ta = std::get_if<Tensor>(&a))
    return ta->identical(std::get<Tensor>(b));
  if (auto *fa = std::get_if<double>(&a)) // compare bits so that nan == nan round-trips
    return std::memcmp(fa, &std::get<double>(b), sizeof(double)) == 0;
  return std::visit(
      [&](const auto &value) {
        using T = std::decay_t<decltype(value)>;
        if constexpr (std::is_same_v<T, Tensor>)
          return false; // handled above
        else
          return value == std::get<T>(b);
      },
      a);
}

bool attrMapsEqual(const AttrMap &a, const AttrMap &b) {
  if (a.size() != b.size())
    return false;
  for (auto ia = a.begin(), ib = b.begin(); ia != a.end(); ++ia, ++ib)
    if (ia->first != ib->first || !attributesEqual(ia->second, ib->second))
      return false;
  return true;
}

template <typename T> static const T &getAttr(const AttrMap &attrs, const std::string &name) {
  auto it = attrs.find(name);
  if (it == attrs.end())
    fail("missing attribute '{}'", name);
  const T *value = std::get_if<T>(&it->second);
  if (!value)
    fail("attribute '{}' has kind {}", name, attrKindName(attrKind(it->second)));
  return *value;
}

int64_t attrInt(const AttrMap &a, const std::string &n) { return getAttr<int64_t>(a, n); }
double attrFloat(const AttrMap &a, const std::string &n) { return getAttr<double>(a, n); }
const std::vector<int64_t> &attrInts(const AttrMap &a, const std::string &n) {
  return getAttr<std::vector<int64_t>>(a, n);
}
const std::vector<double> &attrFloats(const AttrMap &a, const std::string &n) {
  return getAttr<std::vector<double>>(a, n);
}
const std::string &attrString(const AttrMap &a, const std::string &n) { return getAttr<std::string>(a, n); }
DType attrDType(const AttrMap &a, const std::string &n) { return getAttr<DType>(a, n); }
const Tensor &attrTensor(const AttrMap &a, const std::string &n) { return getAttr<Tensor>(a, n); }

} // namespace kiln::ir
