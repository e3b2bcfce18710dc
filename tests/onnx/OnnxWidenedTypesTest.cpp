// The ONNX integer types kiln has no dtype for (int16, uint16, uint32, uint64) are held widened
// (int16/uint16 in i32, uint32/uint64 in i64): decoding from raw_data, the typed fields and
// external files with every value range-checked; graph inputs and outputs of those types; the
// ops that cannot wrap around in the narrow type (Pow's exponent, Max, Mod, BitShift, ...)
// and the refusal, with its message, of those that could.
#include <cstring>
#include <limits>

#include "OnnxTestModel.h"

using namespace kiln;
using namespace kiln::onnxtest;

namespace {

constexpr int32_t kInt16 = onnx::TensorProto::INT16;
constexpr int32_t kUint16 = onnx::TensorProto::UINT16;
constexpr int32_t kUint32 = onnx::TensorProto::UINT32;
constexpr int32_t kUint64 = onnx::TensorProto::UINT64;
constexpr int64_t kInt64Max = std::numeric_limits<int64_t>::max();

Tensor ints(DType dtype, const Shape &shape, const std::vector<int64_t> &values) {
  Tensor t(dtype, shape);
  for (size_t i = 0; i < values.size(); ++i)
    t.setInt(static_cast<int64_t>(i), values[i]);
  return t;
}

/// The values of an integer tensor, flat.
std::vector<int64_t> values(const Tensor &t) {
  std::vector<int64_t> out;
  for (int64_t i = 0; i < t.numElements(); ++i)
    out.push_back(t.getInt(i));
  return out;
}

/// A TensorProto of ONNX type `type` and shape [n] whose raw_data holds `elements` as the
/// narrow C++ type T (little-endian, as on every host kiln runs on).
template <typename T> onnx::TensorProto rawProto(int32_t type, const std::vector<T> &elements) {
  onnx::TensorProto proto;
  proto.set_name("t");
  proto.set_data_type(type);
  proto.add_dims(static_cast<int64_t>(elements.size()));
  std::string bytes(elements.size() * sizeof(T), '\0');
  if (!elements.empty())
    std::memcpy(bytes.data(), elements.data(), bytes.size());
  proto.set_raw_data(bytes);
  return proto;
}

onnx::TensorProto typedProto(int32_t type, int64_t count) {
  onnx::TensorProto proto;
  proto.set_name("t");
  proto.set_data_type(type);
  proto.add_dims(count);
  return proto;
}

Tensor decode(const onnx::TensorProto &proto) { return frontend::decodeTensorProto(proto, "", "tensor 't'"); }

void setElemType(onnx::ValueInfoProto *info, int32_t type) {
  info->mutable_type()->mutable_tensor_type()->set_elem_type(type);
}

/// Declares a graph input / output of an ONNX type kiln holds widened.
void widenedInput(ModelBuilder &m, const std::string &name, int32_t type, const Shape &shape) {
  m.input(name, DType::I64, shape);
  setElemType(m.model.mutable_graph()->mutable_input(m.model.graph().input_size() - 1), type);
}
void widenedOutput(ModelBuilder &m, const std::string &name, int32_t type, const Shape &shape) {
  m.output(name, DType::I64, shape);
  setElemType(m.model.mutable_graph()->mutable_output(m.model.graph().output_size() - 1), type);
}

// ---- decoding -------------------------------------------------------------------------------

TEST(OnnxWidenedTypes, HeldDTypes) {
  EXPECT_EQ(frontend::heldDTypeFromOnnx(kInt16), DType::I32);
  EXPECT_EQ(frontend::heldDTypeFromOnnx(kUint16), DType::I32);
  EXPECT_EQ(frontend::heldDTypeFromOnnx(kUint32), DType::I64);
  EXPECT_EQ(frontend::heldDTypeFromOnnx(kUint64), DType::I64);
  EXPECT_EQ(frontend::heldDTypeFromOnnx(onnx::TensorProto::FLOAT), DType::F32); // exact types hold themselves
  EXPECT_FALSE(frontend::heldDTypeFromOnnx(onnx::TensorProto::STRING));
  EXPECT_FALSE(frontend::dtypeFromOnnx(kUint32)); // not exactly representable
  EXPECT_TRUE(frontend::isWidenedOnnxType(kUint16));
  EXPECT_FALSE(frontend::isWidenedOnnxType(onnx::TensorProto::INT32));
  EXPECT_FALSE(frontend::isWidenedOnnxType(onnx::TensorProto::STRING));
}

TEST(OnnxWidenedTypes, DecodesRawData) {
  Tensor i16 = decode(rawProto<int16_t>(kInt16, {-32768, -1, 0, 32767}));
  EXPECT_EQ(i16.type(), (TensorType{DType::I32, {4}}));
  EXPECT_EQ(values(i16), (std::vector<int64_t>{-32768, -1, 0, 32767}));

  Tensor u16 = decode(rawProto<uint16_t>(kUint16, {0, 1, 40000, 65535}));
  EXPECT_EQ(u16.type(), (TensorType{DType::I32, {4}}));
  EXPECT_EQ(values(u16), (std::vector<int64_t>{0, 1, 40000, 65535})); // not negative

  Tensor u32 = decode(rawProto<uint32_t>(kUint32, {0, 7, 2147483648u, 4294967295u}));
  EXPECT_EQ(u32.type(), (TensorType{DType::I64, {4}}));
  EXPECT_EQ(values(u32), (std::vector<int64_t>{0, 7, 2147483648, 4294967295}));

  Tensor u64 = decode(rawProto<uint64_t>(kUint64, {0, 4294967296u, uint64_t{kInt64Max}}));
  EXPECT_EQ(u64.type(), (TensorType{DType::I64, {3}}));
  EXPECT_EQ(values(u64), (std::vector<int64_t>{0, 4294967296, kInt64Max}));

  EXPECT_EQ(decode(rawProto<uint32_t>(kUint32, {})).type(), (TensorType{DType::I64, {0}})); // empty
}

TEST(OnnxWidenedTypes, DecodesTypedFields) {
  // int16 and uint16 in int32_data, uint32 and uint64 in uint64_data (the ONNX spec).
  onnx::TensorProto i16 = typedProto(kInt16, 3);
  for (int32_t v : {-32768, 5, 32767})
    i16.add_int32_data(v);
  EXPECT_EQ(values(decode(i16)), (std::vector<int64_t>{-32768, 5, 32767}));

  onnx::TensorProto u16 = typedProto(kUint16, 2);
  for (int32_t v : {0, 65535})
    u16.add_int32_data(v);
  EXPECT_EQ(values(decode(u16)), (std::vector<int64_t>{0, 65535}));

  onnx::TensorProto u32 = typedProto(kUint32, 2);
  for (uint64_t v : {uint64_t{3}, uint64_t{4294967295u}})
    u32.add_uint64_data(v);
  Tensor u32Value = decode(u32);
  EXPECT_EQ(u32Value.dtype(), DType::I64);
  EXPECT_EQ(values(u32Value), (std::vector<int64_t>{3, 4294967295}));

  onnx::TensorProto u64 = typedProto(kUint64, 2);
  for (uint64_t v : {uint64_t{1}, uint64_t{kInt64Max}})
    u64.add_uint64_data(v);
  EXPECT_EQ(values(decode(u64)), (std::vector<int64_t>{1, kInt64Max}));

  // The field must be the one the spec assigns: uint32 values in int64_data are missing.
  onnx::TensorProto misplaced = typedProto(kUint32, 1);
  misplaced.add_int64_data(1);
  expectError([&] { decode(misplaced); }, {"0 values in uint64_data", "need 1"});
}

TEST(OnnxWidenedTypes, RefusesValuesOutsideTheType) {
  onnx::TensorProto i16 = typedProto(kInt16, 2);
  i16.add_int32_data(1);
  i16.add_int32_data(40000);
  expectError([&] { decode(i16); }, {"tensor 't'", "int32_data[1] = 40000", "does not fit int16"});

  onnx::TensorProto u16 = typedProto(kUint16, 1);
  u16.add_int32_data(-1);
  expectError([&] { decode(u16); }, {"int32_data[0] = -1", "does not fit uint16"});

  onnx::TensorProto u32 = typedProto(kUint32, 1);
  u32.add_uint64_data(uint64_t{1} << 32);
  expectError([&] { decode(u32); }, {"uint64_data[0] = 4294967296", "does not fit uint32"});

  // A uint64 above INT64_MAX does not fit the i64 that holds uint64, in either encoding.
  onnx::TensorProto typed = typedProto(kUint64, 3);
  for (uint64_t v : {uint64_t{0}, uint64_t{kInt64Max}, uint64_t{kInt64Max} + 1})
    typed.add_uint64_data(v);
  expectError([&] { decode(typed); }, {"tensor 't'", "element 2", "9223372036854775808", "holds uint64 as i64"});
  expectError([&] { decode(rawProto<uint64_t>(kUint64, {5, std::numeric_limits<uint64_t>::max()})); },
              {"tensor 't'", "element 1", "18446744073709551615"});

  // raw_data is sized by the narrow element: 3 uint16 are 6 bytes, not the 12 of three i32.
  onnx::TensorProto wrongSize = rawProto<uint32_t>(kUint16, {1, 2, 3});
  expectError([&] { decode(wrongSize); }, {"12 bytes of raw_data", "uint16[3]", "needs 6"});
}

TEST(OnnxWidenedTypes, ReadsTensorFilesAndExternalData) {
  TempDir dir;
  dir.write("u32.pb", rawProto<uint32_t>(kUint32, {4000000000u, 1}).SerializeAsString());
  Tensor fromFile = frontend::readTensorProtoFile(dir.file("u32.pb"));
  EXPECT_EQ(fromFile.type(), (TensorType{DType::I64, {2}}));
  EXPECT_EQ(values(fromFile), (std::vector<int64_t>{4000000000, 1}));

  // External data holds the narrow elements too: two uint16 after 2 bytes of padding.
  uint16_t stored[2] = {65535, 9};
  dir.write("data.bin", std::string("pp") + std::string(reinterpret_cast<const char *>(stored), 4));
  onnx::TensorProto external = typedProto(kUint16, 2);
  external.set_data_location(onnx::TensorProto::EXTERNAL);
  auto addEntry = [&](const std::string &key, const std::string &value) {
    auto *entry = external.add_external_data();
    entry->set_key(key);
    entry->set_value(value);
  };
  addEntry("location", "data.bin");
  addEntry("offset", "2");
  Tensor fromExternal = frontend::decodeTensorProto(external, dir.path().string(), "tensor 'e'");
  EXPECT_EQ(fromExternal.type(), (TensorType{DType::I32, {2}}));
  EXPECT_EQ(values(fromExternal), (std::vector<int64_t>{65535, 9}));
}

// ---- ops that cannot wrap around --------------------------------------------------------------

TEST(OnnxWidenedTypes, PowWithUint32Exponent) {
  ModelBuilder m(13);
  m.input("x", DType::F32, {5});
  widenedInput(m, "e", kUint32, {5});
  m.node("Pow", {"x", "e"}, {"y"});
  m.output("y", DType::F32, {5});
  Tensor x = Tensor::fromDoubles(DType::F32, {5}, {2, -3, 0.5, 10, 1});
  Tensor e = ints(DType::I64, {5}, {3, 2, 4, 0, 4000000000});
  Tensor y = run(m, {x, e})[0];
  EXPECT_EQ(y.dtype(), DType::F32);
  std::vector<double> want;
  for (int64_t i = 0; i < 5; ++i)
    want.push_back(std::pow(x.getDouble(i), static_cast<double>(e.getInt(i))));
  expectClose(y, want);
}

TEST(OnnxWidenedTypes, PowWithUint64ExponentInitializer) {
  ModelBuilder m(13);
  m.input("x", DType::F64, {3});
  onnx::TensorProto exponent = typedProto(kUint64, 3);
  exponent.set_name("e");
  for (uint64_t v : {uint64_t{0}, uint64_t{1}, uint64_t{5}})
    exponent.add_uint64_data(v);
  *m.model.mutable_graph()->add_initializer() = exponent;
  m.node("Pow", {"x", "e"}, {"y"});
  m.output("y", DType::F64, {3});
  expectClose(run(m, {Tensor::fromDoubles(DType::F64, {3}, {7, -2, 3})})[0], {1, -2, 243});
}

TEST(OnnxWidenedTypes, MaxMinOnUint32AboveInt32Range) {
  ModelBuilder m(13);
  widenedInput(m, "a", kUint32, {4});
  widenedInput(m, "b", kUint32, {4});
  m.node("Max", {"a", "b"}, {"hi"});
  m.node("Min", {"a", "b"}, {"lo"});
  widenedOutput(m, "hi", kUint32, {4});
  widenedOutput(m, "lo", kUint32, {4});
  std::vector<int64_t> a{4000000000, 0, 5, 4294967295}, b{3, 2147483648, 5, 4294967294};
  auto out = run(m, {ints(DType::I64, {4}, a), ints(DType::I64, {4}, b)});
  ASSERT_EQ(out.size(), 2u);
  EXPECT_EQ(out[0].dtype(), DType::I64);
  for (size_t i = 0; i < a.size(); ++i) {
    EXPECT_EQ(out[0].getInt(static_cast<int64_t>(i)), a[i] > b[i] ? a[i] : b[i]) << i;
    EXPECT_EQ(out[1].getInt(static_cast<int64_t>(i)), a[i] < b[i] ? a[i] : b[i]) << i;
  }
}

TEST(OnnxWidenedTypes, ModOfInt16MixedSigns) {
  ModelBuilder m(13);
  widenedInput(m, "a", kInt16, {4});
  widenedInput(m, "b", kInt16, {4});
  m.node("Mod", {"a", "b"}, {"r"});
  widenedOutput(m, "r", kInt16, {4});
  // Floored modulo (fmod=0): the remainder takes the divisor's sign.
  Tensor r = run(m, {ints(DType::I32, {4}, {-32768, 7, -7, 32767}), ints(DType::I32, {4}, {-1, -3, 3, -32768})})[0];
  EXPECT_EQ(r.dtype(), DType::I32);
  EXPECT_EQ(values(r), (std::vector<int64_t>{0, -2, 2, -1}));
}

TEST(OnnxWidenedTypes, BitShifts) {
  auto shift = [](int32_t type, DType held, const std::string &direction, const std::vector<int64_t> &x,
                  const std::vector<int64_t> &y) {
    ModelBuilder m(13);
    Shape shape{static_cast<int64_t>(x.size())};
    widenedInput(m, "x", type, shape);
    widenedInput(m, "y", type, shape);
    setString(m.node("BitShift", {"x", "y"}, {"z"}), "direction", direction);
    widenedOutput(m, "z", type, shape);
    return values(run(m, {ints(held, shape, x), ints(held, shape, y)})[0]);
  };
  // Right shifts of every width, shifts past the width giving 0.
  EXPECT_EQ(shift(kUint16, DType::I32, "RIGHT", {65535, 65535, 40000, 1}, {4, 15, 16, 40}),
            (std::vector<int64_t>{4095, 1, 0, 0}));
  EXPECT_EQ(shift(kUint32, DType::I64, "RIGHT", {4294967295, 4294967295, 8}, {31, 32, 1}),
            (std::vector<int64_t>{1, 0, 4}));
  EXPECT_EQ(shift(kUint64, DType::I64, "RIGHT", {kInt64Max, kInt64Max, kInt64Max, 1024}, {62, 63, 64, 3}),
            (std::vector<int64_t>{1, 0, 0, 128}));
  // Left shifts wrap around in the narrow type: the bits shifted past its width are lost.
  EXPECT_EQ(shift(kUint16, DType::I32, "LEFT", {65535, 1, 3, 7}, {4, 15, 16, 0}),
            (std::vector<int64_t>{65520, 32768, 0, 7}));
  EXPECT_EQ(shift(kUint32, DType::I64, "LEFT", {2147483649, 4294967295, 1, 5}, {1, 31, 32, 2}),
            (std::vector<int64_t>{2, 2147483648, 0, 20}));
  // uint64's result need not fit the i64 that holds it.
  expectError([&] { shift(kUint64, DType::I64, "LEFT", {1}, {1}); },
              {"input 'x' is uint64, which kiln holds as i64; BitShift could wrap around in uint64"});
}

TEST(OnnxWidenedTypes, MovementComparisonAndCastFrom) {
  ModelBuilder m(13);
  widenedInput(m, "a", kUint32, {2, 2});
  widenedInput(m, "b", kUint32, {4});
  m.constant("shape", ints(DType::I64, {1}, {4}));
  m.node("Reshape", {"a", "shape"}, {"flat"});
  m.node("Identity", {"flat"}, {"same"});
  m.node("Greater", {"same", "b"}, {"gt"});
  setInt(m.node("Cast", {"same"}, {"f"}), "to", onnx::TensorProto::DOUBLE);
  m.output("gt", DType::Bool, {4});
  m.output("f", DType::F64, {4});
  std::vector<int64_t> a{4294967295, 0, 3000000000, 9}, b{1, 0, 3000000001, 8};
  auto out = run(m, {ints(DType::I64, {2, 2}, a), ints(DType::I64, {4}, b)});
  for (size_t i = 0; i < a.size(); ++i) {
    EXPECT_EQ(out[0].getInt(static_cast<int64_t>(i)), a[i] > b[i] ? 1 : 0) << i;
    EXPECT_EQ(out[1].getDouble(static_cast<int64_t>(i)), static_cast<double>(a[i])) << i;
  }
}

// ---- ops that could wrap around -------------------------------------------------------------

TEST(OnnxWidenedTypes, AddOnUint16IsRefused) {
  ModelBuilder m(13);
  widenedInput(m, "a", kUint16, {2});
  widenedInput(m, "b", kUint16, {2});
  m.node("Add", {"a", "b"}, {"c"}, "add");
  widenedOutput(m, "c", kUint16, {2});
  expectError([&] { import(m); },
              {"node 'add' (Add)", "input 'a' is uint16, which kiln holds as i32; Add could wrap around in uint16, "
                                   "so it is not supported"});
}

TEST(OnnxWidenedTypes, WrappingOpsAreRefusedThroughPassingOps) {
  // No value_info: the scan follows the type through Identity to the Mul.
  ModelBuilder m(13);
  widenedInput(m, "a", kUint32, {2});
  m.node("Identity", {"a"}, {"b"});
  m.node("Mul", {"b", "b"}, {"c"}, "square");
  widenedOutput(m, "c", kUint32, {2});
  expectError([&] { import(m); }, {"node 'square' (Mul)", "input 'b' is uint32, which kiln holds as i64"});

  // A widened Pow base could overflow; a signed int16 Div (-32768 / -1) could wrap.
  ModelBuilder pow(13);
  widenedInput(pow, "x", kUint16, {2});
  pow.input("e", DType::I64, {2});
  pow.node("Pow", {"x", "e"}, {"y"});
  widenedOutput(pow, "y", kUint16, {2});
  expectError([&] { import(pow); }, {"(Pow", "input 'x' is uint16", "Pow could wrap around in uint16"});
  ModelBuilder div(13);
  widenedInput(div, "x", kInt16, {2});
  div.node("Div", {"x", "x"}, {"y"});
  widenedOutput(div, "y", kInt16, {2});
  expectError([&] { import(div); }, {"input 'x' is int16", "Div could wrap around in int16"});

  // A cast into a widened type, even with its output type undeclared.
  ModelBuilder cast(13);
  cast.input("x", DType::F32, {2});
  setInt(cast.node("Cast", {"x"}, {"u"}, "to_u32"), "to", kUint32);
  cast.node("Max", {"u", "u"}, {"y"});
  widenedOutput(cast, "y", kUint32, {2});
  expectError([&] { import(cast); }, {"node 'to_u32' (Cast)", "output 'u' is uint32, which kiln holds as i64; Cast"});
}

TEST(OnnxWidenedTypes, UnsignedDivIsExact) {
  ModelBuilder m(13);
  widenedInput(m, "a", kUint32, {3});
  widenedInput(m, "b", kUint32, {3});
  m.node("Div", {"a", "b"}, {"q"});
  widenedOutput(m, "q", kUint32, {3});
  Tensor q = run(m, {ints(DType::I64, {3}, {4294967295, 7, 0}), ints(DType::I64, {3}, {2, 7, 5})})[0];
  EXPECT_EQ(values(q), (std::vector<int64_t>{2147483647, 1, 0}));
}

TEST(OnnxWidenedTypes, CoverageReportsWrappingOps) {
  ModelBuilder m(13);
  widenedInput(m, "a", kUint16, {2});
  widenedInput(m, "b", kUint16, {2});
  m.node("Max", {"a", "b"}, {"hi"}, "max");
  m.node("Add", {"hi", "b"}, {"sum"}, "add");
  widenedOutput(m, "sum", kUint16, {2});
  TempDir dir;
  dir.write("m.onnx", m.bytes());
  frontend::OnnxCoverage coverage = frontend::onnxCoverage(dir.file("m.onnx"));
  ASSERT_EQ(coverage.ops.size(), 2u);
  EXPECT_EQ(coverage.ops[0].opType, "Add");
  EXPECT_TRUE(coverage.ops[0].supported);
  ASSERT_EQ(coverage.ops[0].problems.size(), 1u);
  EXPECT_EQ(coverage.ops[0].problems[0], "node 'add' (Add): input 'hi' is uint16, which kiln holds as i32; Add could "
                                         "wrap around in uint16, so it is not supported");
  EXPECT_EQ(coverage.ops[1].opType, "Max");
  EXPECT_TRUE(coverage.ops[1].problems.empty());
  EXPECT_TRUE(coverage.otherProblems.empty()); // uint16 graph inputs are held, not refused
  EXPECT_FALSE(coverage.fullySupported());
}

} // namespace
