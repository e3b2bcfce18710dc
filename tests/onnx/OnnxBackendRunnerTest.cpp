// The ONNX backend test runner behind `kiln-run --onnx-test`: test folders are written here
// (model.onnx and test_data_set_0/input_<i>.pb, output_<i>.pb) and run; every outcome - pass,
// each kind of failure, each reason to skip - is checked, and nothing may throw.
#include <filesystem>

#include "OnnxTestModel.h"
#include "frontend/onnx/OnnxBackendTest.h"

using namespace kiln;
using namespace kiln::onnxtest;
using frontend::OnnxTestStatus;

namespace {

/// Writes one backend test folder `name` under `root`.
std::string writeTest(const TempDir &root, const std::string &name, const ModelBuilder &m,
                      const std::vector<Tensor> &inputs, const std::vector<Tensor> &outputs) {
  std::filesystem::path dir = root.path() / name;
  std::filesystem::create_directories(dir / "test_data_set_0");
  root.write(name + "/model.onnx", m.bytes());
  for (size_t i = 0; i < inputs.size(); ++i)
    root.write(name + "/test_data_set_0/input_" + std::to_string(i) + ".pb",
               tensorProto(inputs[i]).SerializeAsString());
  for (size_t i = 0; i < outputs.size(); ++i)
    root.write(name + "/test_data_set_0/output_" + std::to_string(i) + ".pb",
               tensorProto(outputs[i]).SerializeAsString());
  return dir.string();
}

ModelBuilder addModel(DType dtype) {
  ModelBuilder m(13);
  m.input("a", dtype, {3});
  m.input("b", dtype, {3});
  m.node("Add", {"a", "b"}, {"y"});
  m.output("y", dtype, {3});
  return m;
}

Tensor f32(const std::vector<double> &values) {
  return Tensor::fromDoubles(DType::F32, {static_cast<int64_t>(values.size())}, values);
}

TEST(OnnxBackendRunner, PassAndFailureReasons) {
  TempDir root;
  Tensor a = f32({1, 2, NAN}), b = f32({0.5, 0.25, 1});
  auto pass =
      frontend::runOnnxTestDir(writeTest(root, "test_ok", addModel(DType::F32), {a, b}, {f32({1.5, 2.25, NAN})}));
  EXPECT_EQ(pass.name, "test_ok");
  EXPECT_EQ(pass.status, OnnxTestStatus::Pass) << pass.reason;

  // Within rtol 1e-3 passes; just outside fails, naming the data set, output and element.
  auto close = frontend::runOnnxTestDir(
      writeTest(root, "test_close", addModel(DType::F32), {a, b}, {f32({1.5 * (1 + 9e-4), 2.25, NAN})}));
  EXPECT_EQ(close.status, OnnxTestStatus::Pass) << close.reason;
  auto far = frontend::runOnnxTestDir(
      writeTest(root, "test_far", addModel(DType::F32), {a, b}, {f32({1.5, 2.25 * (1 + 2e-3), NAN})}));
  EXPECT_EQ(far.status, OnnxTestStatus::Fail);
  EXPECT_NE(far.reason.find("test_data_set_0 output 0 ('y')"), std::string::npos) << far.reason;
  EXPECT_NE(far.reason.find("[1]"), std::string::npos) << far.reason;

  // Integers compare exactly, and the dtype must match.
  Tensor ia = Tensor::fromDoubles(DType::I64, {3}, {1, 2, 3});
  auto exact = frontend::runOnnxTestDir(
      writeTest(root, "test_int", addModel(DType::I64), {ia, ia}, {Tensor::fromDoubles(DType::I64, {3}, {2, 4, 7})}));
  EXPECT_EQ(exact.status, OnnxTestStatus::Fail);
  EXPECT_NE(exact.reason.find("got 6, expected 7"), std::string::npos) << exact.reason;
  auto dtype = frontend::runOnnxTestDir(
      writeTest(root, "test_dtype", addModel(DType::I64), {ia, ia}, {Tensor::fromDoubles(DType::I32, {3}, {2, 4, 6})}));
  EXPECT_EQ(dtype.status, OnnxTestStatus::Fail);
  EXPECT_NE(dtype.reason.find("expected i32[3]"), std::string::npos) << dtype.reason;
}

TEST(OnnxBackendRunner, BrokenFoldersFailWithoutThrowing) {
  TempDir root;
  Tensor a = f32({1, 2, 3});
  auto missing = frontend::runOnnxTestDir(writeTest(root, "test_one_input", addModel(DType::F32), {a}, {a}));
  EXPECT_EQ(missing.status, OnnxTestStatus::Fail);
  EXPECT_NE(missing.reason.find("1 input files for the model's 2 inputs"), std::string::npos) << missing.reason;

  std::string corrupt = writeTest(root, "test_corrupt", addModel(DType::F32), {a, a}, {a});
  root.write("test_corrupt/model.onnx", "not a model");
  auto bad = frontend::runOnnxTestDir(corrupt);
  EXPECT_EQ(bad.status, OnnxTestStatus::Fail);
  EXPECT_FALSE(bad.reason.empty());

  // NonZero's output shape depends on the data, which kiln's static shapes cannot express.
  ModelBuilder nonzero(13);
  nonzero.input("a", DType::F32, {3});
  nonzero.node("NonZero", {"a"}, {"y"});
  nonzero.output("y", DType::I64, {1, -1});
  std::string unmapped =
      writeTest(root, "test_nonzero", nonzero, {a}, {Tensor::fromDoubles(DType::I64, {1, 3}, {0, 1, 2})});
  auto noMapping = frontend::runOnnxTestDir(unmapped);
  EXPECT_EQ(noMapping.status, OnnxTestStatus::Fail);
  EXPECT_NE(noMapping.reason.find("no mapping for op type 'NonZero'"), std::string::npos) << noMapping.reason;

  std::filesystem::remove_all(root.path() / "test_nonzero" / "test_data_set_0");
  EXPECT_NE(frontend::runOnnxTestDir(unmapped).reason.find("no test_data_set_"), std::string::npos);
}

TEST(OnnxBackendRunner, SkipsWhatKilnDoesNotModel) {
  TempDir root;
  ModelBuilder sequence(13);
  sequence.input("x", DType::F32, {2});
  sequence.node("SequenceConstruct", {"x"}, {"s"});
  auto *out = sequence.model.mutable_graph()->add_output();
  out->set_name("s");
  out->mutable_type()->mutable_sequence_type()->mutable_elem_type()->mutable_tensor_type()->set_elem_type(
      onnx::TensorProto::FLOAT);
  ModelBuilder random(13);
  random.input("x", DType::F32, {2});
  random.node("RandomUniformLike", {"x"}, {"y"});
  random.output("y", DType::F32, {2});
  ModelBuilder strings(13);
  strings.input("x", DType::F32, {2});
  setInt(strings.node("Cast", {"x"}, {"y"}), "to", onnx::TensorProto::STRING);
  strings.output("y", DType::F32, {2});
  struct Case {
    const char *name;
    const ModelBuilder *model;
    const char *reason;
  };
  for (const Case &c : {Case{"test_seq", &sequence, "sequences"}, Case{"test_random", &random, "nondeterministic"},
                        Case{"test_string", &strings, "strings"}}) {
    SCOPED_TRACE(c.name);
    auto result = frontend::runOnnxTestDir(writeTest(root, c.name, *c.model, {f32({1, 2})}, {}));
    EXPECT_EQ(result.status, OnnxTestStatus::Skip);
    EXPECT_NE(result.reason.find(c.reason), std::string::npos) << result.reason;
  }
}

// The backend tests pass shape operands as inputs and may declare shapes their data lack;
// bfloat16 data is written as uint16 by ONNX 1.12 and read back as bfloat16.
TEST(OnnxBackendRunner, InputsFixTheModelAndBfloat16DataIsReinterpreted) {
  TempDir root;
  ModelBuilder reshape(13);
  reshape.input("x", DType::F32, {4});
  reshape.input("shape", DType::I64, {2});
  reshape.node("Reshape", {"x", "shape"}, {"y"});
  reshape.output("y", DType::F32, {2, 2});
  Tensor x = f32({1, 2, 3, 4});
  auto shaped = frontend::runOnnxTestDir(writeTest(
      root, "test_reshape", reshape, {x, Tensor::fromDoubles(DType::I64, {2}, {2, -1})}, {x.reshaped({2, 2})}));
  EXPECT_EQ(shaped.status, OnnxTestStatus::Pass) << shaped.reason;

  ModelBuilder cast(13);
  cast.input("x", DType::BF16, {2});
  setInt(cast.node("Cast", {"x"}, {"y"}), "to", onnx::TensorProto::FLOAT);
  cast.output("y", DType::F32, {2});
  std::string dir = writeTest(root, "test_bf16", cast, {}, {f32({1.5, -2})});
  onnx::TensorProto bits;
  bits.set_data_type(onnx::TensorProto::UINT16);
  bits.add_dims(2);
  bits.add_int32_data(floatToBFloat16(1.5f));
  bits.add_int32_data(floatToBFloat16(-2.0f));
  root.write("test_bf16/test_data_set_0/input_0.pb", bits.SerializeAsString());
  auto result = frontend::runOnnxTestDir(dir);
  EXPECT_EQ(result.status, OnnxTestStatus::Pass) << result.reason;
}

TEST(OnnxBackendRunner, FindsTestFoldersSorted) {
  TempDir root;
  Tensor a = f32({1, 2, 3});
  writeTest(root, "test_b", addModel(DType::F32), {a, a}, {a});
  writeTest(root, "test_a", addModel(DType::F32), {a, a}, {a});
  std::filesystem::create_directories(root.path() / "not_a_test");
  std::vector<std::string> dirs = frontend::findOnnxTestDirs({root.path().string()});
  ASSERT_EQ(dirs.size(), 2u);
  EXPECT_EQ(std::filesystem::path(dirs[0]).filename(), "test_a");
  EXPECT_EQ(std::filesystem::path(dirs[1]).filename(), "test_b");
  EXPECT_EQ(frontend::findOnnxTestDirs({dirs[1]}), std::vector<std::string>{dirs[1]});
  expectError([&] { frontend::findOnnxTestDirs({(root.path() / "not_a_test").string()}); },
              {"not_a_test", "neither model.onnx nor subfolders"});
  expectError([&] { frontend::findOnnxTestDirs({root.file("nothere")}); }, {"nothere", "not a folder"});
}

} // namespace
