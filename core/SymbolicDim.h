#pragma once
// Symbolic dimensions: a dim that is a named size (`N`, `S`) or a polynomial of them with
// integer coefficients (`N*S`, `2*N`, `N+M+1`), for models whose batch or sequence length
// varies. Shapes stay `std::vector<int64_t>`: a dim >= 0 is a constant extent as always, and a
// dim <= kSymbolicDimBase stands for an interned expression. So the static path costs nothing,
// equal expressions are equal int64s (broadcasting and matmul compare dims with ==), and code
// that is not symbol-aware refuses a symbolic dim through the checks it already has (a
// negative dim fails elementCount, core/ShapeMath.h, with a message naming the symbol).
//
// Expressions are kept canonical (a sum of monomials, each a sorted product of symbol names
// times a coefficient), so N*S and S*N are one dim. An expression with no symbol left is a
// plain constant dim. The table is process-wide and thread-safe; ids are stable for the
// process but not meaningful across processes (the text IR writes expressions by name).
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/DType.h"

namespace kiln {

/// Dims at or below this value are symbolic; every other negative value stays invalid.
inline constexpr int64_t kSymbolicDimBase = -(int64_t(1) << 62);

inline bool isSymbolicDim(int64_t dim) { return dim <= kSymbolicDimBase; }
/// Whether `dim` names an expression of this process's table: a value in the symbolic range
/// that names none (INT64_MIN read from a file) is an invalid negative dim, not a symbol.
bool isInternedSymbolicDim(int64_t dim);
/// True when no dim of `shape` is symbolic (the common, static case).
bool isStaticShape(const Shape &shape);
bool isStaticType(const TensorType &type);
/// Whether a concrete `shape` fits `declared`: the same rank, each dim equal to the declared
/// one or taking a symbolic dim's place (any extent: a model that serves every batch). Whether
/// the extents agree on a symbol is the binding's or the executable's check.
bool shapeFits(const Shape &shape, const Shape &declared);

/// The dim for the symbol `name` (an identifier: [A-Za-z_][A-Za-z0-9_]*, not a dtype name);
/// anything else is a kiln::Error.
int64_t symbolDim(std::string_view name);
/// Whether `name` may name a symbol.
bool isValidSymbolName(std::string_view name);

/// "8", "N", "2*N*S", "N+M+1": how the text IR and error messages write a dim. A value in the
/// symbolic range that names no expression (INT64_MIN as a slice bound) prints as a number.
std::string dimToString(int64_t dim);

/// Symbolic arithmetic; constant operands use checked arithmetic (core/ShapeMath.h), and a
/// coefficient that leaves int64 is a kiln::Error naming `what`.
int64_t dimMul(int64_t a, int64_t b, std::string_view what);
int64_t dimAdd(int64_t a, int64_t b, std::string_view what);
/// a / b when b divides a exactly as polynomials (b a single monomial, or a constant); nullopt
/// when it does not (or b is 0).
std::optional<int64_t> dimDivExact(int64_t a, int64_t b);
/// The product of shape[from, to), symbolic or not; constant products are checked against
/// kiln's limit like elementCount.
int64_t dimProduct(const Shape &shape, size_t from, size_t to, std::string_view what);

/// The symbol names a dim mentions, sorted (empty for a constant).
std::vector<std::string> dimSymbols(int64_t dim);
/// When `dim` is exactly one symbol (not an expression), its name.
std::optional<std::string> dimSymbolName(int64_t dim);

/// Extents given to symbols: name -> size.
using DimBindings = std::map<std::string, int64_t>;
/// The extent of `dim` under `bindings` (a constant dim is itself); a symbol missing from the
/// bindings, or a result outside [0, kMaxElements], is a kiln::Error naming `what` and the dim.
int64_t evaluateDim(int64_t dim, const DimBindings &bindings, std::string_view what);
/// Every dim of `shape` evaluated.
Shape evaluateShape(const Shape &shape, const DimBindings &bindings, std::string_view what);

/// A kiln::Error unless shape[axis] is constant: "WHAT needs a static dim AXIS, got N".
int64_t requireStaticDim(const Shape &shape, size_t axis, std::string_view what);
/// A kiln::Error naming the first symbolic dim unless the whole shape is static.
void requireStaticShape(const Shape &shape, std::string_view what);

} // namespace kiln
