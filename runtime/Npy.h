#pragma once
// .npy tensor files (numpy format versions 1.0-3.0, little-endian, C order), the exchange
// format of kiln's tools and tests. Reading validates everything against the file's length:
// a malformed or truncated file is a kiln::Error naming the file and the problem. A file too
// large to read whole is mapped instead (runtime/MappedNpy.h), with the same checks.
#include <cstddef>
#include <cstdint>
#include <string>

#include "core/Tensor.h"

namespace kiln::runtime {

Tensor readNpy(const std::string &path);
/// Parses .npy bytes; `what` names the source in errors.
Tensor parseNpy(const std::string &bytes, const std::string &what);
void writeNpy(const std::string &path, const Tensor &tensor);
std::string serializeNpy(const Tensor &tensor);

/// What a .npy header says: the elements' type and where they start.
struct NpyHeader {
  TensorType type;
  size_t dataOffset = 0;
};
/// Parses the header of the `size` bytes of a whole .npy file at `bytes` and checks that the
/// data after it is exactly the size the shape needs. kiln::Error naming `what` otherwise.
NpyHeader parseNpyHeader(const char *bytes, size_t size, const std::string &what);
/// kiln's bool elements are 0 or 1; numpy's may be any non-zero byte for true: makes them so.
void normalizeBools(unsigned char *flags, int64_t count);

} // namespace kiln::runtime
