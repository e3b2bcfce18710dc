#pragma once
// Expecting a kiln::Error: the one helper the test areas share, so that every "this input is
// refused with a message naming X" check reads and reports the same way.
#include <functional>
#include <string>

#include <gtest/gtest.h>

#include "ir/Error.h"

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

} // namespace kiln::test
