// .safetensors: round trips of every dtype (scalars, empty tensors, metadata), the byte layout
// the format specifies (checked by hand on a small file), and malformed files as kiln::Error.
#include <gtest/gtest.h>

#include "tests/ErrorMatchers.h"

#include <cstring>
#include <filesystem>
#include <functional>

#include "core/Error.h"
#include "runtime/SafeTensors.h"

namespace kiln::runtime {

namespace {

using kiln::test::expectErrorContaining;

/// A file made by hand: the 8-byte length, `header` as given, then `data`.
std::string handMade(const std::string &header, const std::string &data) {
  std::string out(8, '\0');
  uint64_t length = header.size();
  for (int i = 0; i < 8; ++i)
    out[i] = static_cast<char>((length >> (8 * i)) & 0xff);
  return out + header + data;
}

std::string floats(std::initializer_list<float> values) {
  std::string out;
  for (float v : values)
    out.append(reinterpret_cast<const char *>(&v), sizeof v);
  return out;
}

NamedTensors parse(const std::string &bytes) { return parseSafeTensors(bytes, "test.safetensors"); }

} // namespace

TEST(SafeTensors, RoundTripsEveryDTypeAndMetadata) {
  NamedTensors tensors;
  DType dtypes[] = {DType::F32, DType::F64, DType::F16, DType::BF16, DType::I64,
                    DType::I32, DType::I8,  DType::U8,  DType::Bool};
  int seed = 0;
  for (DType dtype : dtypes)
    tensors[std::string(dtypeName(dtype)) + ".w"] = randomTensor({dtype, {2, 3}}, static_cast<uint64_t>(++seed));
  tensors["scalar"] = Tensor::scalar(DType::F32, 2.5);
  tensors["empty"] = Tensor(DType::F32, {0, 4});
  tensors["quote\"name"] = Tensor::scalar(DType::I64, -3);
  std::map<std::string, std::string> metadata{{"format", "pt"}, {"note", "line\nbreak"}};
  std::string bytes = serializeSafeTensors(tensors, metadata);
  std::map<std::string, std::string> readMetadata;
  NamedTensors back = parseSafeTensors(bytes, "memory", &readMetadata);
  EXPECT_EQ(readMetadata, metadata);
  ASSERT_EQ(back.size(), tensors.size());
  for (const auto &[name, tensor] : tensors) {
    ASSERT_TRUE(back.count(name)) << name;
    EXPECT_TRUE(back.at(name).identical(tensor)) << name;
  }

  std::string path = (std::filesystem::temp_directory_path() / "kiln-safetensors-test.safetensors").string();
  writeSafeTensors(path, tensors);
  NamedTensors fromFile = readSafeTensors(path);
  EXPECT_TRUE(fromFile.at("i64.w").identical(tensors.at("i64.w")));
  std::filesystem::remove(path);
}

TEST(SafeTensors, LayoutFollowsTheFormat) {
  NamedTensors tensors{{"b", Tensor::fromDoubles(DType::F32, {2}, {1.0, 2.0})},
                       {"a", Tensor::fromDoubles(DType::I32, {1}, {7})}};
  std::string bytes = serializeSafeTensors(tensors);
  uint64_t length = 0;
  for (int i = 7; i >= 0; --i)
    length = (length << 8) | static_cast<unsigned char>(bytes[static_cast<size_t>(i)]);
  std::string header = bytes.substr(8, length);
  EXPECT_EQ(header.find("{\"a\":{\"dtype\":\"I32\",\"shape\":[1],\"data_offsets\":[0,4]},"
                        "\"b\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[4,12]}}"),
            0u)
      << header;
  EXPECT_EQ((8 + length) % 8, 0u); // data 8-byte aligned, padded with spaces
  EXPECT_EQ(bytes.size(), 8 + length + 12);
  int32_t a = 0;
  std::memcpy(&a, bytes.data() + 8 + length, 4);
  EXPECT_EQ(a, 7);

  // A file written by another writer: whitespace, members in another order, escapes.
  NamedTensors other = parse(handMade(
      " { \"x\" : { \"shape\" : [ 2 ] , \"data_offsets\" : [ 0 , 8 ], \"dtype\" : \"F32\" },"
      " \"__metadata__\": {\"k\": \"v\\u0041\"} } ",
      floats({3.0f, -1.0f})));
  ASSERT_EQ(other.size(), 1u);
  EXPECT_EQ(other.at("x").getDouble(1), -1.0);
}

TEST(SafeTensors, MalformedFilesAreErrors) {
  std::string good = "{\"x\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]}}";
  std::string data = floats({1.0f, 2.0f});
  EXPECT_EQ(parse(handMade(good, data)).size(), 1u);

  expectErrorContaining([&] { parse("1234"); }, "shorter than the 8-byte header length");
  expectErrorContaining([&] { parse(handMade(good, data).substr(0, 20)); }, "runs past the end of the file");
  std::string huge(8, '\xff');
  expectErrorContaining([&] { parse(huge + "{}"); }, "runs past the end of the file");
  // Bad JSON.
  expectErrorContaining([&] { parse(handMade("{\"x\":", data)); }, "malformed safetensors header");
  expectErrorContaining([&] { parse(handMade("{\"x\" 1}", "")); }, "expected ':'");
  expectErrorContaining([&] { parse(handMade("{\"x\":\"unterminated}", "")); }, "unterminated string");
  expectErrorContaining([&] { parse(handMade("{} trailing", "")); }, "unexpected text after");
  expectErrorContaining([&] { parse(handMade("{\"x\":-1}", "")); }, "unexpected character '-'");
  expectErrorContaining([&] { parse(handMade("{\"x\":{\"dtype\":\"F32\",\"shape\":[[[[1]]]]}}", "")); },
                        "nested too deeply");
  expectErrorContaining([&] { parse(handMade("{\"x\":99999999999999999999999}", "")); }, "integer too large");
  expectErrorContaining([&] { parse(handMade("[]", "")); }, "not a JSON object");
  // Bad entries.
  expectErrorContaining(
      [&] { parse(handMade("{\"x\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,16]}}", data)); },
      "do not hold the 8 bytes of f32[2]");
  expectErrorContaining(
      [&] { parse(handMade("{\"x\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[8,16]}}", data)); },
      "expected to start at 0");
  expectErrorContaining(
      [&] { parse(handMade("{\"x\":{\"dtype\":\"F32\",\"shape\":[3],\"data_offsets\":[0,12]}}", data)); },
      "past the end of the data");
  expectErrorContaining([&] { parse(handMade(good, data + "xx")); }, "the data section has 10 bytes, the tensors use 8");
  expectErrorContaining(
      [&] {
        parse(handMade("{\"x\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]},"
                       "\"y\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]}}",
                       floats({1.0f})));
      },
      "overlapping or missing data");
  expectErrorContaining([&] { parse(handMade("{\"x\":{\"dtype\":\"Q4\",\"shape\":[2],\"data_offsets\":[0,8]}}", data)); },
                        "unsupported dtype 'Q4'");
  expectErrorContaining([&] { parse(handMade("{\"x\":{\"dtype\":\"F32\",\"shape\":[2]}}", data)); },
                        "needs dtype, shape and data_offsets");
  expectErrorContaining(
      [&] { parse(handMade("{\"x\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8],\"extra\":1}}", data)); },
      "unknown field 'extra'");
  expectErrorContaining(
      [&] {
        parse(handMade("{\"x\":{\"dtype\":\"F32\",\"shape\":[4611686018427387904,4],\"data_offsets\":[0,8]}}", data));
      },
      "tensor 'x'");
  // An empty tensor with a dim past kiln's limit (2^48) beside its zero dim: refused too.
  auto emptyOfShape = [](const std::string &shape) {
    return "{\"x\":{\"dtype\":\"F32\",\"shape\":" + shape + ",\"data_offsets\":[0,0]}}";
  };
  expectErrorContaining([&] { parse(handMade(emptyOfShape("[0,1152921504606846976]"), "")); },
                        "dimension 1152921504606846976 is larger than kiln's limit of 2^48");
  expectErrorContaining([&] { parse(handMade(emptyOfShape("[0,16777216,16777217]"), "")); }, "has too many elements");
  expectErrorContaining([&] { parse(handMade("{\"__metadata__\":{\"k\":1}}", "")); }, "is not a string");
  expectErrorContaining([&] { readSafeTensors("/nonexistent/kiln.safetensors"); }, "cannot open file");
}

} // namespace kiln::runtime
