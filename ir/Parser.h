#pragma once
// Parser for the .kir text form written by ir/Printer.h. Every error is a kiln::Error of the
// form "FILE:LINE:COL: message"; the parsed graph is verified before it is returned.
//
// Kernel bodies (see ir/Printer.h) are the grammar's only nesting, one level deep: a kernel
// inside a body is an error. So the parser never recurses on the input's nesting,
// reads each byte a bounded number of times, and allocates in proportion to the input, so no
// input can overflow the stack or hang it. Types are held to kiln's size limit
// (core/ShapeMath.h: each dim and the product of the non-zero dims at most kMaxElements,
// 2^48), checked dim by dim so that the error points at the dim, and to kMaxParseRank dims.
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>

#include "ir/Graph.h"

namespace kiln::ir {

inline constexpr size_t kMaxParseInputBytes = size_t(1) << 30;
inline constexpr int64_t kMaxParseRank = 64;

/// Value names in the text become Value::name(), except numeric ones (%0, %12), which are the
/// printer's numbering of unnamed values. Graph inputs need real names.
std::unique_ptr<Graph> parseGraph(std::string_view text, const std::string &sourceName = "<input>");
/// Reads and parses a file; "-" reads standard input. A missing file is a kiln::Error.
std::unique_ptr<Graph> parseGraphFile(const std::string &path);

} // namespace kiln::ir
