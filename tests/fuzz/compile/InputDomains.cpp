#include "tests/fuzz/compile/InputDomains.h"

#include <cmath>
#include <limits>
#include <random>

#include "core/Error.h"

namespace kiln::fuzz {

namespace {

// Integers from the raw generator by modulo: std::uniform_int_distribution's output differs
// between standard libraries, and a reproducer must give the same values everywhere.
int64_t below(std::mt19937_64 &rng, int64_t n) { return static_cast<int64_t>(rng() % static_cast<uint64_t>(n)); }

double gridValue(std::mt19937_64 &rng, int64_t loEighths, int64_t hiEighths) {
  return static_cast<double>(loEighths + below(rng, hiEighths - loEighths + 1)) / 8.0;
}

double unitValue(std::mt19937_64 &rng) { return static_cast<double>(rng() >> 11) * 0x1.0p-52 - 1.0; }

double floatValue(std::mt19937_64 &rng, const InputDomain &domain) {
  switch (domain.kind) {
  case InputDomain::Kind::Signed: return gridValue(rng, -16, 16);
  case InputDomain::Kind::Positive: return gridValue(rng, 2, 16);
  case InputDomain::Kind::NonNegative: return gridValue(rng, 0, 16);
  case InputDomain::Kind::Unrounded: return unitValue(rng);
  case InputDomain::Kind::Wild: {
    constexpr double kSpecials[] = {std::numeric_limits<double>::quiet_NaN(), std::numeric_limits<double>::infinity(),
                                    -std::numeric_limits<double>::infinity(), -0.0};
    if (below(rng, 5) == 0)
      return kSpecials[below(rng, 4)];
    return gridValue(rng, -16, 16);
  }
  case InputDomain::Kind::Bool: return static_cast<double>(below(rng, 2));
  case InputDomain::Kind::Index: break;
  }
  return 0;
}

int64_t intValue(std::mt19937_64 &rng, const InputDomain &domain, int64_t element) {
  switch (domain.kind) {
  case InputDomain::Kind::Signed:
  case InputDomain::Kind::Unrounded:
  case InputDomain::Kind::Wild: return below(rng, 17) - 8;
  case InputDomain::Kind::Positive: return 1 + below(rng, 8);
  case InputDomain::Kind::NonNegative: return below(rng, 9);
  case InputDomain::Kind::Bool: return below(rng, 2);
  case InputDomain::Kind::Index: {
    int64_t dim = domain.dims[static_cast<size_t>(element) % domain.dims.size()];
    return dim == 0 ? 0 : below(rng, 2 * dim) - dim;
  }
  }
  return 0;
}

} // namespace

uint64_t mixSeed(uint64_t z) {
  z += 0x9E3779B97F4A7C15ull;
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

std::string inputName(const InputDomain &domain, int ordinal) {
  std::string prefix;
  switch (domain.kind) {
  case InputDomain::Kind::Signed: prefix = "s"; break;
  case InputDomain::Kind::Positive: prefix = "p"; break;
  case InputDomain::Kind::NonNegative: prefix = "n"; break;
  case InputDomain::Kind::Unrounded: prefix = "u"; break;
  case InputDomain::Kind::Wild: prefix = "w"; break;
  case InputDomain::Kind::Bool: prefix = "b"; break;
  case InputDomain::Kind::Index:
    prefix = "k";
    for (size_t i = 0; i < domain.dims.size(); ++i)
      prefix += (i ? "x" : "") + std::to_string(domain.dims[i]);
    break;
  }
  return prefix + "_" + std::to_string(ordinal);
}

InputDomain parseInputName(const std::string &name) {
  size_t underscore = name.find('_');
  if (name.empty() || underscore == std::string::npos)
    fail("fuzz input '{}': expected '<domain>_<ordinal>'", name);
  std::string domainText = name.substr(0, underscore);
  InputDomain domain;
  switch (domainText[0]) {
  case 's': domain.kind = InputDomain::Kind::Signed; break;
  case 'p': domain.kind = InputDomain::Kind::Positive; break;
  case 'n': domain.kind = InputDomain::Kind::NonNegative; break;
  case 'u': domain.kind = InputDomain::Kind::Unrounded; break;
  case 'w': domain.kind = InputDomain::Kind::Wild; break;
  case 'b': domain.kind = InputDomain::Kind::Bool; break;
  case 'k': {
    domain.kind = InputDomain::Kind::Index;
    size_t at = 1;
    while (at < domainText.size()) {
      size_t end = domainText.find('x', at);
      if (end == std::string::npos)
        end = domainText.size();
      std::string dim = domainText.substr(at, end - at);
      if (dim.empty() || dim.find_first_not_of("0123456789") != std::string::npos || dim.size() > 12)
        fail("fuzz input '{}': index domain '{}' is not k<dim>x<dim>...", name, domainText);
      domain.dims.push_back(std::stoll(dim));
      at = end + 1;
    }
    if (domain.dims.empty())
      fail("fuzz input '{}': index domain without dims", name);
    return domain;
  }
  default: fail("fuzz input '{}': unknown domain '{}'", name, domainText);
  }
  if (domainText.size() != 1)
    fail("fuzz input '{}': unknown domain '{}'", name, domainText);
  return domain;
}

Tensor makeInput(const TensorType &type, const InputDomain &domain, uint64_t seed) {
  Tensor tensor(type);
  std::mt19937_64 rng(seed);
  for (int64_t i = 0; i < tensor.numElements(); ++i) {
    if (isFloat(type.dtype) && domain.kind != InputDomain::Kind::Index)
      tensor.setDouble(i, floatValue(rng, domain));
    else if (isFloat(type.dtype))
      tensor.setDouble(i, static_cast<double>(intValue(rng, domain, i)));
    else
      tensor.setInt(i, intValue(rng, domain, i));
  }
  return tensor;
}

std::vector<Tensor> makeInputs(const ir::Graph &graph, uint64_t seed) {
  std::vector<Tensor> inputs;
  for (size_t i = 0; i < graph.inputs().size(); ++i) {
    const ir::Value *input = graph.inputs()[i];
    // Seeded by name, not position: a shrunk reproducer that drops inputs keeps the others' values.
    uint64_t nameHash = 0xCBF29CE484222325ull; // FNV-1a
    for (unsigned char c : input->name())
      nameHash = (nameHash ^ c) * 0x100000001B3ull;
    inputs.push_back(makeInput(input->type(), parseInputName(input->name()), mixSeed(seed ^ nameHash)));
  }
  return inputs;
}

} // namespace kiln::fuzz
