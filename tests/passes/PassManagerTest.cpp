// The pass registry, the pipelines and the PassManager: lookup by name with errors that list
// the known names, verification after every pass (an error names the pass), per-pass records
// (changed, time, counters), counters summed in the context, and the after-pass callback.
#include <gtest/gtest.h>

#include <set>

#include "core/Error.h"
#include "ir/Printer.h"
#include "passes/PassManager.h"
#include "passes/Passes.h"
#include "passes/Pipelines.h"
#include "tests/passes/PassTestUtil.h"

namespace kiln {
namespace {

using passes::PassContext;
using passes::PassManager;

/// The message of the kiln::Error `fn` throws, or "" (and a test failure) if it throws none.
template <typename Fn> std::string errorOf(Fn fn) {
  try {
    fn();
  } catch (const Error &error) {
    return error.what();
  }
  ADD_FAILURE() << "expected a kiln::Error";
  return "";
}

/// A test pass that counts its runs and reports a counter; it changes nothing.
class CountingPass : public passes::Pass {
public:
  CountingPass(std::string name, int64_t amount) : name_(std::move(name)), amount_(amount) {}
  std::string_view name() const override { return name_; }
  bool run(ir::Graph &, PassContext &context) override {
    context.stats.add("things counted", amount_);
    return false;
  }

private:
  std::string name_;
  int64_t amount_;
};

/// A test pass that corrupts the graph: it changes the type of the first node's output, which
/// the verifier must catch.
class CorruptingPass : public passes::Pass {
public:
  std::string_view name() const override { return "corrupt"; }
  bool run(ir::Graph &graph, PassContext &) override {
    graph.firstNode()->output()->setType({DType::F32, {7}});
    return true;
  }
};

/// A test pass that fails with a kiln::Error.
class FailingPass : public passes::Pass {
public:
  std::string_view name() const override { return "fail"; }
  bool run(ir::Graph &, PassContext &) override { fail("nothing to see"); }
};

constexpr const char *kSmallGraph = R"(graph @g(%x: f32[2,3]) -> (f32[2,3]) {
  %a = relu(%x) : f32[2,3]
  %dead = exp(%x) : f32[2,3]
  %b = relu(%x) : f32[2,3]
  %c = add(%a, %b) : f32[2,3]
  return %c
})";

TEST(PassRegistry, NamesAreUniqueSortedAndMatchEachPass) {
  const auto &passes = passes::registeredPasses();
  ASSERT_FALSE(passes.empty());
  std::set<std::string_view> names;
  for (size_t i = 0; i < passes.size(); ++i) {
    EXPECT_TRUE(names.insert(passes[i].name).second) << "duplicate pass " << passes[i].name;
    if (i > 0) {
      EXPECT_LT(passes[i - 1].name, passes[i].name) << "PassRegistry.def is not sorted by name";
    }
    EXPECT_FALSE(passes[i].description.empty()) << passes[i].name;
    EXPECT_EQ(passes[i].create()->name(), passes[i].name);
    EXPECT_EQ(passes::findPass(passes[i].name), &passes[i]);
  }
  for (const char *name : {"constant-fold", "cse", "dce", "decompose"})
    EXPECT_TRUE(names.count(name)) << name;
}

TEST(PassRegistry, UnknownPassIsAnErrorListingTheKnownOnes) {
  EXPECT_EQ(passes::findPass("frobnicate"), nullptr);
  std::string message = errorOf([] { passes::createPass("frobnicate"); });
  EXPECT_NE(message.find("unknown pass 'frobnicate'"), std::string::npos) << message;
  for (const passes::PassInfo &info : passes::registeredPasses())
    EXPECT_NE(message.find(std::string(info.name)), std::string::npos) << message;
}

TEST(PassRegistry, SplitsPassLists) {
  EXPECT_EQ(passes::splitPassList("dce"), (std::vector<std::string>{"dce"}));
  EXPECT_EQ(passes::splitPassList("constant-fold,cse,dce"), (std::vector<std::string>{"constant-fold", "cse", "dce"}));
  EXPECT_NE(errorOf([] { passes::splitPassList(""); }).find("empty"), std::string::npos);
  EXPECT_NE(errorOf([] { passes::splitPassList("dce,,cse"); }).find("empty pass name"), std::string::npos);
  EXPECT_NE(errorOf([] { passes::splitPassList("dce,"); }).find("empty pass name"), std::string::npos);
}

TEST(Pipelines, EveryStepIsARegisteredPass) {
  const auto &pipelines = passes::registeredPipelines();
  ASSERT_FALSE(pipelines.empty());
  for (size_t i = 0; i < pipelines.size(); ++i) {
    if (i > 0) {
      EXPECT_LT(pipelines[i - 1].name, pipelines[i].name);
    }
    EXPECT_FALSE(pipelines[i].passes.empty()) << pipelines[i].name;
    for (std::string_view pass : pipelines[i].passes)
      EXPECT_NE(passes::findPass(pass), nullptr) << pipelines[i].name << " names unregistered pass " << pass;
  }
}

TEST(Pipelines, InferenceRunsInTheDocumentedOrder) {
  // The order docs/ARCHITECTURE.md gives, restricted to the passes registered: simplify (einsums
  // as matmuls among it), decompose, simplify again, then fusion and memory planning.
  const std::vector<std::string_view> documented = {"quantized-matmul", "quantized-conv", "quantized-max-pool",
                                                    "constant-fold", "einsum-to-matmul",
                                                    "simplify-algebra", "cse", "dce",
                                                    "fold-batch-norm", "decompose", "constant-fold",
                                                    "simplify-algebra", "cse", "dce", "fuse", "plan-memory"};
  std::vector<std::string_view> expected;
  for (std::string_view name : documented)
    if (passes::findPass(name))
      expected.push_back(name);
  EXPECT_EQ(passes::findPipeline("inference").passes, expected);
}

TEST(Pipelines, UnfusedVariantsLeaveOutOnlyFuse) {
  for (std::string base : {"inference", "training"}) {
    std::vector<std::string_view> expected;
    for (std::string_view name : passes::findPipeline(base).passes)
      if (name != "fuse")
        expected.push_back(name);
    EXPECT_EQ(expected.size() + 1, passes::findPipeline(base).passes.size()) << base;
    EXPECT_EQ(passes::findPipeline(base + "-unfused").passes, expected) << base;
  }
}

TEST(Pipelines, TrainingWritesParametersInPlaceOnlyAfterOrderingThem) {
  // After fuse (which makes the kernels they split and order) and before plan-memory (which
  // needs the final order).
  const std::vector<std::string_view> &training = passes::findPipeline("training").passes;
  std::vector<std::string_view> tail(training.end() - 4, training.end());
  EXPECT_EQ(tail, (std::vector<std::string_view>{"fuse", "isolate-parameter-writes", "order-parameter-writes",
                                                 "plan-memory"}));
}

TEST(Pipelines, UnknownPipelineIsAnErrorListingTheKnownOnes) {
  std::string message = errorOf([] { passes::findPipeline("fast"); });
  EXPECT_NE(message.find("unknown pipeline 'fast'"), std::string::npos) << message;
  EXPECT_NE(message.find("inference"), std::string::npos) << message;
  PassManager manager;
  EXPECT_NE(errorOf([&] { manager.addPipeline("fast"); }).find("unknown pipeline"), std::string::npos);
}

TEST(PassManager, AddsPassesByNameAndPipeline) {
  PassManager manager;
  manager.addPass("dce");
  manager.addPipeline("inference");
  std::vector<std::string> expected = {"dce"};
  for (std::string_view name : passes::findPipeline("inference").passes)
    expected.emplace_back(name);
  EXPECT_EQ(manager.passNames(), expected);
}

TEST(PassManager, AnUnknownNameInAListAddsNothing) {
  PassManager manager;
  std::string message = errorOf([&] { manager.addPasses({"dce", "nope", "cse"}); });
  EXPECT_NE(message.find("unknown pass 'nope'"), std::string::npos) << message;
  EXPECT_TRUE(manager.passNames().empty());
}

TEST(PassManager, RecordsWhetherEachPassChangedTheGraphAndItsCounters) {
  auto graph = test::parseKir(kSmallGraph);
  auto before = graph->clone();
  PassManager manager;
  manager.addPasses({"cse", "dce", "dce"});
  PassContext context;
  EXPECT_TRUE(manager.run(*graph, context));
  const auto &records = manager.records();
  ASSERT_EQ(records.size(), 3u);
  EXPECT_EQ(records[0].name, "cse");
  EXPECT_TRUE(records[0].changed);
  EXPECT_EQ(records[0].stats.get("nodes merged"), 1); // %b into %a
  EXPECT_EQ(records[0].stats.get("nodes removed"), 0);
  EXPECT_TRUE(records[1].changed);
  EXPECT_EQ(records[1].stats.get("nodes removed"), 1); // %dead
  EXPECT_FALSE(records[2].changed);
  EXPECT_EQ(records[2].stats.get("nodes removed"), 0);
  for (const auto &record : records)
    EXPECT_GE(record.seconds, 0.0);
  // The context holds the sums.
  EXPECT_EQ(context.stats.get("nodes merged"), 1);
  EXPECT_EQ(context.stats.get("nodes removed"), 1);
  EXPECT_EQ(graph->numNodes(), 2u);
  test::expectSameNumerics(*before, *graph);
}

TEST(PassManager, KeepsCountersAlreadyInTheContextAndAnalyses) {
  auto graph = test::parseKir(kSmallGraph);
  PassManager manager;
  manager.addPass(std::make_unique<CountingPass>("count-a", 2));
  manager.addPass(std::make_unique<CountingPass>("count-b", 3));
  PassContext context;
  context.stats.add("things counted", 10);
  context.analyses["note"] = std::string("kept");
  EXPECT_FALSE(manager.run(*graph, context));
  EXPECT_EQ(manager.records()[0].stats.get("things counted"), 2);
  EXPECT_EQ(manager.records()[1].stats.get("things counted"), 3);
  EXPECT_EQ(context.stats.get("things counted"), 15);
  ASSERT_NE(context.analysis<std::string>("note"), nullptr);
  EXPECT_EQ(*context.analysis<std::string>("note"), "kept");
  // A second run starts a fresh list of records.
  manager.run(*graph, context);
  EXPECT_EQ(manager.records().size(), 2u);
}

TEST(PassManager, CallbackSeesEachPassAndTheGraphItLeft) {
  auto graph = test::parseKir(kSmallGraph);
  PassManager manager;
  manager.addPasses({"cse", "dce"});
  std::vector<std::string> seen;
  manager.setAfterPassCallback([&](const passes::PassRecord &record, const ir::Graph &after) {
    seen.push_back(record.name + (record.changed ? " changed " : " unchanged ") + std::to_string(after.numNodes()));
  });
  PassContext context;
  manager.run(*graph, context);
  EXPECT_EQ(seen, (std::vector<std::string>{"cse changed 3", "dce changed 2"}));
}

TEST(PassManager, CallbackCanStopTheRun) {
  auto graph = test::parseKir(kSmallGraph);
  PassManager manager;
  manager.addPasses({"cse", "dce"});
  int calls = 0;
  manager.setAfterPassCallback([&](const passes::PassRecord &, const ir::Graph &) {
    ++calls;
    fail("stop here");
  });
  PassContext context;
  EXPECT_NE(errorOf([&] { manager.run(*graph, context); }).find("stop here"), std::string::npos);
  EXPECT_EQ(calls, 1);
  EXPECT_EQ(graph->numNodes(), 3u); // dce never ran
}

TEST(PassManager, AGraphBrokenByAPassIsAnErrorNamingThePass) {
  auto graph = test::parseKir(kSmallGraph);
  PassManager manager;
  manager.addPass("cse");
  manager.addPass(std::make_unique<CorruptingPass>());
  manager.addPass("dce");
  PassContext context;
  std::string message = errorOf([&] { manager.run(*graph, context); });
  EXPECT_NE(message.find("invalid after pass 'corrupt' (pass 2 of 3)"), std::string::npos) << message;
  EXPECT_NE(message.find("relu"), std::string::npos) << message; // the verifier's own words follow
  EXPECT_EQ(manager.records().size(), 1u);
}

TEST(PassManager, AnErrorInAPassNamesThePass) {
  auto graph = test::parseKir(kSmallGraph);
  PassManager manager;
  manager.addPass(std::make_unique<FailingPass>());
  PassContext context;
  context.stats.add("earlier", 4);
  std::string message = errorOf([&] { manager.run(*graph, context); });
  EXPECT_NE(message.find("pass 'fail' (pass 1 of 1) failed: nothing to see"), std::string::npos) << message;
  EXPECT_EQ(context.stats.get("earlier"), 4);
}

TEST(PassManager, AnInvalidInputGraphIsReportedBeforeAnyPassRuns) {
  auto graph = test::parseKir(kSmallGraph);
  graph->firstNode()->output()->setType({DType::F32, {9}});
  PassManager manager;
  bool called = false;
  manager.addPass("dce");
  manager.setAfterPassCallback([&](const passes::PassRecord &, const ir::Graph &) { called = true; });
  PassContext context;
  std::string message = errorOf([&] { manager.run(*graph, context); });
  EXPECT_NE(message.find("invalid before the first pass"), std::string::npos) << message;
  EXPECT_FALSE(called);
}

TEST(PassManager, AnEmptyManagerLeavesTheGraphAlone) {
  auto graph = test::parseKir(kSmallGraph);
  std::string text = ir::printGraph(*graph);
  PassManager manager;
  PassContext context;
  EXPECT_FALSE(manager.run(*graph, context));
  EXPECT_TRUE(manager.records().empty());
  EXPECT_EQ(ir::printGraph(*graph), text);
}

TEST(PassManager, InferencePipelineKeepsNumericsAndLeavesOnlyPrimitives) {
  auto graph = test::parseKir(R"(graph @mlp(%x: f32[4,3]) -> (f32[4,2]) {
    %w1 = param "fc1.weight" : f32[5,3]
    %b1 = param "fc1.bias" : f32[5]
    %w2 = param "fc2.weight" : f32[2,5]
    %unused = param "unused" : f32[9]
    %scale = constant tensor<f32[]>[2.0] : f32[]
    %half = constant tensor<f32[]>[0.5] : f32[]
    %one = mul(%scale, %half) : f32[]
    %h = linear(%x, %w1, %b1) : f32[4,5]
    %g = gelu(%h) : f32[4,5]
    %g2 = gelu(%h) : f32[4,5]
    %s = add(%g, %g2) : f32[4,5]
    %t = mul(%s, %one) : f32[4,5]
    %y = linear(%t, %w2) : f32[4,2]
    %p = softmax(%y) : f32[4,2]
    return %p
  })");
  auto before = graph->clone();
  PassManager manager;
  manager.addPipeline("inference");
  PassContext context;
  EXPECT_TRUE(manager.run(*graph, context));
  for (const ir::Node *node : graph->nodes()) {
    EXPECT_FALSE(ir::isComposite(node->op())) << node->opName();
    if (node->op() == ir::OpKind::Param) {
      EXPECT_NE(node->attrString("name"), "unused");
    }
  }
  EXPECT_GE(context.stats.get("composites expanded"), 4); // linear twice, gelu (merged), softmax
  EXPECT_GE(context.stats.get("nodes merged"), 1);
  test::expectSameNumerics(*before, *graph);
}

} // namespace
} // namespace kiln
