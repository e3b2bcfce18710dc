// TensorProto decoding. A TensorProto holds its elements in exactly one place: raw_data
// (little-endian bytes, the usual form), one typed repeated field chosen by the element type
// (the ONNX spec packs int8/uint8/int16/uint16/bool/float16/bfloat16 into int32_data and
// uint32/uint64 into uint64_data), or an external file. The integer types kiln lacks are
// widened as they are decoded (int16/uint16 to i32, uint32/uint64 to i64), every value
// checked to fit its ONNX type and the held one. Every count is checked against the declared
// dims before anything is copied, so a file cannot make the importer read past a buffer or
// allocate more than its own data holds.
#include "frontend/onnx/OnnxTensor.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstring>
#include <filesystem>
#include <limits>

#include "core/Error.h"
#include "core/ShapeMath.h"

namespace kiln::frontend {

namespace fs = std::filesystem;

std::optional<DType> dtypeFromOnnx(int32_t onnxType) {
  switch (onnxType) {
  case onnx::TensorProto::FLOAT:
    return DType::F32;
  case onnx::TensorProto::DOUBLE:
    return DType::F64;
  case onnx::TensorProto::FLOAT16:
    return DType::F16;
  case onnx::TensorProto::BFLOAT16:
    return DType::BF16;
  case onnx::TensorProto::INT64:
    return DType::I64;
  case onnx::TensorProto::INT32:
    return DType::I32;
  case onnx::TensorProto::INT8:
    return DType::I8;
  case onnx::TensorProto::UINT8:
    return DType::U8;
  case onnx::TensorProto::BOOL:
    return DType::Bool;
  default:
    return std::nullopt;
  }
}

std::optional<DType> heldDTypeFromOnnx(int32_t onnxType) {
  if (std::optional<DType> exact = dtypeFromOnnx(onnxType))
    return exact;
  switch (onnxType) {
  case onnx::TensorProto::INT16:
  case onnx::TensorProto::UINT16:
    return DType::I32;
  case onnx::TensorProto::UINT32:
  case onnx::TensorProto::UINT64:
    return DType::I64;
  default:
    return std::nullopt;
  }
}

DType heldDType(int32_t onnxType, const std::string &what) {
  std::optional<DType> dtype = heldDTypeFromOnnx(onnxType);
  if (!dtype)
    fail("{} is {}, which kiln cannot represent", what, onnxTypeName(onnxType));
  return *dtype;
}

bool isWidenedOnnxType(int32_t onnxType) { return !dtypeFromOnnx(onnxType) && heldDTypeFromOnnx(onnxType); }

int32_t dtypeToOnnx(DType dtype) {
  switch (dtype) {
  case DType::F32:
    return onnx::TensorProto::FLOAT;
  case DType::F64:
    return onnx::TensorProto::DOUBLE;
  case DType::F16:
    return onnx::TensorProto::FLOAT16;
  case DType::BF16:
    return onnx::TensorProto::BFLOAT16;
  case DType::I64:
    return onnx::TensorProto::INT64;
  case DType::I32:
    return onnx::TensorProto::INT32;
  case DType::I8:
    return onnx::TensorProto::INT8;
  case DType::U8:
    return onnx::TensorProto::UINT8;
  case DType::Bool:
    return onnx::TensorProto::BOOL;
  }
  return onnx::TensorProto::UNDEFINED;
}

std::string onnxTypeName(int32_t onnxType) {
  if (onnx::TensorProto::DataType_IsValid(onnxType)) {
    std::string name = onnx::TensorProto::DataType_Name(static_cast<onnx::TensorProto::DataType>(onnxType));
    for (char &c : name)
      c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    return name;
  }
  return fmt::format("unknown type {}", onnxType);
}

TensorType tensorProtoType(const onnx::TensorProto &proto, const std::string &what) {
  std::optional<DType> dtype = heldDTypeFromOnnx(proto.data_type());
  if (!dtype)
    fail("{} has element type {}, which kiln cannot represent", what, onnxTypeName(proto.data_type()));
  TensorType type{*dtype, Shape(proto.dims().begin(), proto.dims().end())};
  elementCount(type.shape, what); // no negative dim, and kiln's size limit, also beside a zero dim
  return type;
}

uint64_t checkedFileSize(const std::string &path, uint64_t maxBytes, const std::string &what) {
  std::error_code error;
  fs::file_status status = fs::status(path, error);
  if (error || !fs::exists(status))
    fail("no such file");
  if (!fs::is_regular_file(status))
    fail("not a regular file");
  uint64_t size = fs::file_size(path, error);
  if (error)
    fail("cannot read the file size: {}", error.message());
  if (size > maxBytes)
    fail("the {} has {} bytes, more than the limit of {}", what, size, maxBytes);
  return size;
}

std::string readFileLimited(const std::string &path, uint64_t maxBytes, const std::string &what) {
  uint64_t size = checkedFileSize(path, maxBytes, what);
  std::string bytes(static_cast<size_t>(size), '\0');
  FILE *file = std::fopen(path.c_str(), "rb");
  if (!file)
    fail("cannot open the {}: {}", what, std::strerror(errno));
  size_t got = size ? std::fread(bytes.data(), 1, bytes.size(), file) : 0;
  std::fclose(file);
  if (got != bytes.size())
    fail("cannot read the {}: got {} of {} bytes", what, got, size);
  return bytes;
}

// ---- external data ------------------------------------------------------------------------

std::string resolveExternalLocation(const std::string &modelDir, const std::string &location, const std::string &what) {
  if (modelDir.empty())
    fail("{} keeps its data in external file '{}', but the model has no folder to read it from", what, location);
  if (location.empty() || location.find('\0') != std::string::npos)
    fail("{}: external data location '{}' is not a file name", what, location);
  fs::path relative(location);
  if (relative.is_absolute())
    fail("{}: external data location '{}' is an absolute path; it must be relative to the model's folder", what,
         location);
  for (const fs::path &part : relative)
    if (part == "..")
      fail("{}: external data location '{}' contains '..'; it must stay inside the model's folder", what, location);
  // Symlinks anywhere on the way are resolved before the containment check, so a link that
  // points outside the folder is caught however it is spelled.
  std::error_code error;
  fs::path dir = fs::canonical(modelDir, error);
  if (error)
    fail("{}: cannot resolve the model folder '{}': {}", what, modelDir, error.message());
  fs::path file = fs::canonical(dir / relative, error);
  if (error)
    fail("{}: external data file '{}' cannot be opened: {}", what, location, error.message());
  auto [dirEnd, fileIt] = std::mismatch(dir.begin(), dir.end(), file.begin(), file.end());
  if (dirEnd != dir.end() || fileIt == file.end())
    fail("{}: external data file '{}' resolves to '{}', outside the model's folder '{}'", what, location, file.string(),
         dir.string());
  // A FIFO or a device would block or never end when read; a folder cannot be read at all.
  if (!fs::is_regular_file(file, error))
    fail("{}: external data '{}' is not a regular file", what, location);
  return file.string();
}

namespace {

/// Parses a non-negative decimal from an external_data entry; anything else is an error.
uint64_t parseByteCount(const std::string &text, const std::string &key, const std::string &what) {
  if (text.empty() || text.size() > 19 || text.find_first_not_of("0123456789") != std::string::npos)
    fail("{}: external data '{}' is '{}', not a byte count", what, key, text);
  return std::stoull(text);
}

/// An external data file opened and validated (location, links, byte range) before the
/// tensor is allocated, so a tensor's dims can never make kiln allocate more than the file
/// holds.
class ExternalData {
public:
  ExternalData(const onnx::TensorProto &proto, const std::string &modelDir, const std::string &what, uint64_t bytes)
      : what_(what), bytes_(bytes) {
    std::optional<uint64_t> length;
    for (const auto &entry : proto.external_data()) {
      if (entry.key() == "location")
        location_ = entry.value();
      else if (entry.key() == "offset")
        offset_ = parseByteCount(entry.value(), "offset", what);
      else if (entry.key() == "length")
        length = parseByteCount(entry.value(), "length", what);
    }
    if (location_.empty())
      fail("{} is stored externally but names no location", what);
    std::string path = resolveExternalLocation(modelDir, location_, what);
    // O_NOFOLLOW: the canonical path has no links left; if one appeared since, refuse it.
    // O_NONBLOCK: should a FIFO have replaced the file since, opening it must not wait for a
    // writer (fstat below refuses it); for a regular file the flag changes nothing.
    fd_ = ::open(path.c_str(), O_RDONLY | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK);
    if (fd_ < 0)
      fail("{}: cannot open external data file '{}': {}", what, location_, std::strerror(errno));
    struct stat info {};
    if (::fstat(fd_, &info) != 0 || !S_ISREG(info.st_mode))
      fail("{}: external data '{}' is not a regular file", what, location_);
    // A second hard link could be a name for a file outside the folder.
    if (info.st_nlink > 1)
      fail("{}: external data file '{}' has {} hard links; kiln reads only files with one", what, location_,
           static_cast<uint64_t>(info.st_nlink));
    auto fileSize = static_cast<uint64_t>(info.st_size);
    if (length && *length != bytes)
      fail("{}: external data length {} differs from the {} bytes its type needs", what, *length, bytes);
    if (offset_ > fileSize || bytes > fileSize - offset_)
      fail("{}: external data '{}' needs bytes [{}, {}) but the file has only {}", what, location_, offset_,
           offset_ + bytes, fileSize);
  }
  ~ExternalData() {
    if (fd_ >= 0)
      ::close(fd_);
  }
  ExternalData(const ExternalData &) = delete;
  ExternalData &operator=(const ExternalData &) = delete;

  void readInto(void *out) const {
    auto *dst = static_cast<char *>(out);
    for (uint64_t done = 0; done < bytes_;) {
      ssize_t got = ::pread(fd_, dst + done, bytes_ - done, static_cast<off_t>(offset_ + done));
      if (got <= 0)
        fail("{}: reading external data '{}' failed at byte {}", what_, location_, offset_ + done);
      done += static_cast<uint64_t>(got);
    }
  }

private:
  std::string what_, location_;
  uint64_t offset_ = 0, bytes_ = 0;
  int fd_ = -1;
};

/// The name of a TensorProto's element type in messages: kiln's where kiln has the type,
/// ONNX's for the widened ones ("uint16", not the "i32" that holds it).
std::string elementTypeName(int32_t onnxType) {
  std::optional<DType> exact = dtypeFromOnnx(onnxType);
  return exact ? std::string(dtypeName(*exact)) : onnxTypeName(onnxType);
}

/// int32_data packs the small types one element per entry; the value must fit the type.
void decodeInt32Field(const onnx::TensorProto &proto, Tensor &out, const std::string &what) {
  int64_t count = out.numElements(); // the field's size was checked against it
  DType dtype = out.dtype();
  int32_t lo = std::numeric_limits<int32_t>::min(), hi = std::numeric_limits<int32_t>::max();
  switch (proto.data_type()) {
  case onnx::TensorProto::INT8:
    lo = -128, hi = 127;
    break;
  case onnx::TensorProto::UINT8:
    lo = 0, hi = 255;
    break;
  case onnx::TensorProto::BOOL:
    lo = 0, hi = 1;
    break;
  case onnx::TensorProto::INT16:
    lo = -32768, hi = 32767;
    break;
  case onnx::TensorProto::UINT16:
  case onnx::TensorProto::FLOAT16: // the 16 bits of the value
  case onnx::TensorProto::BFLOAT16:
    lo = 0, hi = 0xFFFF;
    break;
  default:
    break;
  }
  for (int64_t i = 0; i < count; ++i) {
    int32_t v = proto.int32_data(static_cast<int>(i));
    if (v < lo || v > hi)
      fail("{}: int32_data[{}] = {} does not fit {}", what, i, v, elementTypeName(proto.data_type()));
    if (dtype == DType::F16 || dtype == DType::BF16)
      out.dataAs<uint16_t>()[i] = static_cast<uint16_t>(v);
    else
      out.setInt(i, v);
  }
}

/// Stores a decoded uint32/uint64 element in its i64, refusing a uint64 that i64 cannot hold.
void setHeldUnsigned(Tensor &out, int64_t i, uint64_t v, const std::string &what) {
  if (v > static_cast<uint64_t>(std::numeric_limits<int64_t>::max()))
    fail("{}: element {} (flat) is {}, above {}, the largest uint64 kiln can hold (it holds uint64 as i64)", what, i,
         v, std::numeric_limits<int64_t>::max());
  out.setInt(i, static_cast<int64_t>(v));
}

/// uint64_data holds uint32 and uint64 one element per entry; kiln holds both in i64, so a
/// uint64 above INT64_MAX is refused.
void decodeUint64Field(const onnx::TensorProto &proto, Tensor &out, const std::string &what) {
  int64_t count = out.numElements(); // the field's size was checked against it
  for (int64_t i = 0; i < count; ++i) {
    uint64_t v = proto.uint64_data(static_cast<int>(i));
    if (proto.data_type() == onnx::TensorProto::UINT32 && v > std::numeric_limits<uint32_t>::max())
      fail("{}: uint64_data[{}] = {} does not fit uint32", what, i, v);
    setHeldUnsigned(out, i, v, what);
  }
}

template <typename T> T loadElement(const char *bytes, int64_t i) {
  T value;
  std::memcpy(&value, bytes + static_cast<size_t>(i) * sizeof(T), sizeof(T));
  return value;
}

/// Widens the little-endian int16/uint16/uint32/uint64 elements of raw_data or an external
/// file into `out` (i32 or i64); `bytes` holds exactly out.numElements() of them.
void widenStoredElements(const char *bytes, int32_t onnxType, Tensor &out, const std::string &what) {
  int64_t count = out.numElements();
  for (int64_t i = 0; i < count; ++i) {
    switch (onnxType) {
    case onnx::TensorProto::INT16:
      out.setInt(i, loadElement<int16_t>(bytes, i));
      break;
    case onnx::TensorProto::UINT16:
      out.setInt(i, loadElement<uint16_t>(bytes, i));
      break;
    case onnx::TensorProto::UINT32:
      out.setInt(i, loadElement<uint32_t>(bytes, i));
      break;
    default: // uint64
      setHeldUnsigned(out, i, loadElement<uint64_t>(bytes, i), what);
      break;
    }
  }
}

/// Bytes one element occupies in raw_data or an external file: the ONNX type's own size,
/// which for the widened types is smaller than (or, for uint64, equal to) the held one.
uint64_t storedElementBytes(int32_t onnxType, DType held) {
  switch (onnxType) {
  case onnx::TensorProto::INT16:
  case onnx::TensorProto::UINT16:
    return 2;
  case onnx::TensorProto::UINT32:
    return 4;
  case onnx::TensorProto::UINT64:
    return 8;
  default:
    return dtypeSize(held);
  }
}

/// How many values the typed field that the spec assigns to the proto's element type holds.
int64_t typedFieldSize(const onnx::TensorProto &proto) {
  switch (proto.data_type()) {
  case onnx::TensorProto::FLOAT:
    return proto.float_data_size();
  case onnx::TensorProto::DOUBLE:
    return proto.double_data_size();
  case onnx::TensorProto::INT64:
    return proto.int64_data_size();
  case onnx::TensorProto::UINT32:
  case onnx::TensorProto::UINT64:
    return proto.uint64_data_size();
  default: // int32, int16, uint16, int8, uint8, bool, float16, bfloat16
    return proto.int32_data_size();
  }
}

const char *typedFieldName(int32_t onnxType) {
  switch (onnxType) {
  case onnx::TensorProto::FLOAT:
    return "float_data";
  case onnx::TensorProto::DOUBLE:
    return "double_data";
  case onnx::TensorProto::INT64:
    return "int64_data";
  case onnx::TensorProto::UINT32:
  case onnx::TensorProto::UINT64:
    return "uint64_data";
  default:
    return "int32_data";
  }
}

} // namespace

Tensor decodeTensorProto(const onnx::TensorProto &proto, const std::string &modelDir, const std::string &what,
                         Tensor liftedRawData) {
  TensorType type = tensorProtoType(proto, what);
  if (proto.has_segment())
    fail("{} is a segment of a larger tensor, which kiln does not support", what);
  int32_t onnxType = proto.data_type();
  bool widened = isWidenedOnnxType(onnxType);
  int64_t count = type.numElements();
  auto bytes = static_cast<uint64_t>(
      checkedMul(count, static_cast<int64_t>(storedElementBytes(onnxType, type.dtype)), what)); // at most 2^51
  // The raw bytes: the proto's raw_data, or the payload read apart in its stead.
  const bool lifted = liftedRawData.defined();
  const bool hasRaw = lifted || proto.has_raw_data();
  const char *raw = lifted ? static_cast<const char *>(liftedRawData.data()) : proto.raw_data().data();
  const uint64_t rawBytes = lifted ? liftedRawData.byteSize() : proto.raw_data().size();
  // Every size is checked against the data actually present before anything is allocated.
  bool external = proto.data_location() == onnx::TensorProto::EXTERNAL;
  int64_t typedCount = typedFieldSize(proto);
  if ((external || hasRaw) && typedCount > 0)
    fail("{} has data both in {} and in {}", what, typedFieldName(onnxType),
         external ? "an external file" : "raw_data");
  std::optional<ExternalData> file;
  if (external)
    file.emplace(proto, modelDir, what, bytes);
  else if (hasRaw && rawBytes != bytes)
    fail("{} has {} bytes of raw_data but its type {}{} needs {}", what, rawBytes, elementTypeName(onnxType),
         shapeToString(type.shape), bytes);
  else if (!hasRaw && typedCount != count)
    fail("{} holds {} values in {} but its dims need {}", what, typedCount, typedFieldName(onnxType), count);

  // Lifted bytes of the held type become the tensor in place: the weights are not copied again.
  const bool adopt = lifted && !external && !widened;
  Tensor out = adopt ? liftedRawData.viewAs(type) : Tensor(type);
  if ((file || hasRaw) && widened) {
    std::string stored;
    if (file) {
      stored.resize(static_cast<size_t>(bytes));
      file->readInto(stored.data());
    }
    widenStoredElements(file ? stored.data() : raw, onnxType, out, what);
  } else if (file) {
    file->readInto(out.data());
  } else if (hasRaw) {
    if (bytes && !adopt)
      std::memcpy(out.data(), raw, bytes);
  } else {
    switch (onnxType) {
    case onnx::TensorProto::FLOAT:
      std::copy(proto.float_data().begin(), proto.float_data().end(), out.dataAs<float>());
      break;
    case onnx::TensorProto::DOUBLE:
      std::copy(proto.double_data().begin(), proto.double_data().end(), out.dataAs<double>());
      break;
    case onnx::TensorProto::INT64:
      std::copy(proto.int64_data().begin(), proto.int64_data().end(), out.dataAs<int64_t>());
      break;
    case onnx::TensorProto::INT32:
      std::copy(proto.int32_data().begin(), proto.int32_data().end(), out.dataAs<int32_t>());
      break;
    case onnx::TensorProto::UINT32:
    case onnx::TensorProto::UINT64:
      decodeUint64Field(proto, out, what);
      break;
    default: // int8, uint8, int16, uint16, bool, float16, bfloat16
      decodeInt32Field(proto, out, what);
      break;
    }
  }
  if (type.dtype == DType::Bool && (file || hasRaw)) // any non-zero byte is true; kiln stores 0/1
    for (int64_t i = 0; i < count; ++i)
      out.dataAs<uint8_t>()[i] = out.dataAs<uint8_t>()[i] != 0;
  return out;
}

} // namespace kiln::frontend
