#include "tests/ir/OpTestUtil.h"

#include <cmath>
#include <exception>

#include "ir/GraphEquality.h"
#include "ir/Parser.h"
#include "ir/Printer.h"

namespace kiln::test {

using ir::AttrMap;
using ir::Graph;
using ir::OpKind;
using ir::Value;

// ---- tensors and attributes -----------------------------------------------------------------

Tensor tensorOf(DType dtype, Shape shape, const std::vector<double> &values) {
  return Tensor::fromDoubles(dtype, std::move(shape), values);
}
Tensor i64s(Shape shape, const std::vector<double> &values) {
  return tensorOf(DType::I64, std::move(shape), values);
}
Tensor f32s(Shape shape, const std::vector<double> &values) {
  return tensorOf(DType::F32, std::move(shape), values);
}

Tensor intTensor(DType dtype, Shape shape, const std::vector<int64_t> &values) {
  Tensor t(dtype, std::move(shape));
  for (size_t i = 0; i < values.size(); ++i)
    t.setInt(static_cast<int64_t>(i), values[i]);
  return t;
}

Tensor seq(DType dtype, Shape shape) {
  std::vector<double> values(static_cast<size_t>(numElements(shape)));
  for (size_t i = 0; i < values.size(); ++i)
    values[i] = static_cast<double>(i);
  return tensorOf(dtype, std::move(shape), values);
}

Tensor mapped(const Tensor &x, const std::function<double(double)> &fn) {
  Tensor out(x.type());
  for (int64_t i = 0; i < x.numElements(); ++i)
    out.setDouble(i, fn(x.getDouble(i)));
  return out;
}

std::vector<double> values(const Tensor &t) { return t.toDoubles(); }

std::vector<int64_t> intsOf(const Tensor &t) {
  std::vector<int64_t> out;
  for (int64_t i = 0; i < t.numElements(); ++i)
    out.push_back(t.getInt(i));
  return out;
}

TensorType f32(Shape shape) { return {DType::F32, std::move(shape)}; }

ir::Attribute int1(int64_t value) { return value; }
ir::Attribute ints(std::vector<int64_t> values) { return values; }
ir::Attribute str(const char *value) { return std::string(value); }

// ---- running one op -------------------------------------------------------------------------

std::vector<Tensor> runOps(OpKind op, const std::vector<Tensor> &inputs, AttrMap attrs) {
  Graph graph("test");
  std::vector<Value *> args;
  std::vector<TensorType> types;
  for (const Tensor &t : inputs) {
    args.push_back(graph.addInput(t.type()));
    types.push_back(t.type());
  }
  ir::Builder builder(graph);
  graph.setOutputs(builder.createMulti(op, args, attrs));
  ir::verify(graph);
  if (ir::isComposite(op))
    expectExpandsToPrimitives(op, types, attrs);
  return ir::evaluate(graph, inputs);
}

Tensor runOp(OpKind op, const std::vector<Tensor> &inputs, AttrMap attrs) {
  std::vector<Tensor> outputs = runOps(op, inputs, std::move(attrs));
  EXPECT_EQ(outputs.size(), 1u) << ir::opName(op) << " has several outputs: use runOps";
  return outputs.at(0);
}

TensorType inferOne(OpKind op, const std::vector<TensorType> &types, AttrMap attrs) {
  return ir::inferTypes(op, types, ir::completeAttrs(op, std::move(attrs))).at(0);
}

void expectExpandsToPrimitives(OpKind op, const std::vector<TensorType> &types, const AttrMap &attrs,
                               int depth) {
  ASSERT_LT(depth, 8) << "decomposition of " << ir::opName(op) << " does not terminate";
  std::unique_ptr<Graph> graph = ir::decompositionGraph(op, types, attrs);
  ir::verify(*graph);
  std::vector<TensorType> want = ir::inferTypes(op, types, ir::completeAttrs(op, attrs));
  ASSERT_EQ(graph->outputs().size(), want.size()) << ir::opName(op);
  for (size_t i = 0; i < want.size(); ++i)
    EXPECT_EQ(graph->outputs()[i]->type(), want[i]) << ir::opName(op) << " output " << i;
  for (const ir::Node *node : graph->nodes()) {
    EXPECT_NE(node->op(), op) << ir::opName(op) << " decomposes into itself";
    if (!ir::isComposite(node->op()))
      continue;
    std::vector<TensorType> inner;
    for (const Value *input : node->inputs())
      inner.push_back(input->type());
    expectExpandsToPrimitives(node->op(), inner, node->attrs(), depth + 1);
  }
}

void expectRoundTrip(OpKind op, const std::vector<TensorType> &types, AttrMap attrs) {
  Graph graph("roundtrip");
  std::vector<Value *> args;
  for (const TensorType &t : types)
    args.push_back(graph.addInput(t));
  ir::Builder builder(graph);
  graph.setOutputs({builder.create(op, args, std::move(attrs))});
  std::string text = ir::printGraph(graph);
  std::unique_ptr<Graph> parsed = ir::parseGraph(text, "roundtrip.kir");
  EXPECT_EQ(ir::graphDifference(graph, *parsed, /*compareNames=*/false), "") << text;
}

// ---- comparing ------------------------------------------------------------------------------

void expectValues(const Tensor &got, const std::vector<double> &want, double tolerance) {
  ASSERT_EQ(got.numElements(), static_cast<int64_t>(want.size()));
  for (size_t i = 0; i < want.size(); ++i) {
    double g = got.getDouble(static_cast<int64_t>(i));
    if (std::isnan(want[i]))
      EXPECT_TRUE(std::isnan(g)) << "element " << i << " is " << g;
    else if (tolerance == 0)
      EXPECT_EQ(g, want[i]) << "element " << i;
    else
      EXPECT_NEAR(g, want[i], tolerance) << "element " << i;
  }
}

::testing::AssertionResult near(const Tensor &got, const Tensor &want, double rtol, double atol) {
  Comparison c = compareTensors(got, want, rtol, atol);
  if (c.ok)
    return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure() << c.message << "\n got " << tensorSummary(got, 32);
}

::testing::AssertionResult near(const Tensor &got, const Tensor &want, double tolerance) {
  return near(got, want, tolerance, tolerance);
}

// ---- errors ---------------------------------------------------------------------------------

std::string errorFrom(const std::function<void()> &fn) {
  try {
    fn();
  } catch (const Error &e) {
    return e.what();
  } catch (const std::exception &e) {
    ADD_FAILURE() << "expected a kiln::Error, got another exception: " << e.what();
    return "<not a kiln::Error>";
  } catch (...) {
    ADD_FAILURE() << "expected a kiln::Error, got an exception of another type";
    return "<not a kiln::Error>";
  }
  ADD_FAILURE() << "expected a kiln::Error, but nothing was thrown";
  return "<no kiln::Error>";
}

void expectError(const std::function<void()> &fn, const std::string &fragment) {
  EXPECT_PRED_FORMAT2(::testing::IsSubstring, fragment, errorFrom(fn));
}

} // namespace kiln::test
