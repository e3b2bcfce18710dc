// Splitting an ONNX model's large raw_data payloads from the rest (see OnnxPayloads.h). The
// splitter walks protobuf's wire format three messages deep (ModelProto.graph = 7,
// GraphProto.initializer = 5, TensorProto.raw_data = 9, from onnx.proto) and copies every other
// field through unchanged. Each rewritten message gets its new length; lengths are re-encoded
// minimally, which protobuf parses the same. Every length is checked against what is left of
// its enclosing message before anything is read or allocated, so a malformed file can make the
// splitter give up, never read past its input or allocate more than the input holds.
#include "frontend/onnx/OnnxPayloads.h"

#include <cstdio>
#include <cstring>

#include "core/Error.h"
#include "frontend/onnx/OnnxTensor.h"

namespace kiln::frontend {

namespace {

constexpr uint64_t kModelGraphField = 7;
constexpr uint64_t kGraphInitializerField = 5;
constexpr uint64_t kTensorRawDataField = 9;

enum WireType : uint64_t { kVarint = 0, kFixed64 = 1, kLengthDelimited = 2, kFixed32 = 5 };

/// The message being walked: what its fields are rewritten into.
enum class Level { Model, Graph, Tensor };

/// Bytes read front to back from memory or from a file.
class WireReader {
public:
  WireReader(const char *data, uint64_t size) : data_(data), left_(size) {}
  WireReader(std::FILE *file, uint64_t size) : file_(file), left_(size) {}

  uint64_t left() const { return left_; }

  /// Reads `n` bytes into `out`; false when fewer are left or the file read fails.
  bool read(void *out, uint64_t n) {
    if (n > left_)
      return false;
    if (file_) {
      if (n > 0 && std::fread(out, 1, static_cast<size_t>(n), file_) != n)
        return false;
    } else {
      std::memcpy(out, data_, static_cast<size_t>(n));
      data_ += n;
    }
    left_ -= n;
    return true;
  }

private:
  const char *data_ = nullptr;
  std::FILE *file_ = nullptr;
  uint64_t left_;
};

void appendVarint(std::string &out, uint64_t value) {
  while (value >= 0x80) {
    out.push_back(static_cast<char>((value & 0x7f) | 0x80));
    value >>= 7;
  }
  out.push_back(static_cast<char>(value));
}

class Splitter {
public:
  Splitter(WireReader &in, LiftedPayloads &payloads, uint64_t minLiftedBytes)
      : in_(in), payloads_(payloads), minLiftedBytes_(minLiftedBytes) {}

  /// Copies the fields of a message of `size` bytes into `out`, rewriting as `level` says.
  /// False on anything but plain wire format.
  bool message(Level level, uint64_t size, std::string &out) {
    uint64_t left = size;
    bool sawRawData = false;
    while (left > 0) {
      uint64_t tag = 0;
      if (!varint(tag, left, &out) || tag >> 3 == 0 || tag > UINT32_MAX)
        return false;
      const uint64_t field = tag >> 3;
      switch (tag & 7) {
      case kVarint: {
        uint64_t value = 0;
        if (!varint(value, left, &out))
          return false;
        break;
      }
      case kFixed64:
        if (!copy(8, left, out))
          return false;
        break;
      case kFixed32:
        if (!copy(4, left, out))
          return false;
        break;
      case kLengthDelimited: {
        uint64_t length = 0;
        if (!varint(length, left, nullptr) || length > left)
          return false;
        if (level == Level::Tensor && field == kTensorRawDataField) {
          // protobuf keeps the last of repeated singular fields; one is the plain case.
          if (sawRawData)
            return false;
          sawRawData = true;
          if (length >= minLiftedBytes_) {
            if (!lift(length, left, out))
              return false;
            break;
          }
        }
        if (level == Level::Model && field == kModelGraphField) {
          if (!nested(Level::Graph, length, left, out))
            return false;
        } else if (level == Level::Graph && field == kGraphInitializerField) {
          payloads_.emplace_back(); // this initializer's entry, filled if its raw_data is lifted
          if (!nested(Level::Tensor, length, left, out))
            return false;
        } else {
          appendVarint(out, length);
          if (!copy(length, left, out))
            return false;
        }
        break;
      }
      default: // groups (3, 4) and the unused wire types
        return false;
      }
    }
    return true;
  }

private:
  /// A varint of at most 10 bytes, its bytes appended to `copyTo` when given.
  bool varint(uint64_t &value, uint64_t &left, std::string *copyTo) {
    value = 0;
    for (int shift = 0; shift < 70; shift += 7) {
      unsigned char byte = 0;
      if (left == 0 || !in_.read(&byte, 1))
        return false;
      --left;
      if (copyTo)
        copyTo->push_back(static_cast<char>(byte));
      value |= static_cast<uint64_t>(byte & 0x7f) << shift;
      if (!(byte & 0x80))
        return true;
    }
    return false;
  }

  bool copy(uint64_t n, uint64_t &left, std::string &out) {
    if (n > left)
      return false;
    size_t at = out.size();
    out.resize(at + static_cast<size_t>(n));
    if (!in_.read(out.data() + at, n))
      return false;
    left -= n;
    return true;
  }

  /// A nested message of `length` bytes, rewritten into a buffer of its own since its new
  /// length goes first.
  bool nested(Level level, uint64_t length, uint64_t &left, std::string &out) {
    std::string inner;
    if (!message(level, length, inner))
      return false;
    left -= length;
    appendVarint(out, inner.size());
    out += inner;
    return true;
  }

  /// Reads a raw_data payload of `length` bytes into the current initializer's entry and writes
  /// the one-byte placeholder in its stead.
  bool lift(uint64_t length, uint64_t &left, std::string &out) {
    if (payloads_.empty()) // a TensorProto outside an initializer is never walked
      return false;
    Tensor payload(DType::U8, {static_cast<int64_t>(length)});
    if (!in_.read(payload.data(), length))
      return false;
    left -= length;
    payloads_.back() = std::move(payload);
    appendVarint(out, 1);
    out.push_back('\0');
    return true;
  }

  WireReader &in_;
  LiftedPayloads &payloads_;
  uint64_t minLiftedBytes_;
};

std::optional<std::string> split(WireReader &in, LiftedPayloads &payloads, uint64_t minLiftedBytes) {
  payloads.clear();
  std::string skeleton;
  Splitter splitter(in, payloads, minLiftedBytes);
  if (!splitter.message(Level::Model, in.left(), skeleton)) {
    payloads.clear();
    return std::nullopt;
  }
  return skeleton;
}

} // namespace

std::optional<std::string> splitOnnxBytes(const std::string &bytes, LiftedPayloads &payloads,
                                          uint64_t minLiftedBytes) {
  WireReader in(bytes.data(), bytes.size());
  return split(in, payloads, minLiftedBytes);
}

std::string readOnnxFileSplit(const std::string &path, uint64_t maxBytes, LiftedPayloads &payloads) {
  uint64_t size = checkedFileSize(path, maxBytes, "ONNX model");
  std::optional<std::string> skeleton;
  if (std::FILE *file = std::fopen(path.c_str(), "rb")) {
    WireReader in(file, size);
    skeleton = split(in, payloads, kMinLiftedPayloadBytes);
    std::fclose(file);
  }
  if (skeleton)
    return std::move(*skeleton);
  payloads.clear();
  // Not plain, or not readable: protobuf (or the read) reports what is wrong.
  return readFileLimited(path, maxBytes, "ONNX model");
}

} // namespace kiln::frontend
