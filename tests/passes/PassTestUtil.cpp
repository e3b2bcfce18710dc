#include "tests/passes/PassTestUtil.h"

#include "core/Error.h"
#include "ir/Evaluator.h"
#include "ir/Parser.h"
#include "ir/Verifier.h"

namespace kiln::test {

std::unique_ptr<ir::Graph> parseKir(std::string_view text) {
  try {
    return ir::parseGraph(text, "<test>");
  } catch (const Error &error) {
    ADD_FAILURE() << "parse error: " << error.what();
    return std::make_unique<ir::Graph>();
  }
}

int PassRun::count(ir::OpKind op) const {
  int n = 0;
  for (const ir::Node *node : after->nodes())
    n += node->op() == op;
  return n;
}

PassRun runPass(std::string_view text, passes::Pass &pass) {
  PassRun run;
  run.before = parseKir(text);
  run.after = run.before->clone();
  run.changed = pass.run(*run.after, run.context);
  EXPECT_NO_THROW(ir::verify(*run.after));
  return run;
}

namespace {

/// Random values for `graph`'s parameters that carry no value, added to `params` by name.
void addRandomParams(const ir::Graph &graph, ir::ParamValues &params, uint64_t seed) {
  for (const ir::Node *param : graph.params()) {
    const std::string &name = param->attrString("name");
    if (param->attrTensor("value").defined() || params.count(name))
      continue;
    params.emplace(name, randomTensor(param->output()->type(), seed + 7919 * (params.size() + 1)));
  }
}

} // namespace

void expectSameNumerics(const ir::Graph &before, const ir::Graph &after, uint64_t seed, double rtol,
                        double atol) {
  ASSERT_EQ(before.inputs().size(), after.inputs().size()) << "the pass changed the graph's inputs";
  ASSERT_EQ(before.outputs().size(), after.outputs().size()) << "the pass changed the graph's outputs";
  std::vector<Tensor> inputs;
  for (size_t i = 0; i < before.inputs().size(); ++i)
    inputs.push_back(randomTensor(before.inputs()[i]->type(), seed + i));
  ir::ParamValues params;
  addRandomParams(before, params, seed + 1000);
  std::vector<Tensor> want, got;
  try {
    want = ir::evaluate(before, inputs, params);
  } catch (const Error &error) {
    FAIL() << "evaluating the graph before the pass: " << error.what();
  }
  try {
    got = ir::evaluate(after, inputs, params);
  } catch (const Error &error) {
    FAIL() << "evaluating the graph after the pass: " << error.what();
  }
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < got.size(); ++i) {
    Comparison comparison = compareTensors(got[i], want[i], rtol, atol);
    EXPECT_TRUE(comparison.ok) << "output " << i << ": " << comparison.message;
  }
}

} // namespace kiln::test
