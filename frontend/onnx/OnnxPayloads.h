#pragma once
// Reading an ONNX model with its weights kept apart from protobuf. A model's initializers hold
// nearly all of its bytes, in raw_data. Parsed whole, each of those bytes was held three times
// while importing (the file's bytes, the ModelProto's string, the kiln tensor: BERT-base's 340 MB
// peaked at 1 GB), and a raw_data over 50 MB grew by doubling inside protobuf, a transient
// copy of up to its own size on top. Split instead: the main graph's large raw_data payloads are
// read from the file straight into the storage of the tensors that will hold them, and
// protobuf parses what is left, the skeleton, in which each lifted raw_data is one placeholder
// byte (ONNX's checker wants a tensor's data field non-empty). Nothing else changes: every
// other byte reaches protobuf as the file has it, so a model parses to the same ModelProto but
// for those placeholders.
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "core/Tensor.h"

namespace kiln::frontend {

/// raw_data payloads of at least this many bytes are lifted. ONNX's shape inference reads the
/// values of some initializers (shapes, axes, pads, scales, sizes, split sizes, repeats, scalars),
/// each a few dozen bytes at most: none comes near this, so none is ever a placeholder.
inline constexpr uint64_t kMinLiftedPayloadBytes = uint64_t{64} << 10;

/// The model's lifted payloads, by position among the main graph's initializers: the bytes of
/// that initializer's raw_data as a u8 tensor (decodeTensorProto views them as the tensor's own
/// type), or an undefined tensor where the skeleton holds the initializer's data as the file did.
using LiftedPayloads = std::vector<Tensor>;

/// Splits the serialized ModelProto `bytes`: the skeleton, with the payloads of at least
/// `minLiftedBytes` copied out into `payloads` (tests lift smaller ones to compare the split
/// with a whole parse). nullopt, `payloads` empty, where the wire format is anything but plain
/// (malformed, truncated, deprecated groups, a tensor with raw_data twice): protobuf then
/// parses `bytes` whole and reports what is wrong.
std::optional<std::string> splitOnnxBytes(const std::string &bytes, LiftedPayloads &payloads,
                                          uint64_t minLiftedBytes = kMinLiftedPayloadBytes);

/// Reads the ONNX model file at `path` (readFileLimited's checks and `maxBytes` limit) split:
/// the payloads are read straight into `payloads`, and the skeleton is returned. A file that is
/// not plain (as splitOnnxBytes) is read whole instead, `payloads` left empty.
std::string readOnnxFileSplit(const std::string &path, uint64_t maxBytes, LiftedPayloads &payloads);

} // namespace kiln::frontend
