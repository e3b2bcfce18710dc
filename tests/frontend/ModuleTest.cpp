// nn modules: PyTorch's parameter names, shapes, default initialisation and state_dict
// order; tracing into graphs (shared parameters, train/eval behaviour); and a small CNN built
// with Sequential that evaluates to the expected shape and values.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>

#include "core/Error.h"
#include "frontend/Frontend.h"
#include "ir/Evaluator.h"
#include "ir/GraphEquality.h"
#include "ir/Parser.h"
#include "ir/Printer.h"

using namespace kiln;
using namespace kiln::frontend;
namespace nn = kiln::frontend::nn;

namespace {

std::vector<std::string> namesOf(const nn::NamedTensors &tensors) {
  std::vector<std::string> names;
  for (const auto &[name, value] : tensors)
    names.push_back(name);
  return names;
}

/// Every element lies in [-bound, bound] and the spread reaches most of it.
void expectUniformWithin(const Tensor &t, double bound) {
  double lo = 1e9, hi = -1e9;
  for (int64_t i = 0; i < t.numElements(); ++i) {
    double v = t.getDouble(i);
    EXPECT_LE(std::fabs(v), bound + 1e-7);
    lo = std::min(lo, v);
    hi = std::max(hi, v);
  }
  if (t.numElements() >= 100) {
    EXPECT_LT(lo, -0.8 * bound);
    EXPECT_GT(hi, 0.8 * bound);
  }
}

} // namespace

TEST(FrontendModule, LinearMatchesTorchNamesShapesAndInit) {
  nn::manualSeed(0);
  nn::Linear fc(20, 30);
  auto params = fc.namedParameters();
  ASSERT_EQ(namesOf(params), (std::vector<std::string>{"weight", "bias"}));
  EXPECT_EQ(params[0].second.type(), (TensorType{DType::F32, {30, 20}}));
  EXPECT_EQ(params[1].second.type(), (TensorType{DType::F32, {30}}));
  expectUniformWithin(params[0].second, 1 / std::sqrt(20.0));
  expectUniformWithin(params[1].second, 1 / std::sqrt(20.0));
  EXPECT_EQ(fc.numParameters(), 20 * 30 + 30);
  nn::Linear noBias(4, 2, false);
  EXPECT_EQ(namesOf(noBias.namedParameters()), (std::vector<std::string>{"weight"}));
}

TEST(FrontendModule, Conv2dMatchesTorchNamesShapesAndInit) {
  nn::Conv2d conv(3, 16, {3});
  auto params = conv.namedParameters();
  ASSERT_EQ(namesOf(params), (std::vector<std::string>{"weight", "bias"}));
  EXPECT_EQ(params[0].second.shape(), (Shape{16, 3, 3, 3}));
  EXPECT_EQ(params[1].second.shape(), (Shape{16}));
  expectUniformWithin(params[0].second, 1 / std::sqrt(27.0));
  expectUniformWithin(params[1].second, 1 / std::sqrt(27.0));
  nn::Conv2d grouped(8, 4, {3, 5}, {1}, {0}, {1}, 2, false);
  EXPECT_EQ(grouped.tensor("weight").shape(), (Shape{4, 4, 3, 5}));
  expectUniformWithin(grouped.tensor("weight"), 1 / std::sqrt(4.0 * 15));
  EXPECT_FALSE(grouped.hasTensor("bias"));
  EXPECT_THROW(nn::Conv2d(3, 4, {3}, {1}, {0}, {1}, 2), Error);
  EXPECT_THROW(nn::Conv2d(4, 4, {0}), Error);
}

TEST(FrontendModule, SeededInitIsReproducible) {
  nn::manualSeed(42);
  nn::Linear a(5, 5);
  nn::manualSeed(42);
  nn::Linear b(5, 5);
  nn::Linear c(5, 5);
  EXPECT_TRUE(a.tensor("weight").identical(b.tensor("weight")));
  EXPECT_TRUE(a.tensor("bias").identical(b.tensor("bias")));
  EXPECT_FALSE(a.tensor("weight").identical(c.tensor("weight")));
}

TEST(FrontendModule, NormLayersInitAndStateDict) {
  nn::BatchNorm2d bn(4);
  EXPECT_EQ(namesOf(bn.namedParameters()), (std::vector<std::string>{"weight", "bias"}));
  EXPECT_EQ(namesOf(bn.namedBuffers()),
            (std::vector<std::string>{"running_mean", "running_var", "num_batches_tracked"}));
  EXPECT_EQ(namesOf(bn.stateDict()), (std::vector<std::string>{"weight", "bias", "running_mean", "running_var",
                                                               "num_batches_tracked"}));
  EXPECT_EQ(bn.tensor("weight").toDoubles(), std::vector<double>(4, 1.0));
  EXPECT_EQ(bn.tensor("bias").toDoubles(), std::vector<double>(4, 0.0));
  EXPECT_EQ(bn.tensor("running_mean").toDoubles(), std::vector<double>(4, 0.0));
  EXPECT_EQ(bn.tensor("running_var").toDoubles(), std::vector<double>(4, 1.0));
  nn::LayerNorm ln({2, 3});
  EXPECT_EQ(ln.tensor("weight").shape(), (Shape{2, 3}));
  EXPECT_EQ(ln.tensor("weight").toDoubles(), std::vector<double>(6, 1.0));
  EXPECT_EQ(ln.tensor("bias").toDoubles(), std::vector<double>(6, 0.0));
  EXPECT_TRUE(nn::LayerNorm({3}, 1e-5, false).namedParameters().empty());
}

TEST(FrontendModule, SequentialNamesChildrenLikeTorch) {
  auto features = std::make_shared<nn::Sequential>(std::initializer_list<std::shared_ptr<nn::Module>>{
      std::make_shared<nn::Conv2d>(3, 8, Ints{3}), std::make_shared<nn::BatchNorm2d>(8),
      std::make_shared<nn::ReLU>()});
  nn::Sequential model{features, std::make_shared<nn::Flatten>(), std::make_shared<nn::Linear>(8, 2)};
  EXPECT_EQ(model.size(), 3u);
  EXPECT_EQ(features->path(), "0");
  EXPECT_EQ((*features)[1]->path(), "0.1");
  EXPECT_EQ(namesOf(model.namedParameters()),
            (std::vector<std::string>{"0.0.weight", "0.0.bias", "0.1.weight", "0.1.bias", "2.weight", "2.bias"}));
  EXPECT_EQ(namesOf(model.stateDict()),
            (std::vector<std::string>{"0.0.weight", "0.0.bias", "0.1.weight", "0.1.bias", "0.1.running_mean",
                                      "0.1.running_var", "0.1.num_batches_tracked", "2.weight", "2.bias"}));
  // A child's own view is relative to itself, as in PyTorch.
  EXPECT_EQ(namesOf(features->namedParameters())[0], "0.weight");
  EXPECT_THROW(model[3], Error);
}

TEST(FrontendModule, TracingCreatesNamedParamsCarryingValues) {
  nn::Sequential model{std::make_shared<nn::Linear>(4, 3), std::make_shared<nn::ReLU>(),
                       std::make_shared<nn::Linear>(3, 2)};
  GraphBuilder gb("mlp");
  Var x = gb.input("x", DType::F32, {5, 4});
  Var y = model(x);
  EXPECT_EQ(y.shape(), (Shape{5, 2}));
  auto graph = gb.finish({y});
  std::vector<std::string> paramNames;
  for (const ir::Node *p : graph->params()) {
    paramNames.push_back(p->attrString("name"));
    EXPECT_TRUE(p->attrTensor("value").defined());
  }
  std::sort(paramNames.begin(), paramNames.end());
  EXPECT_EQ(paramNames, (std::vector<std::string>{"0.bias", "0.weight", "2.bias", "2.weight"}));

  // Against a loop over the module's own tensors.
  Tensor in = randomTensor({DType::F32, {5, 4}}, 3);
  Tensor out = ir::evaluate(*graph, {in})[0];
  const Tensor &w1 = model[0]->tensor("weight"), &b1 = model[0]->tensor("bias");
  const Tensor &w2 = model[2]->tensor("weight"), &b2 = model[2]->tensor("bias");
  for (int64_t r = 0; r < 5; ++r) {
    std::vector<double> hidden(3);
    for (int64_t h = 0; h < 3; ++h) {
      double acc = b1.getDouble(h);
      for (int64_t k = 0; k < 4; ++k)
        acc += in.getDouble(r * 4 + k) * w1.getDouble(h * 4 + k);
      hidden[h] = std::max(acc, 0.0);
    }
    for (int64_t o = 0; o < 2; ++o) {
      double acc = b2.getDouble(o);
      for (int64_t h = 0; h < 3; ++h)
        acc += hidden[h] * w2.getDouble(o * 3 + h);
      EXPECT_NEAR(out.getDouble(r * 2 + o), acc, 1e-5);
    }
  }
}

TEST(FrontendModule, CallingAModuleTwiceSharesItsParameters) {
  auto fc = std::make_shared<nn::Linear>(3, 3);
  GraphBuilder gb;
  Var x = gb.input("x", DType::F32, {1, 3});
  Var y = (*fc)((*fc)(x));
  auto graph = gb.finish({y});
  EXPECT_EQ(graph->params().size(), 2u);
}

TEST(FrontendModule, LoadStateDictChecksNamesAndTypes) {
  nn::Sequential model{std::make_shared<nn::Linear>(2, 2)};
  Tensor w = Tensor::fromDoubles(DType::F32, {2, 2}, {1, 2, 3, 4});
  Tensor b = Tensor::fromDoubles(DType::F32, {2}, {5, 6});
  model.loadStateDict({{"0.weight", w}, {"0.bias", b}});
  EXPECT_EQ(model[0]->tensor("weight").toDoubles(), w.toDoubles());
  EXPECT_THROW(model.loadStateDict({{"0.weight", w}}), Error);                                 // missing
  EXPECT_THROW(model.loadStateDict({{"0.weight", w}, {"0.bias", b}, {"extra", b}}), Error);  // unexpected
  EXPECT_THROW(model.loadStateDict({{"0.weight", b}, {"0.bias", b}}), Error);                // wrong type
  model.loadStateDict({{"0.bias", Tensor::fromDoubles(DType::F32, {2}, {7, 8})}}, false);
  EXPECT_EQ(model[0]->tensor("bias").toDoubles(), (std::vector<double>{7, 8}));
  EXPECT_EQ(model[0]->tensor("weight").toDoubles(), w.toDoubles());
}

TEST(FrontendModule, SmallCnnTracesAndEvaluates) {
  nn::manualSeed(1);
  nn::Sequential model{std::make_shared<nn::Conv2d>(3, 8, Ints{3}, Ints{1}, Ints{1}),
                       std::make_shared<nn::BatchNorm2d>(8),
                       std::make_shared<nn::ReLU>(),
                       std::make_shared<nn::MaxPool2d>(Ints{2}),
                       std::make_shared<nn::Dropout>(0.25),
                       std::make_shared<nn::Flatten>(),
                       std::make_shared<nn::Linear>(8 * 4 * 4, 10)};
  model.eval();
  GraphBuilder gb("cnn");
  Var x = gb.input("x", DType::F32, {2, 3, 8, 8});
  Var logits = model(x);
  EXPECT_EQ(logits.shape(), (Shape{2, 10}));
  auto graph = gb.finish({logits});
  EXPECT_EQ(graph->params().size(), 8u); // conv w/b, bn weight/bias/mean/var, linear w/b
  Tensor out = ir::evaluate(*graph, {randomTensor({DType::F32, {2, 3, 8, 8}}, 0)})[0];
  EXPECT_EQ(out.shape(), (Shape{2, 10}));
  for (int64_t i = 0; i < out.numElements(); ++i)
    EXPECT_TRUE(std::isfinite(out.getDouble(i)));
}

TEST(FrontendModule, TracedGraphSurvivesTheTextForm) {
  nn::Sequential model{std::make_shared<nn::Conv2d>(1, 2, Ints{3}), std::make_shared<nn::BatchNorm2d>(2),
                       std::make_shared<nn::GELU>(), std::make_shared<nn::AvgPool2d>(Ints{2}),
                       std::make_shared<nn::Flatten>(), std::make_shared<nn::LayerNorm>(Shape{2}),
                       std::make_shared<nn::Linear>(2, 3)};
  model.eval();
  GraphBuilder gb("traced");
  Var x = gb.input("image.in", DType::F32, {1, 1, 4, 4});
  Var y = model(x);
  auto graph = gb.finish({{"head.out", y}, {"probabilities", softmax(y)}});
  ir::PrintOptions keep;
  keep.keepLargeTensors = true;
  auto parsed = ir::parseGraph(ir::printGraph(*graph, keep), "traced.kir");
  EXPECT_EQ(ir::graphDifference(*graph, *parsed), "");
  Tensor in = randomTensor({DType::F32, {1, 1, 4, 4}}, 5);
  EXPECT_TRUE(ir::evaluate(*graph, {in})[1].identical(ir::evaluate(*parsed, {in})[1]));
}

TEST(FrontendModule, BatchNormEvalUsesRunningStatsTrainingUsesBatchStats) {
  nn::BatchNorm2d bn(1, 0.0);
  bn.loadStateDict({{"weight", Tensor::fromDoubles(DType::F32, {1}, {1})},
                    {"bias", Tensor::fromDoubles(DType::F32, {1}, {0})},
                    {"running_mean", Tensor::fromDoubles(DType::F32, {1}, {1})},
                    {"running_var", Tensor::fromDoubles(DType::F32, {1}, {4})},
                    {"num_batches_tracked", Tensor::scalar(DType::I64, 0)}});
  Tensor in = Tensor::fromDoubles(DType::F32, {1, 1, 1, 2}, {3, 5});
  EXPECT_TRUE(bn.isTraining()); // PyTorch's default
  bn.eval();
  {
    GraphBuilder gb;
    Var y = bn(gb.input("x", DType::F32, {1, 1, 1, 2}));
    auto graph = gb.finish({y});
    EXPECT_EQ(ir::evaluate(*graph, {in})[0].toDoubles(), (std::vector<double>{1, 2})); // (x - 1) / 2
  }
  bn.train();
  {
    GraphBuilder gb;
    Var y = bn(gb.input("x", DType::F32, {1, 1, 1, 2}));
    auto graph = gb.finish({y});
    Tensor out = ir::evaluate(*graph, {in})[0]; // batch mean 4, biased variance 1
    EXPECT_NEAR(out.getDouble(0), -1, 1e-6);
    EXPECT_NEAR(out.getDouble(1), 1, 1e-6);
  }
}

TEST(FrontendModule, DropoutIsIdentityInEvalAndAMaskInTraining) {
  nn::Dropout dropout(0.5);
  GraphBuilder gb;
  Var x = gb.input("x", DType::F32, {3});
  EXPECT_EQ(dropout(x).value()->producer()->op(), ir::OpKind::Where);
  dropout.eval();
  EXPECT_EQ(dropout(x).value(), x.value());
  EXPECT_EQ(nn::Dropout(0.0)(x).value(), x.value()); // p = 0 is the identity even in training
  EXPECT_THROW(nn::Dropout(1.5), Error);
}

TEST(FrontendModule, ErrorsInsideModulesNameTheModuleAndKeepTheShapes) {
  nn::Sequential model{std::make_shared<nn::Linear>(4, 3), std::make_shared<nn::Linear>(5, 2)};
  GraphBuilder gb;
  Var x = gb.input("x", DType::F32, {2, 4});
  try {
    model(x);
    FAIL() << "expected a kiln::Error";
  } catch (const Error &e) {
    std::string message = e.what();
    EXPECT_EQ(message.rfind("in module '1' (Linear): ", 0), 0u) << message;
    EXPECT_NE(message.find("linear"), std::string::npos) << message;
    EXPECT_NE(message.find("f32[2,3]"), std::string::npos) << message;
    EXPECT_NE(message.find("f32[2,5]"), std::string::npos) << message;
  }
  nn::BatchNorm2d bn(3);
  EXPECT_THROW(bn(gb.input("img", DType::F32, {1, 4, 2, 2})), Error);
  nn::LayerNorm ln({5});
  EXPECT_THROW(ln(x), Error);
}

TEST(FrontendModule, PoolingAndActivationModules) {
  GraphBuilder gb;
  Var x = gb.input("x", DType::F32, {1, 2, 6, 6});
  EXPECT_EQ(nn::MaxPool2d({3}, {2}, {1})(x).shape(), (Shape{1, 2, 3, 3}));
  EXPECT_EQ(nn::AvgPool2d({2})(x).shape(), (Shape{1, 2, 3, 3}));
  EXPECT_EQ(nn::GELU("tanh")(x).value()->producer()->attrString("approximate"), "tanh");
  EXPECT_EQ(nn::Flatten()(x).shape(), (Shape{1, 72}));
  EXPECT_EQ(nn::Flatten(0)(x).shape(), (Shape{72}));
  EXPECT_EQ(nn::ReLU()(x).value()->producer()->op(), ir::OpKind::Relu);
}
