#include "runtime/Npy.h"

#include <cstring>
#include <fstream>
#include <sstream>

#include "core/Error.h"
#include "core/ShapeMath.h"

namespace kiln::runtime {

namespace {

// numpy's descr strings for kiln's dtypes ('<' little-endian, '|' byte-sized).
std::string descrOf(DType dtype) {
  switch (dtype) {
  case DType::F32: return "<f4";
  case DType::F64: return "<f8";
  case DType::F16: return "<f2";
  case DType::BF16: fail(".npy has no bfloat16 type; cast to f32 first");
  case DType::I64: return "<i8";
  case DType::I32: return "<i4";
  case DType::I8: return "|i1";
  case DType::U8: return "|u1";
  case DType::Bool: return "|b1";
  }
  return "";
}

DType dtypeOfDescr(const std::string &descr, const std::string &what) {
  for (DType d : {DType::F32, DType::F64, DType::F16, DType::I64, DType::I32, DType::I8, DType::U8, DType::Bool}) {
    std::string ours = descrOf(d);
    if (descr == ours || (ours[0] == '<' && descr == "=" + ours.substr(1)) ||
        (ours[0] == '|' && descr == "<" + ours.substr(1)))
      return d;
  }
  fail("{}: unsupported .npy dtype '{}'", what, descr);
}

// Finds `'key': ` in the header dict and returns the position just after it.
size_t findKey(const std::string &header, const std::string &key, const std::string &what) {
  size_t pos = header.find("'" + key + "'");
  if (pos == std::string::npos)
    fail("{}: .npy header has no '{}'", what, key);
  pos = header.find(':', pos);
  if (pos == std::string::npos)
    fail("{}: .npy header is malformed near '{}'", what, key);
  pos = header.find_first_not_of(' ', pos + 1);
  if (pos == std::string::npos)
    fail("{}: .npy header is malformed near '{}'", what, key);
  return pos;
}

} // namespace

NpyHeader parseNpyHeader(const char *bytes, size_t size, const std::string &what) {
  if (size < 10 || std::memcmp(bytes, "\x93NUMPY", 6) != 0)
    fail("{}: not a .npy file (bad magic)", what);
  unsigned major = static_cast<unsigned char>(bytes[6]);
  size_t headerLen, headerStart;
  if (major == 1) {
    headerLen = static_cast<unsigned char>(bytes[8]) | (static_cast<unsigned char>(bytes[9]) << 8);
    headerStart = 10;
  } else if (major == 2 || major == 3) {
    if (size < 12)
      fail("{}: truncated .npy header", what);
    headerLen = 0;
    for (int i = 3; i >= 0; --i)
      headerLen = (headerLen << 8) | static_cast<unsigned char>(bytes[8 + i]);
    headerStart = 12;
  } else {
    fail("{}: unsupported .npy version {}", what, major);
  }
  if (headerLen > size - headerStart)
    fail("{}: truncated .npy header", what);
  std::string header(bytes + headerStart, headerLen);

  size_t pos = findKey(header, "descr", what);
  if (header[pos] != '\'')
    fail("{}: .npy descr is not a string", what);
  size_t end = header.find('\'', pos + 1);
  if (end == std::string::npos)
    fail("{}: .npy descr is unterminated", what);
  DType dtype = dtypeOfDescr(header.substr(pos + 1, end - pos - 1), what);

  pos = findKey(header, "fortran_order", what);
  if (header.compare(pos, 5, "False") != 0)
    fail("{}: Fortran-ordered .npy files are not supported", what);

  pos = findKey(header, "shape", what);
  if (header[pos] != '(')
    fail("{}: .npy shape is not a tuple", what);
  end = header.find(')', pos);
  if (end == std::string::npos)
    fail("{}: .npy shape is unterminated", what);
  Shape shape;
  std::string dims = header.substr(pos + 1, end - pos - 1);
  // Split on commas, keeping empty items: "()" and "(4,)" end in one blank item, which is
  // fine; any other blank item ("(,)", "(2,,3)") is malformed.
  std::vector<std::string> items;
  for (size_t from = 0;;) {
    size_t comma = dims.find(',', from);
    items.push_back(dims.substr(from, comma == std::string::npos ? std::string::npos : comma - from));
    if (comma == std::string::npos)
      break;
    from = comma + 1;
  }
  for (size_t i = 0; i < items.size(); ++i) {
    const std::string &item = items[i];
    size_t a = item.find_first_not_of(" \t"), b = item.find_last_not_of(" \tL");
    if (a == std::string::npos) {
      if (i + 1 == items.size())
        break;
      fail("{}: bad .npy shape '({})'", what, dims);
    }
    std::string digits = b == std::string::npos || b < a ? "" : item.substr(a, b - a + 1);
    if (digits.empty() || digits.size() > 12 || digits.find_first_not_of("0123456789") != std::string::npos)
      fail("{}: bad .npy dimension '{}'", what, item);
    shape.push_back(std::stoll(digits));
  }
  int64_t total = elementCount(shape, fmt::format("{}: .npy shape", what)); // kiln's size limit
  size_t dataStart = headerStart + headerLen;
  size_t need = byteSize(total, dtype, what);
  if (size - dataStart != need)
    fail("{}: .npy data has {} bytes, shape {} of {} needs {}", what, size - dataStart, shapeToString(shape),
         dtypeName(dtype), need);
  return {TensorType{dtype, shape}, dataStart};
}

Tensor parseNpy(const std::string &bytes, const std::string &what) {
  NpyHeader header = parseNpyHeader(bytes.data(), bytes.size(), what);
  Tensor tensor(header.type);
  if (tensor.byteSize() > 0)
    std::memcpy(tensor.data(), bytes.data() + header.dataOffset, tensor.byteSize());
  if (tensor.dtype() == DType::Bool)
    normalizeBools(tensor.dataAs<unsigned char>(), tensor.numElements());
  return tensor;
}

void normalizeBools(unsigned char *flags, int64_t count) {
  // kiln's bool elements are 0 or 1 (ops copy their bytes); any other byte is true.
  for (int64_t i = 0; i < count; ++i)
    flags[i] = flags[i] != 0;
}

Tensor readNpy(const std::string &path) {
  std::ifstream in(path, std::ios::binary);
  if (!in)
    fail("{}: cannot open file", path);
  std::stringstream buffer;
  buffer << in.rdbuf();
  return parseNpy(buffer.str(), path);
}

std::string serializeNpy(const Tensor &tensor) {
  std::string shape;
  for (int64_t d : tensor.shape())
    shape += fmt::format("{}, ", d);
  if (tensor.rank() > 1)
    shape.resize(shape.size() - 1); // numpy writes (2, 3) but (4,)
  else if (tensor.rank() == 1)
    shape.resize(shape.size() - 1);
  std::string header = fmt::format("{{'descr': '{}', 'fortran_order': False, 'shape': ({}), }}",
                                   descrOf(tensor.dtype()),
                                   tensor.rank() > 1 ? shape.substr(0, shape.size() - 1) : shape);
  // Pad so that the data starts at a multiple of 64 bytes, ending the header with '\n'.
  size_t total = 10 + header.size() + 1;
  header.append((64 - total % 64) % 64, ' ');
  header += '\n';
  std::string out = "\x93NUMPY";
  out += static_cast<char>(1);
  out += static_cast<char>(0);
  out += static_cast<char>(header.size() & 0xff);
  out += static_cast<char>(header.size() >> 8);
  out += header;
  if (tensor.byteSize() > 0) // an empty tensor's data() may be null
    out.append(static_cast<const char *>(tensor.data()), tensor.byteSize());
  return out;
}

void writeNpy(const std::string &path, const Tensor &tensor) {
  std::ofstream out(path, std::ios::binary);
  if (!out)
    fail("{}: cannot open file for writing", path);
  std::string bytes = serializeNpy(tensor);
  out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  if (!out)
    fail("{}: write failed", path);
}

} // namespace kiln::runtime
