// The .kir printer and parser: every op and every dtype round-trips (print -> parse gives an
// equal graph, and printing that gives the same text), names and elision behave as the format
// says, and every parse error names its line and column.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <set>

#include "core/Error.h"
#include "ir/Builder.h"
#include "ir/Export.h"
#include "ir/GraphEquality.h"
#include "ir/Parser.h"
#include "ir/Printer.h"

using namespace kiln;
using namespace kiln::ir;

namespace {

const PrintOptions kKeepAll{16, true};

/// Prints, parses and prints again; the parsed graph must equal the original and the two
/// texts must be identical. Returns the text.
std::string expectRoundTrip(const Graph &graph, bool compareNames = true) {
  std::string text = printGraph(graph, kKeepAll);
  std::unique_ptr<Graph> parsed;
  try {
    parsed = parseGraph(text, "roundtrip.kir");
  } catch (const Error &e) {
    ADD_FAILURE() << "printed text does not parse: " << e.what() << "\n" << text;
    return text;
  }
  EXPECT_EQ(graphDifference(graph, *parsed, compareNames), "") << text;
  EXPECT_EQ(printGraph(*parsed, kKeepAll), text);
  return text;
}

/// The message of the kiln::Error that parsing `text` throws ("" if it parses).
std::string parseError(const std::string &text) {
  try {
    parseGraph(text, "t.kir");
  } catch (const Error &e) {
    return e.what();
  }
  return "";
}

TensorType f32(Shape shape) { return {DType::F32, std::move(shape)}; }

/// One op applied to inputs of the given types with the given attributes (non-default where
/// the op has attributes, so that they are printed). Ops are named by mnemonic, so a case for
/// an op that is not in the table yet is simply unused.
struct OpCase {
  std::string op;
  std::vector<TensorType> inputs;
  AttrMap attrs;
};

using Ints = std::vector<int64_t>;

std::vector<OpCase> explicitCases() {
  TensorType f23 = f32({2, 3}), b23{DType::Bool, {2, 3}}, f3 = f32({3}), img = f32({1, 2, 4, 4});
  TensorType i64x2{DType::I64, {2}}, i64x23{DType::I64, {2, 3}}, i64x21{DType::I64, {2, 1}};
  using S = std::string;
  return {
      {"not", {b23}, {}},
      {"and", {b23, b23}, {}},
      {"or", {b23, b23}, {}},
      {"xor", {b23, b23}, {}},
      {"mod", {{DType::I32, {2, 3}}, {DType::I32, {}}}, {{"fmod", int64_t{1}}}},
      {"where", {b23, f23, f3}, {}},
      {"cast", {f23}, {{"to", DType::BF16}}},
      {"clip", {f23}, {{"min", -0.5}, {"max", 1e-05}}},
      {"reduce_sum", {f23}, {{"axes", Ints{0}}, {"keepdims", int64_t{1}}}},
      {"reduce_max", {f23}, {{"axes", Ints{-1}}}},
      {"reduce_prod", {f23}, {{"axes", Ints{0, 1}}}},
      {"reduce_mean", {f23}, {{"axes", Ints{1}}, {"keepdims", int64_t{1}}}},
      {"argmax", {f23}, {{"axis", int64_t{1}}}},
      {"argmin", {f23}, {{"keepdims", int64_t{1}}, {"select_last_index", int64_t{1}}}},
      {"reshape", {f23}, {{"shape", Ints{3, 2}}}},
      {"permute", {f23}, {{"perm", Ints{1, 0}}}},
      {"broadcast", {f3}, {{"shape", Ints{4, 3}}}},
      {"slice", {f23}, {{"starts", Ints{1}}, {"ends", Ints{3}}, {"axes", Ints{1}}}},
      {"pad", {f23}, {{"pads", Ints{0, 1, 1, 0}}, {"value", 2.5}}},
      {"concat", {f23, f23, f23}, {{"axis", int64_t{1}}}},
      {"split", {f23}, {{"axis", int64_t{1}}, {"sizes", Ints{1, 2}}}},
      {"squeeze", {f32({2, 1, 3})}, {{"axes", Ints{1}}}},
      {"unsqueeze", {f23}, {{"axes", Ints{0}}}},
      {"flatten", {f32({2, 3, 4})}, {{"start", int64_t{1}}}},
      {"gather", {f32({4, 3}), i64x2}, {}},
      {"scatter_add", {f32({4, 3}), i64x23, f23}, {}},
      {"iota", {}, {{"shape", Ints{2, 3}}, {"axis", int64_t{1}}, {"dtype", DType::I32}}},
      {"gather_elements", {f23, i64x23}, {{"axis", int64_t{1}}}},
      {"gather_nd", {f23, i64x21}, {}},
      {"scatter_elements", {f23, i64x23, f23}, {{"axis", int64_t{1}}, {"reduction", S("add")}}},
      {"scatter_nd", {f23, i64x21, f23}, {{"reduction", S("add")}}},
      {"cumsum", {f23}, {{"axis", int64_t{1}}, {"exclusive", int64_t{1}}, {"reverse", int64_t{1}}}},
      {"topk", {f23}, {{"k", int64_t{2}}, {"largest", int64_t{0}}}},
      {"trilu", {f23}, {{"upper", int64_t{0}}, {"k", int64_t{1}}}},
      {"one_hot", {i64x2, f32({2})}, {{"depth", int64_t{4}}}},
      {"tile", {f23}, {{"repeats", Ints{2, 1}}}},
      {"matmul", {f23, f32({3, 4})}, {}},
      {"conv", {f32({1, 2, 5, 5}), f32({4, 2, 3, 3})}, {{"pads", Ints{1, 1, 1, 1}}}},
      {"conv_transpose", {f32({1, 2, 3, 3}), f32({2, 4, 3, 3})}, {{"strides", Ints{2, 2}}}},
      {"max_pool", {img}, {{"kernel", Ints{2, 2}}, {"strides", Ints{2, 2}}}},
      {"avg_pool", {img}, {{"kernel", Ints{3, 3}}, {"count_include_pad", int64_t{1}}}},
      {"einsum", {f23, f32({3, 4})}, {{"equation", S("ij,jk->ik")}}},
      {"resize", {img}, {{"sizes", Ints{1, 2, 8, 8}}, {"mode", S("linear")}}},
      {"rnn_sequence", {f32({4, 2, 3}), f32({1, 3, 3}), f32({1, 3}), f32({1, 2, 3})},
       {{"direction", S("reverse")}, {"lengths", Ints{4, 1}}, {"activations", S("Relu")}}},
      {"gru_sequence", {f32({4, 2, 18}), f32({2, 9, 3}), f32({2, 9}), f32({2, 2, 3})},
       {{"direction", S("bidirectional")}, {"linear_before_reset", int64_t{1}}, {"clip", 2.5}}},
      {"lstm_sequence", {f32({4, 2, 12}), f32({1, 12, 3}), f32({1, 12}), f32({1, 2, 3}), f32({1, 2, 3}), f32({1, 9})},
       {{"input_forget", int64_t{1}},
        {"activations", S("HardSigmoid,Tanh,Affine")},
        {"activation_alpha", std::vector<double>{0.3, 0, 2.0}},
        {"activation_beta", std::vector<double>{0.4, 0, -1.0}}}},
      {"linear", {f23, f32({4, 3}), f32({4})}, {}},
      {"batch_norm", {f32({2, 3, 4, 4}), f3, f3, f3, f3}, {{"epsilon", 0.001}}},
      {"instance_norm", {img, f32({2}), f32({2})}, {{"epsilon", 0.001}}},
      {"layer_norm", {f23, f3, f3}, {}},
      {"lrn", {img}, {{"size", int64_t{3}}}},
      {"softmax", {f23}, {{"axis", int64_t{0}}}},
      {"gelu", {f23}, {{"approximate", S("tanh")}}},
      {"mse_loss", {f23, f23}, {{"reduction", S("sum")}}},
      {"cross_entropy", {f23, i64x2}, {}},
      {"nll_loss", {f23, i64x2}, {{"reduction", S("sum")}}},
      {"elu", {f23}, {{"alpha", 0.5}}},
      {"selu", {f23}, {{"gamma", 1.5}}},
      {"leaky_relu", {f23}, {{"alpha", 0.2}}},
      {"prelu", {f23, f3}, {}},
      {"hard_sigmoid", {f23}, {{"beta", 0.25}}},
      {"celu", {f23}, {{"alpha", 2.0}}},
      {"thresholded_relu", {f23}, {{"alpha", 0.5}}},
      {"shrink", {f23}, {{"lambd", 1.0}, {"bias", 0.5}}},
      {"hardmax", {f23}, {{"axis", int64_t{0}}}},
      {"conv_weight_grad", {f32({1, 2, 5, 5}), f32({1, 3, 3, 3})},
       {{"strides", Ints{2, 2}}, {"pads", Ints{1, 1, 1, 1}}, {"weight_shape", Ints{3, 2, 3, 3}}}},
      {"max_pool_grad", {f32({1, 2, 5, 5}), f32({1, 2, 3, 3}), f32({1, 2, 3, 3})},
       {{"kernel", Ints{3, 3}}, {"strides", Ints{2, 2}}, {"pads", Ints{1, 1, 1, 1}}, {"ceil_mode", int64_t{1}}}},
      {"random_uniform", {{DType::I64, {}}}, {{"shape", Ints{2, 3}}, {"seed", int64_t{7}}, {"dtype", DType::F64}}},
      {"sgd_update", {f23, f23, f32({}), f23, f32({})},
       {{"momentum", 0.9}, {"nesterov", int64_t{1}}, {"weight_decay", 0.01}}},
      {"adam_update", {f32({4}), f32({4}), f32({4}), f32({4}), f32({}), f32({})},
       {{"beta1", 0.8}, {"decoupled", int64_t{1}}, {"weight_decay", 0.01}}},
      {"neg", {{DType::I8, {4}}}, {}}, // a second, integer case
      {"quantize_linear", {f23, f32({1, 3}), {DType::U8, {}}}, {}},
      {"dequantize_linear", {{DType::I8, {2, 3}}, f32({}), {DType::I8, {2, 1}}}, {}},
      {"qmatmul", {{DType::U8, {2, 3}}, {DType::I8, {3, 4}}, f32({}), {DType::U8, {}}, f32({4})}, {}},
      {"qconv", {{DType::I8, {1, 4, 5, 5}}, {DType::I8, {6, 2, 3, 3}}, f32({}), {DType::I8, {}}, f32({6})},
       {{"strides", Ints{2, 1}}, {"pads", Ints{1, 0, 1, 0}}, {"groups", int64_t{2}}}},
  };
}

/// Every op in the table with the cases that exercise it: its explicit cases, or else the
/// first generic signature (one, two or three f32[2,3] operands, default attributes) it
/// builds with. An op with neither is reported.
std::vector<std::pair<OpKind, std::vector<OpCase>>> everyOpCases() {
  std::vector<OpCase> explicit_ = explicitCases();
  std::vector<std::pair<OpKind, std::vector<OpCase>>> out;
  for (int i = 0; i < kNumOps; ++i) {
    auto op = static_cast<OpKind>(i);
    if (op == OpKind::Param || op == OpKind::Constant)
      continue; // the tensor tests cover sources
    if (op == OpKind::Kernel)
      continue; // made by ir::outlineKernel, not the Builder: tests/ir/KernelTest.cpp covers it
    std::vector<OpCase> cases;
    for (const OpCase &c : explicit_)
      if (c.op == opName(op))
        cases.push_back(c);
    for (size_t arity = 1; cases.empty() && arity <= 3; ++arity) {
      OpCase generic{std::string(opName(op)), std::vector<TensorType>(arity, f32({2, 3})), {}};
      try {
        inferTypes(op, generic.inputs, completeAttrs(op, {}));
        cases.push_back(generic);
      } catch (const Error &) {
      }
    }
    out.emplace_back(op, cases);
  }
  return out;
}

} // namespace

TEST(PrinterParser, EveryOpHasARoundTripCase) {
  for (const auto &[op, cases] : everyOpCases())
    EXPECT_FALSE(cases.empty()) << opName(op) << " has no round-trip case: add one to explicitCases()";
}

TEST(PrinterParser, EveryOpRoundTrips) {
  for (const auto &entry : everyOpCases()) {
    for (const OpCase &c : entry.second) {
      SCOPED_TRACE(c.op);
      Graph graph("ops");
      std::vector<Value *> inputs;
      for (size_t i = 0; i < c.inputs.size(); ++i)
        inputs.push_back(graph.addInput(c.inputs[i], "in" + std::to_string(i)));
      Builder builder(graph);
      try {
        graph.setOutputs(builder.createMulti(entry.first, inputs, c.attrs));
      } catch (const Error &e) {
        ADD_FAILURE() << "building the case failed: " << e.what();
        continue;
      }
      std::string text = expectRoundTrip(graph);
      // Attributes given in the case differ from the defaults, so each must be printed.
      for (const auto &attr : c.attrs)
        EXPECT_NE(text.find(attr.first + " = "), std::string::npos) << text;
    }
  }
}

TEST(PrinterParser, PrintsTheDocumentedForm) {
  Graph graph("mlp");
  Value *x = graph.addInput(f32({4, 3}), "x");
  Builder b(graph);
  Value *w = b.param("fc1.weight", f32({2, 3}));
  w->setName("w");
  Value *bias = b.param("fc1.bias", f32({2}), Tensor::fromDoubles(DType::F32, {2}, {0.5, -1.25}));
  bias->setName("b");
  Value *y = b.create(OpKind::Linear, {x, w, bias});
  Value *r = b.create(OpKind::Relu, {y});
  auto halves = b.createMulti(OpKind::Split, {r}, {{"axis", int64_t{1}}, {"sizes", Ints{1, 1}}});
  Value *sum = b.create(OpKind::ReduceSum, {halves[0]}, {{"axes", Ints{0}}, {"keepdims", int64_t{1}}});
  graph.setOutputs({r, sum});
  EXPECT_EQ(printGraph(graph), "graph @mlp(%x: f32[4,3]) -> (f32[4,2], f32[1,1]) {\n"
                               "  %w = param \"fc1.weight\" : f32[2,3]\n"
                               "  %b = param \"fc1.bias\" {value = tensor<f32[2]>[0.5, -1.25]} : f32[2]\n"
                               "  %0 = linear(%x, %w, %b) : f32[4,2]\n"
                               "  %1 = relu(%0) : f32[4,2]\n"
                               "  %2, %3 = split(%1) {axis = 1, sizes = [1, 1]} : f32[4,1], f32[4,1]\n"
                               "  %4 = reduce_sum(%2) {axes = [0], keepdims = 1} : f32[1,1]\n"
                               "  return %1, %4\n"
                               "}\n");
  expectRoundTrip(graph);
}

TEST(PrinterParser, TensorsOfEveryDTypeRoundTripBitExactly) {
  const double inf = std::numeric_limits<double>::infinity(), nan = std::numeric_limits<double>::quiet_NaN();
  Graph graph("tensors");
  Builder b(graph);
  std::vector<Value *> outputs;
  auto add = [&](DType dtype, const std::vector<double> &values) {
    outputs.push_back(b.constant(Tensor::fromDoubles(dtype, {static_cast<int64_t>(values.size())}, values)));
  };
  std::vector<double> specials = {0.0, -0.0, 1.0, -2.5, 0.1, 1e-05, 1e30, inf, -inf, nan, -nan};
  add(DType::F32, specials);
  add(DType::F64, specials);
  add(DType::F16, specials);
  add(DType::BF16, specials);
  add(DType::F32, {1.4e-45, 3.4028234663852886e38, 1.1754943508222875e-38, 16777217.0, 1.0 / 3});
  add(DType::F64, {5e-324, 1.7976931348623157e308, 2.2250738585072014e-308, 1.0 / 3, 0.1 + 0.2});
  add(DType::F16, {5.960464477539063e-08, 65504.0, 0.333, -1e-3});
  add(DType::BF16, {3.3895313892515355e38, 1.0 / 3, -9.2e-41});
  add(DType::I64, {-9223372036854775808.0, 9007199254740993.0, -1, 0});
  add(DType::I32, {-2147483648.0, 2147483647.0, 0});
  add(DType::I8, {-128, 127, 0});
  add(DType::U8, {0, 255, 7});
  add(DType::Bool, {1, 0, 1});
  outputs.push_back(b.constant(Tensor(DType::F32, {2, 0, 3}))); // empty
  outputs.push_back(b.constant(Tensor::scalar(DType::I64, -7)));  // rank 0
  graph.setOutputs(outputs);
  // int64 extremes need exact integer writes, not doubles.
  Tensor exact(DType::I64, {2});
  exact.setInt(0, std::numeric_limits<int64_t>::min());
  exact.setInt(1, std::numeric_limits<int64_t>::max());
  graph.addOutput(b.constant(exact));
  std::string text = expectRoundTrip(graph);
  EXPECT_NE(text.find("[0.0, -0.0, 1.0, -2.5, 0.1, 1e-05, 1e+30, inf, -inf, nan, -nan]"), std::string::npos);
  EXPECT_NE(text.find("tensor<i64[2]>[-9223372036854775808, 9223372036854775807]"), std::string::npos);
  EXPECT_NE(text.find("tensor<bool[3]>[true, false, true]"), std::string::npos);
  EXPECT_NE(text.find("tensor<f32[2,0,3]>[]"), std::string::npos);
  EXPECT_NE(text.find("tensor<f16[4]>[5.9604645e-08, 65504.0, 0.3330078, -0.0010004044]"), std::string::npos) << text;
}

TEST(PrinterParser, FloatAttributesRoundTripExactly) {
  for (double v : {0.1, -0.0, 1e-300, 123456789.123, std::numeric_limits<double>::infinity(),
                   -std::numeric_limits<double>::infinity(), 5e-324}) {
    Graph graph("pad");
    Value *x = graph.addInput(f32({2}), "x");
    Builder b(graph);
    graph.setOutputs({b.create(OpKind::Pad, {x}, {{"pads", Ints{1, 0}}, {"value", v}})});
    expectRoundTrip(graph);
  }
  EXPECT_EQ(formatDouble(1.0), "1.0");
  EXPECT_EQ(formatDouble(1e-05), "1e-05");
  EXPECT_EQ(formatDouble(-std::numeric_limits<double>::infinity()), "-inf");
  EXPECT_EQ(formatFloat(0.1f), "0.1");
}

TEST(PrinterParser, DefaultAttributesAreNotPrinted) {
  Graph graph("g");
  Value *x = graph.addInput(f32({2, 3}), "x");
  Builder b(graph);
  graph.setOutputs({b.create(OpKind::ReduceSum, {x}, {{"keepdims", int64_t{0}}})});
  std::string text = printGraph(graph);
  EXPECT_NE(text.find("%0 = reduce_sum(%x) : f32[]"), std::string::npos) << text;
  // ... and the parser fills them back in.
  auto parsed = parseGraph(text);
  EXPECT_EQ(parsed->nodes()[0]->attrInt("keepdims"), 0);
  EXPECT_TRUE(parsed->nodes()[0]->attrInts("axes").empty());
}

TEST(PrinterParser, NamesAreSanitisedUniqueAndDeterministic) {
  Graph graph("names with spaces");
  Value *a = graph.addInput(f32({2}), "in put");
  Value *unnamed = graph.addInput(f32({2}));
  Builder b(graph);
  Value *n1 = b.create(OpKind::Neg, {a});
  n1->setName("h");
  Value *n2 = b.create(OpKind::Neg, {unnamed});
  n2->setName("h");
  Value *n3 = b.create(OpKind::Neg, {n2});
  n3->setName("42");
  Value *n4 = b.create(OpKind::Neg, {n3});
  graph.setOutputs({n1, n4});
  std::string text = printGraph(graph);
  EXPECT_EQ(text, "graph @\"names with spaces\"(%in_put: f32[2], %arg1: f32[2]) -> (f32[2], f32[2]) {\n"
                  "  %h = neg(%in_put) : f32[2]\n"
                  "  %h_1 = neg(%arg1) : f32[2]\n"
                  "  %v42 = neg(%h_1) : f32[2]\n"
                  "  %0 = neg(%v42) : f32[2]\n"
                  "  return %h, %0\n"
                  "}\n");
  // The names in the text are stored (except numbers), so the next print is identical.
  auto parsed = parseGraph(text);
  EXPECT_EQ(parsed->name(), "names with spaces");
  EXPECT_EQ(parsed->inputs()[1]->name(), "arg1");
  EXPECT_EQ(parsed->nodes()[2]->output()->name(), "v42");
  EXPECT_EQ(parsed->nodes()[3]->output()->name(), "");
  EXPECT_EQ(printGraph(*parsed), text);
  expectRoundTrip(*parsed);
}

// An output's own name prints after its value only where it differs from the value's printed
// name; it reads back, so a graph output's name (an ONNX model's Identity output, a value a
// pass replaced) survives the text form.
TEST(PrinterParser, OutputNamesPrintWhereTheyDifferFromTheValue) {
  Graph graph("g");
  Value *x = graph.addInput(f32({2}), "x");
  Builder b(graph);
  Value *r = b.create(OpKind::Relu, {x});
  r->setName("y2");
  Value *n = b.create(OpKind::Neg, {r});
  graph.setOutputs({r, r, x, r, n, n});
  graph.setOutputName(1, "y");
  graph.setOutputName(2, "x:copy \"1\"");
  graph.setOutputName(3, "y2"); // the value's own name: nothing to print
  graph.setOutputName(5, "negated");
  std::string text = expectRoundTrip(graph);
  EXPECT_EQ(text, "graph @g(%x: f32[2]) -> (f32[2], f32[2], f32[2], f32[2], f32[2], f32[2]) {\n"
                  "  %y2 = relu(%x) : f32[2]\n"
                  "  %0 = neg(%y2) : f32[2]\n"
                  "  return %y2, %y2 as \"y\", %x as \"x:copy \\\"1\\\"\", %y2, %0, %0 as \"negated\"\n"
                  "}\n");
  auto parsed = parseGraph(text);
  std::vector<std::string> names;
  for (size_t i = 0; i < parsed->outputs().size(); ++i)
    names.push_back(parsed->outputName(i));
  EXPECT_EQ(names, (std::vector<std::string>{"y2", "y", "x:copy \"1\"", "y2", "", "negated"}));
  // A renamed value keeps its output's name in the text.
  Graph sanitized("s");
  Value *in = sanitized.addInput(f32({2}), "in");
  Value *odd = Builder(sanitized).create(OpKind::Neg, {in});
  odd->setName("out:0");
  sanitized.setOutputs({odd});
  EXPECT_NE(printGraph(sanitized).find("return %out_0 as \"out:0\"\n"), std::string::npos) << printGraph(sanitized);
  EXPECT_EQ(parseGraph(printGraph(sanitized))->outputName(0), "out:0");
}

TEST(PrinterParser, NumericNamesInTextAreRenumbered) {
  auto graph = parseGraph("graph @g(%x: f32[2]) -> (f32[2]) {\n  %7 = neg(%x) : f32[2]\n"
                          "  %3 = abs(%7) : f32[2]\n  return %3\n}\n");
  EXPECT_EQ(printGraph(*graph), "graph @g(%x: f32[2]) -> (f32[2]) {\n  %0 = neg(%x) : f32[2]\n"
                                "  %1 = abs(%0) : f32[2]\n  return %1\n}\n");
}

TEST(PrinterParser, LargeTensorsAreElided) {
  Graph graph("big");
  Builder b(graph);
  Tensor big = randomTensor(f32({4, 5}), 1);
  Value *w = b.param("w", f32({4, 5}), big);
  Value *c = b.constant(big);
  graph.setOutputs({w, c});
  std::string text = printGraph(graph);
  EXPECT_NE(text.find("%0 = param \"w\" {value = tensor<f32[4,5]> elided} : f32[4,5]"), std::string::npos) << text;
  EXPECT_NE(text.find("%1 = constant tensor<f32[4,5]> elided : f32[4,5]"), std::string::npos) << text;
  // A parameter's elided value reads back as "no value"; a constant's cannot be read back.
  EXPECT_NE(parseError(text).find("t.kir:3:34: this tensor's values were elided"), std::string::npos)
      << parseError(text);
  EXPECT_NE(parseError(text).find("--keep-data"), std::string::npos);
  graph.setOutputs({w});
  graph.eraseNode(c->producer());
  std::string paramOnly = printGraph(graph);
  auto parsed = parseGraph(paramOnly);
  EXPECT_FALSE(parsed->nodes()[0]->attrTensor("value").defined());
  EXPECT_EQ(printGraph(*parsed), "graph @big() -> (f32[4,5]) {\n  %0 = param \"w\" : f32[4,5]\n  return %0\n}\n");
  // keepLargeTensors prints everything and round-trips exactly.
  expectRoundTrip(graph);
}

TEST(PrinterParser, StringsAndGraphNamesWithEscapes) {
  Graph graph(std::string("q\"\\\n\x01\xc3\xa9", 7));
  Builder b(graph);
  graph.setOutputs({b.param(std::string("p \"x\"\t\\\x7f\0end", 12), f32({1}))});
  std::string text = expectRoundTrip(graph);
  EXPECT_NE(text.find("param \"p \\\"x\\\"\\t\\\\\\x7f\\x00end\""), std::string::npos) << text;
  EXPECT_NE(text.find("graph @\"q\\\"\\\\\\n\\x01\xc3\xa9\""), std::string::npos) << text;
}

TEST(PrinterParser, CommentsAndBlankLinesAreIgnored) {
  auto graph = parseGraph("// leading comment\n\n  graph   @g ( %x : f32[2] ) -> ( f32[2] ) { // here\n"
                          "%0=neg(%x):f32[2]\n\n// between\n return %0 } // trailing\n");
  EXPECT_EQ(graph->numNodes(), 1u);
  EXPECT_EQ(graph->nodes()[0]->op(), OpKind::Neg);
}

TEST(PrinterParser, EmptyGraphAndNoOutputs) {
  Graph graph("empty");
  EXPECT_EQ(expectRoundTrip(graph), "graph @empty() -> () {\n  return\n}\n");
}

TEST(PrinterParser, ErrorsNameLineAndColumn) {
  // Each body follows a one-line header, so its first line is line 2; `tail` closes the graph.
  const std::string head = "graph @g(%x: f32[2,3]) -> (f32[2,3]) {\n", tail = "  return %x\n}\n";
  struct Case {
    std::string body;
    std::string expected;
    bool addTail = true;
  };
  std::vector<Case> cases = {
      {"  %0 = frobnicate(%x) : f32[2,3]\n", "t.kir:2:8: unknown op 'frobnicate'"},
      {"  %0 = neg(%y) : f32[2,3]\n", "t.kir:2:12: undefined value %y"},
      {"  %0 = neg(%x) : f32[2,3]\n  %0 = neg(%x) : f32[2,3]\n", "t.kir:3:3: redefinition of %0 (first defined at 2:3)"},
      {"  %x = neg(%x) : f32[2,3]\n", "t.kir:2:3: redefinition of %x (first defined at 1:10)"},
      {"  %0 = neg(%x) : f32[3,2]\n", "t.kir:2:18: type mismatch: %0 is written as f32[3,2] but neg infers f32[2,3]"},
      {"  %0 = neg(%x) {axis = 1} : f32[2,3]\n", "t.kir:2:17: unknown attribute 'axis' for neg (it has none)"},
      {"  %0 = reduce_sum(%x) {axes = 1} : f32[3]\n", "t.kir:2:31: expected '[' to start the list for attribute 'axes'"},
      {"  %0 = reduce_sum(%x) {keepdims = 1.5} : f32[1,1]\n", "t.kir:2:35: expected an integer for attribute 'keepdims', found '1.5'"},
      {"  %0 = reduce_sum(%x) {axes = [0], axes = [1]} : f32[3]\n", "t.kir:2:36: attribute 'axes' is given twice"},
      {"  %0 = reshape(%x) : f32[6]\n", "t.kir:2:3: reshape(f32[2,3]): missing required attribute 'shape'"},
      {"  %0 = exp(%x) : f32[2,3]\n  %1 = exp(%x) f32[2,3]\n", "t.kir:3:16: expected ':' and the result types, found 'f32'"},
      {"  %0 = param \"abc : f32[2]\n", "t.kir:2:14: unterminated string"},
      {"  %0 = param \"a\\qb\" : f32[2]\n", "t.kir:2:16: unknown escape '\\q' in string"},
      {"  %0, %1 = neg(%x) : f32[2,3]\n", "t.kir:2:3: wrong number of result names: neg produces 1 result, 2 names are given"},
      {"  %0 = neg(%x) : f32[2,3], f32[2,3]\n", "t.kir:2:28: 2 result types are given, neg produces 1"},
      {"  %0 = reduce_sum(%x) {axes = [99999999999999999999]} : f32[3]\n", "t.kir:2:32: integer 99999999999999999999 is out of range for attribute 'axes'"},
      {"  %0 = constant tensor<i8[2]>[1, 128] : i8[2]\n", "t.kir:2:34: value 128 is out of range for i8"},
      {"  %0 = constant tensor<u8[1]>[-1] : u8[1]\n", "t.kir:2:31: value -1 is out of range for u8"},
      {"  %0 = constant tensor<f32[1]>[1e39] : f32[1]\n", "t.kir:2:32: number 1e39 is out of range for a f32 tensor element"},
      {"  %0 = constant tensor<i32[1]>[1.5] : i32[1]\n", "t.kir:2:32: expected an integer for a i32 tensor element, found '1.5'"},
      {"  %0 = constant tensor<f32[3]>[1.0, 2.0] : f32[3]\n", "t.kir:2:31: tensor<f32[3]> needs 3 values, got 2"},
      {"  %0 = constant tensor<f32[1]>[1.0, 2.0] : f32[1]\n", "t.kir:2:37: tensor<f32[1]> needs 1 values, got more"},
      {"  %0 = constant tensor<bool[1]>[1] : bool[1]\n", "t.kir:2:33: expected true or false for a bool tensor element"},
      {"  %0 = constant tensor<f32[2]> elided : f32[2]\n", "t.kir:2:32: this tensor's values were elided"},
      {"  %0 = exp(%x) : f32[2,-3]\n", "t.kir:2:24: dimension -3 is negative"},
      {"  %0 = exp(%x) : q32[2,3]\n", "t.kir:2:18: unknown dtype 'q32'"},
      {"  %0 = param \"w\" : f32[1048576,1048576,1048576]\n", "t.kir:2:40: the shape has more than 2^48 elements"},
      {"  %0 = param \"w\" {shape = [1]} : f32[1]\n", "t.kir:2:19: unknown attribute 'shape' for param (it has value)"},
      {"  %0 = neg(%x) : f32[2,3]\n  return %0, %0\n}\n", "t.kir:3:3: return gives 2 values, the signature declares 1", false},
      {"  %0 = reduce_sum(%x) : f32[]\n  return %0\n}\n", "t.kir:3:10: type mismatch: %0 has type f32[], the signature declares f32[2,3]", false},
      {"  %0 = neg(%x) : f32[2,3]\n", "t.kir:3:1: expected a statement ('%name = op(...)') or 'return', found end of input", false},
      {"  return %x\n} extra\n", "t.kir:3:3: unexpected 'extra' after the end of the graph", false},
      {"  return %x as y\n}\n", "t.kir:2:16: expected the output's name as a string after 'as', found 'y'", false},
      {"  %0 = neg(%x) : f32[2,3] $\n", "t.kir:2:27: unexpected character '$'"},
      {"  %0 = not(%x) : bool[2,3]\n", "t.kir:2:3: not(f32[2,3]): needs a bool operand, got f32"},
      {"  %0 = add(%x) : f32[2,3]\n", "t.kir:2:3: add(f32[2,3]): expects 2 inputs, got 1"},
      {"  %0 = exp(%x) : f32[2,3]\n  return %0 \x01\n}\n", "t.kir:3:13: unexpected character '\\x01'", false},
  };
  for (const Case &c : cases) {
    std::string message = parseError(head + c.body + (c.addTail ? tail : ""));
    EXPECT_EQ(message.rfind(c.expected, 0), 0u) << "got:      " << message << "\nexpected: " << c.expected;
    EXPECT_EQ(message.find('\n'), std::string::npos) << message;
  }
}

TEST(PrinterParser, HeaderErrors) {
  EXPECT_EQ(parseError(""), "t.kir:1:1: expected 'graph' at the start of the file, found end of input");
  EXPECT_EQ(parseError("graph g"), "t.kir:1:7: expected the graph's name (@name) after 'graph', found 'g'");
  EXPECT_EQ(parseError("graph @g(%0: f32[1]) -> () {\n  return\n}"),
            "t.kir:1:10: graph input %0 needs a name, not a number");
  EXPECT_EQ(parseError("graph @g(%x: f32[1], %x: f32[1]) -> () {\n  return\n}"),
            "t.kir:1:22: redefinition of %x (first defined at 1:10)");
  EXPECT_EQ(parseError("graph @g() -> () {\n  return\n"), "t.kir:3:1: expected '}' after the return statement, found end of input");
  EXPECT_EQ(parseError("graph @g() -> (f32[1e3]) {"), "t.kir:1:20: expected an integer for a dimension, found '1e3'");
  EXPECT_EQ(parseError("graph @g() -> () {\n  %0 = iota() {shape = [2], dtype = q8} : i64[2]\n  return\n}"),
            "t.kir:2:37: expected a dtype (f32, i64, ...) for attribute 'dtype', found 'q8'");
}

TEST(PrinterParser, FileErrors) {
  try {
    parseGraphFile("/nonexistent/dir/x.kir");
    FAIL() << "expected an error";
  } catch (const Error &e) {
    EXPECT_EQ(std::string(e.what()), "cannot open '/nonexistent/dir/x.kir': No such file or directory");
  }
  EXPECT_THROW(parseGraphFile("/"), Error);
}

TEST(PrinterParser, ExportsUseTheTextNames) {
  Graph graph("g");
  Value *x = graph.addInput(f32({2}), "x");
  Builder b(graph);
  Value *c = b.constant(Tensor::fromDoubles(DType::F32, {2}, {std::numeric_limits<double>::infinity(), 0.5}));
  graph.setOutputs({b.create(OpKind::Add, {x, c})});
  std::string dot = toDot(graph);
  EXPECT_EQ(dot.rfind("digraph G {", 0), 0u) << dot;
  EXPECT_NE(dot.find("[label=\"%x\\nf32[2]\", shape=ellipse]"), std::string::npos) << dot;
  EXPECT_NE(dot.find("[label=\"add\\nf32[2]\", shape=box]"), std::string::npos) << dot;
  EXPECT_NE(dot.find("0->2 [label=\"%x\"]"), std::string::npos) << dot;
  std::string json = toJson(graph);
  EXPECT_NE(json.find("{\"op\": \"add\", \"inputs\": [\"%x\", \"%0\"], \"outputs\": [\"%1\"]"), std::string::npos)
      << json;
  EXPECT_NE(json.find("\"values\": [\"inf\", 0.5]"), std::string::npos) << json;
  EXPECT_NE(json.find("\"outputs\": [\"%1\"],\n  \"outputNames\": [\"1\"]\n}"), std::string::npos) << json;
}
