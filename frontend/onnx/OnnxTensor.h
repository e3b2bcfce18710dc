#pragma once
// ONNX tensors and element types on the kiln side: the dtype mapping, TensorProto decoding
// (raw_data, the typed fields, and external data confined to the model's folder), and the
// size-limited file reading that every ONNX file goes through.
#include <cstdint>
#include <optional>
#include <string>

#include <onnx/onnx_pb.h>

#include "core/Tensor.h"

namespace kiln::frontend {

/// The kiln dtype that *is* an ONNX TensorProto::DataType, or nullopt where kiln has none
/// (strings, complex, uint16/32/64, int16, the float8 types).
std::optional<DType> dtypeFromOnnx(int32_t onnxType);
/// The kiln dtype that holds values of an ONNX element type: the exact one where kiln has it,
/// else a wider integer (int16 and uint16 in i32, uint32 and uint64 in i64; a uint64 above
/// INT64_MAX cannot be held and is refused when decoded). nullopt for strings, complex, float8.
/// A widened value is exact only as long as no op wraps around in the narrow type, which the
/// import scan (OnnxUnsupported.cpp) ensures.
std::optional<DType> heldDTypeFromOnnx(int32_t onnxType);
/// heldDTypeFromOnnx, failing with "`what` is TYPE, which kiln cannot represent" for nullopt.
DType heldDType(int32_t onnxType, const std::string &what);
/// Whether kiln holds the ONNX element type widened (int16, uint16, uint32, uint64).
bool isWidenedOnnxType(int32_t onnxType);
/// The ONNX TensorProto::DataType of a kiln dtype.
int32_t dtypeToOnnx(DType dtype);
/// ONNX's own name of an element type ("uint16"), for messages.
std::string onnxTypeName(int32_t onnxType);

/// Decodes `proto` into a tensor of its held dtype (heldDTypeFromOnnx). External data is read
/// from under `modelDir` (the model's folder; empty refuses external data). `what` names the
/// tensor in errors. `liftedRawData`, when defined, is the proto's raw_data read apart from it
/// (OnnxPayloads.h: a u8 tensor, used instead of the placeholder the proto holds); a tensor of
/// the held dtype is then those bytes, not a copy, and may alter them (bools become 0/1).
Tensor decodeTensorProto(const onnx::TensorProto &proto, const std::string &modelDir, const std::string &what,
                         Tensor liftedRawData = {});

/// The kiln type that holds a TensorProto (its held dtype), without reading its data. Fails
/// naming `what` for a dtype kiln cannot hold, a negative dim, or a shape past kiln's size
/// limit (core/ShapeMath.h).
TensorType tensorProtoType(const onnx::TensorProto &proto, const std::string &what);

/// Checks that an external-data `location` is a relative path that stays inside `modelDir`
/// (symlinks resolved) and names a regular file with a single link; returns its canonical
/// path. Does not read the file.
std::string resolveExternalLocation(const std::string &modelDir, const std::string &location, const std::string &what);

/// The size of the file at `path`, after readFileLimited's checks (a regular file of at most
/// `maxBytes` bytes), for a caller that reads it itself.
uint64_t checkedFileSize(const std::string &path, uint64_t maxBytes, const std::string &what);

/// Reads a whole file, refusing anything but a regular file of at most `maxBytes` bytes
/// before reading it. Messages do not name the path: callers prefix it. `what` names the
/// kind of file ("ONNX model").
std::string readFileLimited(const std::string &path, uint64_t maxBytes, const std::string &what);

} // namespace kiln::frontend
