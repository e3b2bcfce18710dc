// The fusion target on the seed models (kiln issue 4): after the inference pipeline and fuse,
// a model runs in at most half as many kernels as its ONNX export has nodes. The models come
// from the folder in KILN_SEEDS_DIR (the seed export, scripts/export-seeds.sh); without it the
// tests are skipped. Each test imports its model once (VGG16 alone reads 550 MB) and prints
// "ONNX nodes -> kernels" so that a run shows where each model stands.
#include <gtest/gtest.h>

#include <cstdio>
#include <cstdlib>
#include <fstream>

#include "frontend/onnx/OnnxImporter.h"
#include "passes/PassManager.h"
#include "passes/Pipelines.h"
#include "passes/fusion/Fuse.h"

namespace kiln {
namespace {

void expectAtMostHalfAsManyKernels(const std::string &model) {
  const char *dir = std::getenv("KILN_SEEDS_DIR");
  if (!dir || !*dir)
    GTEST_SKIP() << "KILN_SEEDS_DIR is not set (the folder holding the exported seed models)";
  std::string path = std::string(dir) + "/" + model + ".onnx";
  ASSERT_TRUE(std::ifstream(path).good()) << "no seed model " << path;

  int64_t onnxNodes = frontend::onnxCoverage(path).nodeCount;
  std::unique_ptr<ir::Graph> graph = frontend::importOnnxFile(path);
  // The inference pipeline up to fusion, then fuse, whether or not the pipeline lists it yet.
  passes::PassManager manager;
  for (std::string_view pass : passes::findPipeline("inference").passes)
    if (pass != "fuse" && pass != "plan-memory")
      manager.addPass(pass);
  manager.addPass(passes::createFusePass());
  passes::PassContext context;
  manager.run(*graph, context);

  int64_t kernels = context.stats.get("kernels");
  std::printf("%-20s %5lld ONNX nodes -> %4lld kernels (%.2f)\n", model.c_str(), static_cast<long long>(onnxNodes),
              static_cast<long long>(kernels), static_cast<double>(kernels) / static_cast<double>(onnxNodes));
  ::testing::Test::RecordProperty("onnx_nodes", std::to_string(onnxNodes));
  ::testing::Test::RecordProperty("kernels", std::to_string(kernels));
  EXPECT_GT(kernels, 0);
  EXPECT_LE(2 * kernels, onnxNodes) << model << ": " << kernels << " kernels for " << onnxNodes << " ONNX nodes";
}

TEST(FusionSeed, ResNet18) { expectAtMostHalfAsManyKernels("resnet18_b1"); }
TEST(FusionSeed, ResNet50) { expectAtMostHalfAsManyKernels("resnet50_b1"); }
TEST(FusionSeed, Vgg16) { expectAtMostHalfAsManyKernels("vgg16_b1"); }
TEST(FusionSeed, BertBase) { expectAtMostHalfAsManyKernels("bert_base_s128"); }
TEST(FusionSeed, BertMini) { expectAtMostHalfAsManyKernels("bert_mini_s128_b8"); }

} // namespace
} // namespace kiln
