#pragma once
// kiln::Error is the one exception type for everything a user can cause: malformed input,
// unsupported ops, shape mismatches, missing files. Its message names what and where, so the
// tools can print it as one line.
#include <stdexcept>
#include <string>

#include <fmt/format.h>

namespace kiln {

class Error : public std::runtime_error {
public:
  explicit Error(const std::string &message) : std::runtime_error(message) {}
};

/// Throws kiln::Error with a fmt-formatted message.
template <typename... Args>
[[noreturn]] void fail(fmt::format_string<Args...> format, Args &&...args) {
  throw Error(fmt::format(format, std::forward<Args>(args)...));
}

} // namespace kiln
