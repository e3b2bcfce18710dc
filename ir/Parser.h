#pragma once
// Parser for the .kir text form written by ir/Printer.h. Every error is a kiln::Error of the
// form "FILE:LINE:COL: message"; the parsed graph is verified before it is returned.
#include <memory>
#include <string>
#include <string_view>

#include "ir/Graph.h"

namespace kiln::ir {

std::unique_ptr<Graph> parseGraph(std::string_view text, const std::string &sourceName = "<input>");
std::unique_ptr<Graph> parseGraphFile(const std::string &path);

} // namespace kiln::ir
