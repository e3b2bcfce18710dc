// The finite-difference gradient check shared by the autodiff tests (declared in GradCheck.h).
// For a graph x -> f(x), the loss is L = reduce_sum(f(x) * R) with fixed random weights R, so every output element's gradient matters and no two elements are weighted
// alike. The autodiff gradient, evaluated by the reference evaluator in f64, must match the
// central difference (L(x + h e_i) - L(x - h e_i)) / 2h for every element i of every input.
#include "tests/passes/GradCheck.h"

#include <gtest/gtest.h>

#include <cmath>
#include <functional>

#include "ir/Builder.h"
#include "ir/Evaluator.h"
#include "ir/Verifier.h"
#include "passes/Pass.h"
#include "passes/autodiff/Autodiff.h"
#include "passes/decompose/Decompose.h"

namespace kiln::test {

// h = 1e-6 in f64: the central difference's truncation error is ~h^2 |f'''| ~ 1e-12 and its
// rounding error ~ 1e-16 |L| / h ~ 1e-10 for the O(1) losses of these tests.
constexpr double kStep = 1e-6;
constexpr double kRelTol = 1e-6;
constexpr double kAbsTol = 1e-8;

void expectGradientsMatch(const std::vector<GradInput> &specs, const GradBuildFn &build, uint64_t seed,
                          bool decompose) {
  ir::Graph graph("gradcheck");
  std::vector<ir::Value *> inputs, wrt;
  for (const GradInput &spec : specs)
    inputs.push_back(graph.addInput(spec.type));
  ir::Builder b(graph);
  ir::Value *out = build(b, inputs);
  ASSERT_TRUE(isFloat(out->dtype())) << "the checked function must return a float value";
  ir::Value *weights = b.constant(randomTensor(out->type(), seed + 1000));
  ir::Value *loss = b.create(ir::OpKind::ReduceSum, {b.create(ir::OpKind::Mul, {out, weights})});
  graph.setOutputs({loss});
  if (decompose) {
    passes::PassContext context;
    passes::createDecomposeForAutodiffPass()->run(graph, context); // as the training graph does
  }
  std::unique_ptr<ir::Graph> forward = graph.clone();
  for (size_t i = 0; i < specs.size(); ++i)
    if (specs[i].differentiate)
      wrt.push_back(inputs[i]);
  std::vector<ir::Value *> grads = passes::autodiff::appendGradients(graph, graph.outputs()[0], wrt);
  graph.setOutputs(grads);
  ir::verify(graph);

  std::vector<Tensor> values;
  for (size_t i = 0; i < specs.size(); ++i) {
    Tensor value = randomTensor(specs[i].type, seed + i);
    if (specs[i].positive)
      for (int64_t j = 0; j < value.numElements(); ++j)
        value.setDouble(j, std::fabs(value.getDouble(j)) + 0.5);
    values.push_back(value);
  }
  std::vector<Tensor> analytic = ir::evaluate(graph, values);
  auto lossAt = [&](size_t input, int64_t element, double delta) {
    std::vector<Tensor> shifted = values;
    shifted[input] = values[input].clone();
    shifted[input].setDouble(element, values[input].getDouble(element) + delta);
    return ir::evaluate(*forward, shifted)[0].getDouble(0);
  };
  size_t gradIndex = 0;
  for (size_t i = 0; i < specs.size(); ++i) {
    if (!specs[i].differentiate)
      continue;
    const Tensor &grad = analytic[gradIndex++];
    ASSERT_EQ(grad.type(), specs[i].type) << "gradient of input " << i;
    for (int64_t j = 0; j < grad.numElements(); ++j) {
      double numeric = (lossAt(i, j, kStep) - lossAt(i, j, -kStep)) / (2 * kStep);
      double got = grad.getDouble(j);
      EXPECT_LE(std::fabs(got - numeric), kAbsTol + kRelTol * std::fabs(numeric))
          << "input " << i << " element " << j << ": autodiff " << got << ", finite difference " << numeric;
    }
  }
}

} // namespace kiln::test
