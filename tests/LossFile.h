#pragma once
// The losses a PyTorch script wrote for a training check, one per line (tests/training,
// tests/distributed/resnet18): kiln::Error when the file is missing, empty or holds anything
// but numbers.
#include <fstream>
#include <string>
#include <vector>

#include "core/Error.h"

namespace kiln::test {

inline std::vector<double> readLosses(const std::string &path) {
  std::ifstream file(path);
  if (!file)
    fail("cannot open the loss file '{}'", path);
  std::vector<double> losses;
  double loss = 0;
  while (file >> loss)
    losses.push_back(loss);
  if (!file.eof() || losses.empty())
    fail("'{}' must hold one loss per line", path);
  return losses;
}

} // namespace kiln::test
