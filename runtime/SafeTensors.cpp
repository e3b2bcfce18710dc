// .safetensors reading and writing. Reading, in stages: the 8-byte header length, checked
// against the bytes there are; the JSON header, parsed by a small strict parser (objects,
// arrays, strings, non-negative integers: all the format uses; nesting at most 3 deep); each
// entry checked (dtype, shape, offsets within the data, byte size matching the shape); the
// entries together must tile the data section exactly, without gaps or overlaps, as the
// format's reference reader requires; only then are bytes copied.
#include "runtime/SafeTensors.h"

#include <algorithm>
#include <cstring>
#include <fstream>
#include <sstream>
#include <vector>

#include <fmt/format.h>

#include "core/Error.h"
#include "core/ShapeMath.h"

namespace kiln::runtime {

namespace {

// The header of the format's reference writer is at most 100 MB; more is a damaged file.
constexpr uint64_t kMaxHeaderBytes = 100u << 20;
constexpr int kMaxDepth = 3;

struct DTypeName {
  DType dtype;
  const char *name;
};
constexpr DTypeName kDTypeNames[] = {{DType::F32, "F32"}, {DType::F64, "F64"}, {DType::F16, "F16"},
                                     {DType::BF16, "BF16"}, {DType::I64, "I64"}, {DType::I32, "I32"},
                                     {DType::I8, "I8"},   {DType::U8, "U8"},   {DType::Bool, "BOOL"}};

const char *safeTensorsName(DType dtype) {
  for (const DTypeName &entry : kDTypeNames)
    if (entry.dtype == dtype)
      return entry.name;
  fail("safetensors: dtype {} has no safetensors name", dtypeName(dtype));
}

/// A parsed JSON value: only the kinds the header uses.
struct Json {
  enum Kind { Object, Array, String, Integer } kind = Object;
  std::vector<std::pair<std::string, Json>> members; // Object, in file order
  std::vector<Json> items;                           // Array
  std::string text;                                  // String
  uint64_t integer = 0;                              // Integer
};

class JsonParser {
public:
  JsonParser(const std::string &text, const std::string &what) : text_(text), what_(what) {}

  Json parseDocument() {
    Json value = parseValue(0);
    skipSpace();
    if (pos_ != text_.size())
      error("unexpected text after the header object");
    return value;
  }

private:
  [[noreturn]] void error(const std::string &message) const {
    fail("{}: malformed safetensors header at byte {}: {}", what_, pos_, message);
  }

  void skipSpace() {
    while (pos_ < text_.size() &&
           (text_[pos_] == ' ' || text_[pos_] == '\t' || text_[pos_] == '\r' || text_[pos_] == '\n'))
      ++pos_;
  }

  void expect(char ch) {
    skipSpace();
    if (pos_ >= text_.size() || text_[pos_] != ch)
      error(fmt::format("expected '{}'", ch));
    ++pos_;
  }

  bool consume(char ch) {
    skipSpace();
    if (pos_ < text_.size() && text_[pos_] == ch) {
      ++pos_;
      return true;
    }
    return false;
  }

  Json parseValue(int depth) {
    if (depth > kMaxDepth)
      error("nested too deeply");
    skipSpace();
    if (pos_ >= text_.size())
      error("unexpected end of header");
    char ch = text_[pos_];
    Json value;
    if (ch == '{') {
      ++pos_;
      value.kind = Json::Object;
      if (consume('}'))
        return value;
      do {
        skipSpace();
        std::string key = parseString();
        expect(':');
        value.members.emplace_back(std::move(key), parseValue(depth + 1));
      } while (consume(','));
      expect('}');
    } else if (ch == '[') {
      ++pos_;
      value.kind = Json::Array;
      if (consume(']'))
        return value;
      do
        value.items.push_back(parseValue(depth + 1));
      while (consume(','));
      expect(']');
    } else if (ch == '"') {
      value.kind = Json::String;
      value.text = parseString();
    } else if (ch >= '0' && ch <= '9') {
      value.kind = Json::Integer;
      while (pos_ < text_.size() && text_[pos_] >= '0' && text_[pos_] <= '9') {
        uint64_t digit = static_cast<uint64_t>(text_[pos_] - '0');
        if (value.integer > (UINT64_MAX - digit) / 10)
          error("integer too large");
        value.integer = value.integer * 10 + digit;
        ++pos_;
      }
    } else {
      error(fmt::format("unexpected character '{}'", ch));
    }
    return value;
  }

  std::string parseString() {
    if (pos_ >= text_.size() || text_[pos_] != '"')
      error("expected a string");
    ++pos_;
    std::string out;
    while (true) {
      if (pos_ >= text_.size())
        error("unterminated string");
      char ch = text_[pos_++];
      if (ch == '"')
        return out;
      if (static_cast<unsigned char>(ch) < 0x20)
        error("control character in a string");
      if (ch != '\\') {
        out += ch;
        continue;
      }
      if (pos_ >= text_.size())
        error("unterminated escape");
      char escaped = text_[pos_++];
      switch (escaped) {
      case '"': case '\\': case '/': out += escaped; break;
      case 'b': out += '\b'; break;
      case 'f': out += '\f'; break;
      case 'n': out += '\n'; break;
      case 'r': out += '\r'; break;
      case 't': out += '\t'; break;
      case 'u': {
        // Names kiln writes are ASCII; an escaped code point below 0x80 is kept, others refused.
        if (pos_ + 4 > text_.size())
          error("short \\u escape");
        unsigned code = 0;
        for (int i = 0; i < 4; ++i) {
          char hex = text_[pos_++];
          int digit = hex >= '0' && hex <= '9'   ? hex - '0'
                      : hex >= 'a' && hex <= 'f' ? hex - 'a' + 10
                      : hex >= 'A' && hex <= 'F' ? hex - 'A' + 10
                                                 : -1;
          if (digit < 0)
            error("bad \\u escape");
          code = code * 16 + static_cast<unsigned>(digit);
        }
        if (code >= 0x80)
          error("non-ASCII \\u escapes are not supported");
        out += static_cast<char>(code);
        break;
      }
      default:
        error(fmt::format("bad escape '\\{}'", escaped));
      }
    }
  }

  const std::string &text_;
  const std::string &what_;
  size_t pos_ = 0;
};

std::string jsonString(const std::string &text) {
  std::string out = "\"";
  for (char ch : text) {
    if (ch == '"' || ch == '\\')
      out += std::string("\\") + ch;
    else if (static_cast<unsigned char>(ch) < 0x20)
      out += fmt::format("\\u{:04x}", static_cast<unsigned>(static_cast<unsigned char>(ch)));
    else
      out += ch;
  }
  return out + "\"";
}

struct Entry {
  std::string name;
  TensorType type;
  uint64_t begin = 0, end = 0;
};

Entry readEntry(const std::string &name, const Json &value, const std::string &what) {
  auto bad = [&](const std::string &message) { fail("{}: tensor '{}': {}", what, name, message); };
  if (value.kind != Json::Object)
    bad("its entry is not an object");
  const Json *dtype = nullptr, *shape = nullptr, *offsets = nullptr;
  for (const auto &[key, member] : value.members) {
    const Json **slot = key == "dtype" ? &dtype : key == "shape" ? &shape : key == "data_offsets" ? &offsets : nullptr;
    if (!slot)
      bad(fmt::format("unknown field '{}'", key));
    if (*slot)
      bad(fmt::format("field '{}' appears twice", key));
    *slot = &member;
  }
  if (!dtype || !shape || !offsets)
    bad("needs dtype, shape and data_offsets");
  Entry entry;
  entry.name = name;
  if (dtype->kind != Json::String)
    bad("dtype is not a string");
  const DTypeName *known = std::find_if(std::begin(kDTypeNames), std::end(kDTypeNames),
                                        [&](const DTypeName &d) { return dtype->text == d.name; });
  if (known == std::end(kDTypeNames))
    bad(fmt::format("unsupported dtype '{}'", dtype->text));
  entry.type.dtype = known->dtype;
  if (shape->kind != Json::Array)
    bad("shape is not an array");
  for (const Json &dim : shape->items) {
    if (dim.kind != Json::Integer)
      bad("shape holds something other than a dimension");
    if (dim.integer > static_cast<uint64_t>(kMaxElements)) // before it becomes an int64
      bad(fmt::format("dimension {} is larger than kiln's limit of 2^48", dim.integer));
    entry.type.shape.push_back(static_cast<int64_t>(dim.integer));
  }
  uint64_t bytes = 0;
  try {
    bytes = entry.type.byteSize(); // and the count, also beside a zero dim, within kiln's limit
  } catch (const Error &error) {
    bad(error.what());
  }
  if (offsets->kind != Json::Array || offsets->items.size() != 2 || offsets->items[0].kind != Json::Integer ||
      offsets->items[1].kind != Json::Integer)
    bad("data_offsets must be [begin, end]");
  entry.begin = offsets->items[0].integer;
  entry.end = offsets->items[1].integer;
  if (entry.end < entry.begin || entry.end - entry.begin != bytes)
    bad(fmt::format("data_offsets [{}, {}] do not hold the {} bytes of {}", entry.begin, entry.end, bytes,
                    entry.type.toString()));
  return entry;
}

} // namespace

std::string serializeSafeTensors(const NamedTensors &tensors, const std::map<std::string, std::string> &metadata) {
  std::string header = "{";
  if (!metadata.empty()) {
    header += "\"__metadata__\":{";
    bool first = true;
    for (const auto &[key, value] : metadata) {
      header += (first ? "" : ",") + jsonString(key) + ":" + jsonString(value);
      first = false;
    }
    header += "}";
  }
  uint64_t offset = 0;
  for (const auto &[name, tensor] : tensors) {
    if (name == "__metadata__")
      fail("safetensors: a tensor cannot be named '__metadata__'");
    if (!tensor.defined())
      fail("safetensors: tensor '{}' is undefined", name);
    std::vector<std::string> dims;
    for (int64_t d : tensor.shape())
      dims.push_back(std::to_string(d));
    uint64_t end = offset + tensor.byteSize();
    header += fmt::format("{}{}:{{\"dtype\":\"{}\",\"shape\":[{}],\"data_offsets\":[{},{}]}}",
                          header.size() > 1 ? "," : "", jsonString(name), safeTensorsName(tensor.dtype()),
                          fmt::join(dims, ","), offset, end);
    offset = end;
  }
  header += "}";
  // The data starts 8-byte aligned, as the reference writer pads the header with spaces.
  header.append((8 - header.size() % 8) % 8, ' ');
  std::string out(8, '\0');
  uint64_t length = header.size();
  for (int i = 0; i < 8; ++i)
    out[i] = static_cast<char>((length >> (8 * i)) & 0xff);
  out += header;
  out.reserve(out.size() + offset);
  for (const auto &entry : tensors)
    if (entry.second.byteSize() > 0)
      out.append(static_cast<const char *>(entry.second.data()), entry.second.byteSize());
  return out;
}

NamedTensors parseSafeTensors(const std::string &bytes, const std::string &what,
                              std::map<std::string, std::string> *metadata) {
  if (bytes.size() < 8)
    fail("{}: not a safetensors file: {} bytes, shorter than the 8-byte header length", what, bytes.size());
  uint64_t headerBytes = 0;
  for (int i = 7; i >= 0; --i)
    headerBytes = (headerBytes << 8) | static_cast<unsigned char>(bytes[static_cast<size_t>(i)]);
  if (headerBytes > kMaxHeaderBytes || headerBytes > bytes.size() - 8)
    fail("{}: safetensors header length {} runs past the end of the file ({} bytes)", what, headerBytes,
         bytes.size());
  std::string headerText = bytes.substr(8, headerBytes);
  Json header = JsonParser(headerText, what).parseDocument();
  if (header.kind != Json::Object)
    fail("{}: the safetensors header is not a JSON object", what);

  uint64_t dataStart = 8 + headerBytes, dataBytes = bytes.size() - dataStart;
  std::vector<Entry> entries;
  for (const auto &[name, value] : header.members) {
    if (name == "__metadata__") {
      if (value.kind != Json::Object)
        fail("{}: __metadata__ is not an object", what);
      for (const auto &[key, item] : value.members) {
        if (item.kind != Json::String)
          fail("{}: __metadata__ entry '{}' is not a string", what, key);
        if (metadata)
          (*metadata)[key] = item.text;
      }
      continue;
    }
    for (const Entry &other : entries)
      if (other.name == name)
        fail("{}: tensor '{}' appears twice", what, name);
    entries.push_back(readEntry(name, value, what));
  }
  // The entries must tile [0, dataBytes) exactly.
  std::vector<const Entry *> byOffset;
  for (const Entry &entry : entries)
    byOffset.push_back(&entry);
  std::sort(byOffset.begin(), byOffset.end(), [](const Entry *a, const Entry *b) {
    return a->begin != b->begin ? a->begin < b->begin : a->end < b->end;
  });
  uint64_t covered = 0;
  for (const Entry *entry : byOffset) {
    if (entry->begin != covered)
      fail("{}: tensor '{}' has data_offsets [{}, {}], expected to start at {} (overlapping or missing data)", what,
           entry->name, entry->begin, entry->end, covered);
    if (entry->end > dataBytes)
      fail("{}: tensor '{}' has data_offsets [{}, {}] past the end of the data ({} bytes)", what, entry->name,
           entry->begin, entry->end, dataBytes);
    covered = entry->end;
  }
  if (covered != dataBytes)
    fail("{}: the data section has {} bytes, the tensors use {}", what, dataBytes, covered);

  NamedTensors tensors;
  for (const Entry &entry : entries) {
    Tensor tensor(entry.type);
    if (entry.end > entry.begin)
      std::memcpy(tensor.data(), bytes.data() + dataStart + entry.begin, entry.end - entry.begin);
    if (entry.type.dtype == DType::Bool) {
      // kiln's bool elements are 0 or 1; any other byte is true.
      auto *flags = tensor.dataAs<unsigned char>();
      for (int64_t i = 0; i < tensor.numElements(); ++i)
        flags[i] = flags[i] != 0;
    }
    tensors.emplace(entry.name, std::move(tensor));
  }
  return tensors;
}

void writeSafeTensors(const std::string &path, const NamedTensors &tensors,
                      const std::map<std::string, std::string> &metadata) {
  std::string bytes = serializeSafeTensors(tensors, metadata);
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  if (!out)
    fail("{}: cannot open file for writing", path);
  out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  if (!out)
    fail("{}: write failed", path);
}

NamedTensors readSafeTensors(const std::string &path, std::map<std::string, std::string> *metadata) {
  std::ifstream in(path, std::ios::binary);
  if (!in)
    fail("{}: cannot open file", path);
  std::stringstream buffer;
  buffer << in.rdbuf();
  return parseSafeTensors(buffer.str(), path, metadata);
}

} // namespace kiln::runtime
