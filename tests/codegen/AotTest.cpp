// Models compiled ahead of time (codegen::compileAheadOfTime): the shared object carries its
// weights (parameters, given values overriding initial ones, and large constants, each 64-byte
// aligned in weight order), loads with no weights given and matches the reference evaluator;
// it is not put in the compile cache and leaves no temporary files; a truncated, corrupted,
// foreign or other-ABI shared object is a kiln::Error at load time.
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <iterator>

#include <gtest/gtest.h>

#include "tests/ErrorMatchers.h"

#include "codegen/CompileModel.h"
#include "core/Error.h"
#include "frontend/Frontend.h"
#include "ir/Evaluator.h"
#include "tests/codegen/CodegenTestUtil.h"

namespace kiln::codegen::test {
namespace {

namespace fs = std::filesystem;
using frontend::GraphBuilder;
using frontend::Var;

using kiln::test::errorOf;

std::string readBytes(const fs::path &path) {
  std::ifstream file(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(file), {});
}

void writeBytes(const fs::path &path, const std::string &bytes) {
  std::ofstream file(path, std::ios::binary);
  file << bytes;
}

/// y = relu(x @ w + b) and z = x * c, with c a constant large enough to be a weight: three
/// weights of 60, 12 and 320 bytes, so that two need padding to 64 bytes.
std::unique_ptr<ir::Graph> smallModel() {
  GraphBuilder gb("aot");
  Var x = gb.input("x", DType::F32, {16, 5});
  Var w = gb.param("w", randomTensor({DType::F32, {5, 3}}, 11));
  Var b = gb.param("b", randomTensor({DType::F32, {3}}, 12));
  Var c = gb.constant(randomTensor({DType::F32, {16, 5}}, 13));
  Var y = frontend::relu(frontend::matmul(x, w) + b);
  y.setName("y");
  Var z = x * c;
  z.setName("z");
  return gb.finish({y, z});
}

/// One model compiled ahead of time for the whole suite (a compile takes about a second).
class CodegenAot : public ::testing::Test {
protected:
  static void SetUpTestSuite() {
    dir_ = new fs::path(fs::temp_directory_path() / ("kiln-aot-test-" + std::to_string(::getpid())));
    fs::remove_all(*dir_);
    fs::create_directories(*dir_ / "cache");
    graph_ = smallModel().release();
    options_ = new CompileOptions(testOptions());
    options_->compiler.cacheDir = (*dir_ / "cache").string();
    options_->params["b"] = Tensor::fromDoubles(DType::F32, {3}, {0.25, -0.5, 1.0}); // overrides b's initial value
    AotOptions aot;
    aot.buildDir = (*dir_ / "build").string();
    model_ = new AotModel(compileAheadOfTime(*graph_, (*dir_ / "model.so").string(), *options_, aot));
  }
  static void TearDownTestSuite() {
    fs::remove_all(*dir_);
    delete model_;
    delete options_;
    delete graph_;
    delete dir_;
  }

  static fs::path *dir_;
  static ir::Graph *graph_;
  static CompileOptions *options_;
  static AotModel *model_;
};

fs::path *CodegenAot::dir_ = nullptr;
ir::Graph *CodegenAot::graph_ = nullptr;
CompileOptions *CodegenAot::options_ = nullptr;
AotModel *CodegenAot::model_ = nullptr;

TEST_F(CodegenAot, LoadsWithNoWeightsAndMatchesTheReferenceEvaluator) {
  runtime::Executable executable = runtime::Executable::load(model_->soPath);
  ASSERT_EQ(executable.weights().size(), 3u);
  EXPECT_EQ(executable.weights()[0].name, "w");
  EXPECT_EQ(executable.weights()[1].name, "b");
  std::vector<Tensor> inputs = randomInputs(*graph_, 5);
  std::vector<Tensor> got = executable.run(inputs);
  std::vector<Tensor> want = ir::evaluate(*graph_, inputs, options_->params);
  ASSERT_EQ(got.size(), 2u);
  for (size_t i = 0; i < got.size(); ++i) {
    Comparison comparison = compareTensors(got[i], want[i], 1e-5, 1e-6);
    EXPECT_TRUE(comparison.ok) << "output " << i << ": " << comparison.message;
  }
  // z = x * c by hand, element 7: the constant is the one drawn with seed 13.
  Tensor c = randomTensor({DType::F32, {16, 5}}, 13);
  EXPECT_FLOAT_EQ(static_cast<float>(got[1].getDouble(7)),
                  static_cast<float>(inputs[0].getDouble(7) * c.getDouble(7)));
}

TEST_F(CodegenAot, WeightsFileIsAlignedAndInWeightOrder) {
  EXPECT_EQ(model_->numWeights, 3);
  // w: 60 bytes padded to 64; b: 12 bytes padded to 64; c: 320 bytes.
  EXPECT_EQ(model_->weightBytes, 64 + 64 + 320);
  std::string blob = readBytes(*dir_ / "build" / "weights.bin");
  ASSERT_EQ(blob.size(), 448u);
  float b[3];
  std::memcpy(b, blob.data() + 64, sizeof b);
  EXPECT_EQ(b[0], 0.25f); // the given value, not the initial one
  EXPECT_EQ(b[1], -0.5f);
  EXPECT_EQ(b[2], 1.0f);
  EXPECT_EQ(blob.substr(60, 4), std::string(4, '\0')); // padding after w
  float c0;
  std::memcpy(&c0, blob.data() + 128, sizeof c0);
  EXPECT_EQ(c0, static_cast<float>(randomTensor({DType::F32, {16, 5}}, 13).getDouble(0)));
  std::string source = readBytes(model_->sourcePath);
  EXPECT_NE(source.find(".incbin"), std::string::npos);
  EXPECT_NE(source.find("kiln_model(void)"), std::string::npos);
}

TEST_F(CodegenAot, IsNotPutInTheCompileCacheAndLeavesNoTemporaryFiles) {
  EXPECT_TRUE(fs::is_empty(*dir_ / "cache"));
  for (const fs::directory_entry &entry : fs::directory_iterator(*dir_))
    EXPECT_EQ(entry.path().filename().string().find(".kiln-build"), std::string::npos) << entry.path();
}

TEST_F(CodegenAot, TruncatedModelIsAnError) {
  std::string bytes = readBytes(model_->soPath);
  for (size_t keep : {size_t(0), size_t(100), bytes.size() / 3, bytes.size() / 2}) {
    fs::path cut = *dir_ / ("cut" + std::to_string(keep) + ".so");
    writeBytes(cut, bytes.substr(0, keep));
    std::string message = errorOf([&] { runtime::Executable::load(cut.string()); });
    EXPECT_NE(message.find("cannot load model '" + cut.string() + "'"), std::string::npos)
        << keep << " bytes: " << message;
  }
}

TEST_F(CodegenAot, CorruptedHeaderIsAnError) {
  std::string bytes = readBytes(model_->soPath);
  bytes.replace(0, 4, "KILN");
  fs::path bad = *dir_ / "corrupt.so";
  writeBytes(bad, bytes);
  std::string message = errorOf([&] { runtime::Executable::load(bad.string()); });
  EXPECT_NE(message.find("cannot load model '" + bad.string() + "'"), std::string::npos) << message;
}

TEST_F(CodegenAot, SharedObjectThatIsNoKilnModelIsAnError) {
  // The shared test cache, not the suite's (which must stay empty): a second run is a load.
  std::string soPath =
      compileSource("extern \"C\" int kiln_aot_test_not_a_model(void) { return 1; }\n", testOptions().compiler).soPath;
  std::string message = errorOf([&] { runtime::Executable::load(soPath); });
  EXPECT_NE(message.find("is not a kiln model: it exports no 'kiln_model' symbol"), std::string::npos) << message;
}

TEST_F(CodegenAot, ModelOfAnotherAbiVersionIsAnError) {
  std::string source = sourcePrelude() +
                       "extern \"C\" const kiln_model_desc *kiln_model(void) {\n"
                       "  static const kiln_model_desc desc = {KILN_ABI_VERSION + 1, 0, 0, 0, 0, NULL, NULL, NULL,\n"
                       "                                      NULL, NULL, 0, NULL};\n"
                       "  return &desc;\n}\n";
  std::string soPath = compileSource(source, testOptions().compiler).soPath;
  std::string message = errorOf([&] { runtime::Executable::load(soPath); });
  EXPECT_NE(message.find(fmt::format("was built for kiln ABI version {}", KILN_ABI_VERSION + 1)), std::string::npos)
      << message;
}

TEST(CodegenAotErrors, ParameterWithoutValueIsNamedBeforeCompiling) {
  GraphBuilder gb("novalue");
  Var x = gb.input("x", DType::F32, {2});
  Var w = gb.param("scale", TensorType{DType::F32, {2}});
  auto graph = gb.finish({x * w});
  fs::path out = fs::temp_directory_path() / ("kiln-aot-novalue-" + std::to_string(::getpid()) + ".so");
  std::string message = errorOf([&] { compileAheadOfTime(*graph, out.string(), testOptions()); });
  EXPECT_NE(message.find("parameter 'scale' has no value"), std::string::npos) << message;
  EXPECT_FALSE(fs::exists(out));
}

TEST(CodegenAotErrors, MisalignedCarriedWeightsAreAnError) {
  static const int64_t shape[1] = {2};
  static const kiln_tensor_desc weight = {"w", "f32", 1, shape};
  alignas(64) static unsigned char bytes[128] = {};
  kiln_model_desc desc{};
  desc.abi_version = KILN_ABI_VERSION;
  desc.num_weights = 1;
  desc.weights = &weight;
  desc.weight_data = bytes + 4;
  std::string message = errorOf([&] { runtime::Executable::fromDescription(desc, {}); });
  EXPECT_NE(message.find("not 64-byte aligned"), std::string::npos) << message;
}

} // namespace
} // namespace kiln::codegen::test
