#pragma once
// .npy tensor files (numpy format versions 1.0-3.0, little-endian, C order), the exchange
// format of kiln's tools and tests. Reading validates everything against the file's length:
// a malformed or truncated file is a kiln::Error naming the file and the problem.
#include <string>

#include "core/Tensor.h"

namespace kiln::runtime {

Tensor readNpy(const std::string &path);
/// Parses .npy bytes; `what` names the source in errors.
Tensor parseNpy(const std::string &bytes, const std::string &what);
void writeNpy(const std::string &path, const Tensor &tensor);
std::string serializeNpy(const Tensor &tensor);

} // namespace kiln::runtime
