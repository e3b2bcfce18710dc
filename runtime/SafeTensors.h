#pragma once
// .safetensors files (Hugging Face's format): an 8-byte little-endian header length N, N bytes
// of JSON header, then the raw little-endian tensor data. The header maps each tensor name to
// {"dtype": "F32", "shape": [2, 3], "data_offsets": [begin, end]} (byte offsets into the data
// section) and may hold "__metadata__": {string: string}.
//
// Reading validates everything against the file's length before touching data: a header length
// past the end, malformed JSON, an unknown dtype, a shape whose byte size differs from its
// offsets, offsets outside the data or overlapping, or data bytes no tensor claims are a
// kiln::Error naming the file (and the tensor). kiln's dtypes map to F32, F64, F16, BF16, I64,
// I32, I8, U8 and BOOL.
#include <map>
#include <string>

#include "core/Tensor.h"

namespace kiln::runtime {

/// Tensors by name (sorted: the file lists them, and lays out their data, in name order).
using NamedTensors = std::map<std::string, Tensor>;

std::string serializeSafeTensors(const NamedTensors &tensors, const std::map<std::string, std::string> &metadata = {});
/// Parses .safetensors bytes; `what` names the source in errors. `metadata`, when given,
/// receives the "__metadata__" entries.
NamedTensors parseSafeTensors(const std::string &bytes, const std::string &what,
                              std::map<std::string, std::string> *metadata = nullptr);

void writeSafeTensors(const std::string &path, const NamedTensors &tensors,
                      const std::map<std::string, std::string> &metadata = {});
NamedTensors readSafeTensors(const std::string &path, std::map<std::string, std::string> *metadata = nullptr);

} // namespace kiln::runtime
