// .npy reading and writing: round trips of every dtype and of edge shapes, headers as numpy
// writes them, and malformed files that must be kiln::Errors naming the problem.
#include <gtest/gtest.h>

#include <cstdio>
#include <cstring>
#include <fstream>

#include "core/Error.h"
#include "runtime/Npy.h"

using namespace kiln;
using kiln::runtime::parseNpy;
using kiln::runtime::readNpy;
using kiln::runtime::serializeNpy;
using kiln::runtime::writeNpy;

namespace {

/// A .npy file built by hand: magic, version, header length, the header dict padded with
/// spaces to a multiple of 64 bytes and ended by '\n', then `data`.
std::string handMadeNpy(const std::string &dict, const std::string &data, int major = 1) {
  size_t prefix = major == 1 ? 10 : 12;
  std::string header = dict;
  while ((prefix + header.size() + 1) % 64 != 0)
    header += ' ';
  header += '\n';
  std::string out = "\x93NUMPY";
  out += static_cast<char>(major);
  out += '\0';
  size_t lengthBytes = major == 1 ? 2 : 4;
  for (size_t i = 0; i < lengthBytes; ++i)
    out += static_cast<char>((header.size() >> (8 * i)) & 0xff);
  return out + header + data;
}

template <typename T> std::string rawBytes(const std::vector<T> &values) {
  return std::string(reinterpret_cast<const char *>(values.data()), values.size() * sizeof(T));
}

/// Expects parseNpy to throw a kiln::Error whose message contains `fragment` and the source name.
void expectMalformed(const std::string &bytes, const std::string &fragment) {
  try {
    parseNpy(bytes, "bad.npy");
    FAIL() << "expected a kiln::Error containing '" << fragment << "'";
  } catch (const Error &e) {
    std::string message = e.what();
    EXPECT_NE(message.find("bad.npy"), std::string::npos) << message;
    EXPECT_NE(message.find(fragment), std::string::npos) << message;
  }
}

const std::string kF32Dict = "{'descr': '<f4', 'fortran_order': False, 'shape': (2,), }";

} // namespace

TEST(Npy, ParsesHandMadeFileOfEachDType) {
  Tensor f32 = parseNpy(handMadeNpy("{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }",
                                    rawBytes<float>({1, 2, 3, 4, 5, -6.5f})),
                        "a.npy");
  EXPECT_EQ(f32.type(), (TensorType{DType::F32, {2, 3}}));
  EXPECT_EQ(f32.getDouble(5), -6.5);

  Tensor f64 = parseNpy(handMadeNpy("{'descr': '<f8', 'fortran_order': False, 'shape': (1,), }",
                                    rawBytes<double>({0.125})),
                        "b.npy");
  EXPECT_EQ(f64.type(), (TensorType{DType::F64, {1}}));
  EXPECT_EQ(f64.getDouble(0), 0.125);

  // f16 1.0 is 0x3c00, -2.0 is 0xc000.
  Tensor f16 = parseNpy(handMadeNpy("{'descr': '<f2', 'fortran_order': False, 'shape': (2,), }",
                                    rawBytes<uint16_t>({0x3c00, 0xc000})),
                        "c.npy");
  EXPECT_EQ(f16.dtype(), DType::F16);
  EXPECT_EQ(f16.getDouble(0), 1.0);
  EXPECT_EQ(f16.getDouble(1), -2.0);

  Tensor i64 = parseNpy(handMadeNpy("{'descr': '<i8', 'fortran_order': False, 'shape': (2,), }",
                                    rawBytes<int64_t>({int64_t(1) << 60, -3})),
                        "d.npy");
  EXPECT_EQ(i64.getInt(0), int64_t(1) << 60);
  EXPECT_EQ(i64.getInt(1), -3);

  Tensor i32 = parseNpy(handMadeNpy("{'descr': '<i4', 'fortran_order': False, 'shape': (1, 1), }",
                                    rawBytes<int32_t>({-7})),
                        "e.npy");
  EXPECT_EQ(i32.type(), (TensorType{DType::I32, {1, 1}}));
  EXPECT_EQ(i32.getInt(0), -7);

  Tensor i8 = parseNpy(handMadeNpy("{'descr': '|i1', 'fortran_order': False, 'shape': (2,), }",
                                   rawBytes<int8_t>({-128, 127})),
                       "f.npy");
  EXPECT_EQ(i8.getInt(0), -128);
  Tensor u8 = parseNpy(handMadeNpy("{'descr': '|u1', 'fortran_order': False, 'shape': (1,), }",
                                   rawBytes<uint8_t>({255})),
                       "g.npy");
  EXPECT_EQ(u8.getInt(0), 255);
  Tensor b = parseNpy(handMadeNpy("{'descr': '|b1', 'fortran_order': False, 'shape': (3,), }",
                                  rawBytes<uint8_t>({1, 0, 1})),
                      "h.npy");
  EXPECT_EQ(b.dtype(), DType::Bool);
  EXPECT_EQ(b.getInt(0), 1);
  EXPECT_EQ(b.getInt(1), 0);
}

TEST(Npy, AcceptsVersion2HeadersAndKeyOrder) {
  Tensor t = parseNpy(handMadeNpy("{'shape': (3,), 'fortran_order': False, 'descr': '<i4'}",
                                  rawBytes<int32_t>({4, 5, 6}), 2),
                      "v2.npy");
  EXPECT_EQ(t.type(), (TensorType{DType::I32, {3}}));
  EXPECT_EQ(t.getInt(2), 6);
}

TEST(Npy, WritesHeaderAsNumpyDoes) {
  std::string bytes = serializeNpy(Tensor::fromDoubles(DType::F32, {2, 3}, {1, 2, 3, 4, 5, 6}));
  ASSERT_GE(bytes.size(), 10u);
  EXPECT_EQ(bytes.substr(0, 6), "\x93NUMPY");
  EXPECT_EQ(bytes[6], 1);
  size_t headerLength = static_cast<unsigned char>(bytes[8]) | (static_cast<unsigned char>(bytes[9]) << 8);
  EXPECT_EQ((10 + headerLength) % 64, 0u) << "data must start 64-byte aligned";
  std::string header = bytes.substr(10, headerLength);
  EXPECT_EQ(header.rfind("{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }", 0), 0u) << header;
  EXPECT_EQ(header.back(), '\n');
  EXPECT_EQ(bytes.size(), 10 + headerLength + 6 * sizeof(float));

  auto headerOf = [](const Tensor &t) {
    std::string b = serializeNpy(t);
    size_t n = static_cast<unsigned char>(b[8]) | (static_cast<unsigned char>(b[9]) << 8);
    return b.substr(10, n);
  };
  EXPECT_NE(headerOf(Tensor(DType::I64, {4})).find("'shape': (4,)"), std::string::npos);
  EXPECT_NE(headerOf(Tensor::scalar(DType::F64, 1)).find("'shape': ()"), std::string::npos);
  EXPECT_NE(headerOf(Tensor(DType::Bool, {1, 0, 2})).find("'descr': '|b1'"), std::string::npos);
  EXPECT_NE(headerOf(Tensor(DType::Bool, {1, 0, 2})).find("'shape': (1, 0, 2)"), std::string::npos);
}

TEST(Npy, RoundTripsEveryDTypeAndEdgeShapes) {
  const std::vector<Shape> shapes = {{}, {0}, {3}, {2, 0, 4}, {1, 1}, {2, 3, 4}};
  for (DType dtype : {DType::F32, DType::F64, DType::F16, DType::I64, DType::I32, DType::I8, DType::U8, DType::Bool}) {
    for (const Shape &shape : shapes) {
      Tensor original = randomTensor({dtype, shape}, 7);
      Tensor back = parseNpy(serializeNpy(original), "roundtrip");
      EXPECT_EQ(back.type(), original.type());
      EXPECT_TRUE(back.identical(original)) << original.type().toString();
    }
  }
}

TEST(Npy, RoundTripsThroughFiles) {
  std::string path = ::testing::TempDir() + "kiln_npy_roundtrip.npy";
  Tensor original = Tensor::fromDoubles(DType::I64, {2, 2}, {1, -2, 3, -4});
  writeNpy(path, original);
  EXPECT_TRUE(readNpy(path).identical(original));
  std::remove(path.c_str());
}

TEST(Npy, BFloat16CannotBeWritten) {
  EXPECT_THROW(serializeNpy(Tensor(DType::BF16, {2})), Error);
}

TEST(Npy, MissingFileIsAnErrorNamingIt) {
  try {
    readNpy("/nonexistent/dir/x.npy");
    FAIL();
  } catch (const Error &e) {
    EXPECT_NE(std::string(e.what()).find("/nonexistent/dir/x.npy"), std::string::npos);
  }
}

TEST(Npy, RejectsBadMagic) {
  std::string bytes = handMadeNpy(kF32Dict, rawBytes<float>({1, 2}));
  bytes[1] = 'X';
  expectMalformed(bytes, "magic");
  expectMalformed("", "magic");
  expectMalformed("\x93NUM", "magic");
}

TEST(Npy, RejectsUnsupportedVersion) {
  std::string bytes = handMadeNpy(kF32Dict, rawBytes<float>({1, 2}));
  bytes[6] = 9;
  expectMalformed(bytes, "version");
}

TEST(Npy, RejectsTruncatedHeader) {
  std::string bytes = handMadeNpy(kF32Dict, "");
  expectMalformed(bytes.substr(0, 30), "truncated");
  // A version-2 file too short to hold its 4-byte header length.
  expectMalformed(std::string("\x93NUMPY\x02\x00\x10\x00", 10), "truncated");
}

TEST(Npy, RejectsTruncatedOrOversizedData) {
  std::string good = handMadeNpy(kF32Dict, rawBytes<float>({1, 2}));
  expectMalformed(good.substr(0, good.size() - 1), "bytes");
  expectMalformed(good + "x", "bytes");
}

TEST(Npy, RejectsBadShapeStrings) {
  for (const char *shape : {"(2, x)", "(-1,)", "(2 3)", "(1.5,)", "(99999999999999999,)", "(,)", "(2,,3)", "(L,)"}) {
    std::string dict = std::string("{'descr': '<f4', 'fortran_order': False, 'shape': ") + shape + ", }";
    EXPECT_THROW(parseNpy(handMadeNpy(dict, ""), "bad.npy"), Error) << shape;
  }
  expectMalformed(handMadeNpy("{'descr': '<f4', 'fortran_order': False, 'shape': [2], }", ""), "shape");
  expectMalformed(handMadeNpy("{'descr': '<f4', 'fortran_order': False, 'shape': (2, ", ""), "shape");
  expectMalformed(handMadeNpy("{'descr': '<f4', 'fortran_order': False}", ""), "shape");
  // Dimensions whose product overflows must not wrap into a small, plausible size: past kiln's
  // size limit (2^48 elements) they are refused.
  expectMalformed(handMadeNpy("{'descr': '<f4', 'fortran_order': False, 'shape': (4294967296, 4294967296), }", ""),
                  "has too many elements");
}

TEST(Npy, AcceptsShapeSpellingsNumpyCanRead) {
  auto shapeOf = [](const std::string &spelling, size_t elements) {
    std::string dict = "{'descr': '|u1', 'fortran_order': False, 'shape': " + spelling + ", }";
    return parseNpy(handMadeNpy(dict, std::string(elements, '\1')), "ok.npy").shape();
  };
  EXPECT_EQ(shapeOf("()", 1), Shape{});
  EXPECT_EQ(shapeOf("( )", 1), Shape{});
  EXPECT_EQ(shapeOf("(4,)", 4), (Shape{4}));
  EXPECT_EQ(shapeOf("(4, )", 4), (Shape{4}));
  EXPECT_EQ(shapeOf("(2,3)", 6), (Shape{2, 3}));
  EXPECT_EQ(shapeOf("(2L, 3L)", 6), (Shape{2, 3})); // Python 2 longs
  EXPECT_EQ(shapeOf("(0, 5)", 0), (Shape{0, 5}));
}

TEST(Npy, BoolBytesReadAsZeroOrOne) {
  Tensor b = parseNpy(handMadeNpy("{'descr': '|b1', 'fortran_order': False, 'shape': (3,), }",
                                  rawBytes<uint8_t>({0, 2, 255})),
                      "bools.npy");
  EXPECT_EQ(b.dataAs<uint8_t>()[0], 0);
  EXPECT_EQ(b.dataAs<uint8_t>()[1], 1);
  EXPECT_EQ(b.dataAs<uint8_t>()[2], 1);
}

TEST(Npy, RejectsFortranOrder) {
  expectMalformed(handMadeNpy("{'descr': '<f4', 'fortran_order': True, 'shape': (2,), }", rawBytes<float>({1, 2})),
                  "Fortran");
}

TEST(Npy, RejectsUnsupportedDescr) {
  expectMalformed(handMadeNpy("{'descr': '>f4', 'fortran_order': False, 'shape': (2,), }", rawBytes<float>({1, 2})),
                  "dtype");
  expectMalformed(handMadeNpy("{'descr': '<c8', 'fortran_order': False, 'shape': (1,), }", std::string(8, '\0')),
                  "dtype");
  expectMalformed(handMadeNpy("{'descr': 5, 'fortran_order': False, 'shape': (1,), }", ""), "descr");
  expectMalformed(handMadeNpy("{'descr': '<f4, 'fortran_order': False, 'shape': (1,), }", ""), "");
}
