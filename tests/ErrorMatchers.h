#pragma once
// Expecting a kiln::Error: the helpers the test areas share, so that every "this input is
// refused with a message naming X" check reads and reports the same way.
#include <functional>
#include <string>

#include <gtest/gtest.h>

#include "core/Error.h"

namespace kiln::test {

/// Runs `fn` and expects it to throw a kiln::Error whose message contains `needle`.
inline void expectErrorContaining(const std::function<void()> &fn, const std::string &needle) {
  try {
    fn();
    ADD_FAILURE() << "expected a kiln::Error containing \"" << needle << "\"";
  } catch (const Error &error) {
    EXPECT_NE(std::string(error.what()).find(needle), std::string::npos) << error.what();
  }
}

/// The message of the kiln::Error `fn` throws, or "" when it throws none.
inline std::string errorOf(const std::function<void()> &fn) {
  try {
    fn();
  } catch (const Error &error) {
    return error.what();
  }
  return "";
}

} // namespace kiln::test
