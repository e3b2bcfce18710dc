// Bad ONNX models: every one must be a kiln::Error with a message that names the file and
// what is wrong (and the node, where there is one) - never a crash.
#include <limits>

#include "OnnxTestModel.h"

using namespace kiln;
using namespace kiln::onnxtest;

namespace {

/// x -> Relu -> y, the smallest valid model, for the cases that break one thing in it.
ModelBuilder reluModel(int64_t opset = 13) {
  ModelBuilder m(opset);
  m.input("x", DType::F32, {2, 3});
  m.node("Relu", {"x"}, {"y"}, "relu");
  m.output("y", DType::F32, {2, 3});
  return m;
}

TEST(OnnxImportErrors, MalformedAndTruncatedBytes) {
  expectError([] { frontend::importOnnxBytes(std::string("\x0a\xff\xff\xff\xff\x0f", 6), {}, "junk.onnx"); },
              {"junk.onnx", "not a valid ONNX model"});
  expectError([] { frontend::importOnnxBytes("", {}, "empty.onnx"); }, {"empty.onnx", "no ir_version"});
  ModelBuilder m = reluModel();
  m.initializer("unused", iota(DType::F32, {64}));
  std::string bytes = m.bytes();
  expectError([&] { frontend::importOnnxBytes(bytes.substr(0, bytes.size() / 2), {}, "cut.onnx"); },
              {"cut.onnx", "truncated"});
}

TEST(OnnxImportErrors, FileSizeLimitAndMissingFile) {
  TempDir dir;
  dir.write("m.onnx", reluModel().bytes());
  frontend::OnnxImportOptions options;
  options.maxFileBytes = 10;
  expectError([&] { frontend::importOnnxFile(dir.file("m.onnx"), options); }, {"m.onnx", "more than the limit of 10"});
  EXPECT_NO_THROW(frontend::importOnnxFile(dir.file("m.onnx")));
  expectError([&] { frontend::importOnnxFile(dir.file("missing.onnx")); }, {"missing.onnx", "no such file"});
}

TEST(OnnxImportErrors, OpsetOutsideOneToEighteen) {
  expectError([] { import(reluModel(19)); }, {"opset 19", "newer than kiln supports"});
  expectError([] { import(reluModel(0)); }, {"opset 0", "older than kiln supports"});
  EXPECT_NO_THROW(import(reluModel(6)));
}

TEST(OnnxImportErrors, WrongInputCountFailsTheChecker) {
  ModelBuilder m(13);
  m.input("x", DType::F32, {2});
  m.node("Relu", {"x", "x"}, {"y"}, "relu");
  m.output("y", DType::F32, {2});
  expectError([&] { import(m); }, {"test.onnx", "not a valid ONNX model", "input size 2"});
}

TEST(OnnxImportErrors, NegativeAndHugeInputDims) {
  ModelBuilder negative = reluModel();
  negative.model.mutable_graph()
      ->mutable_input(0)
      ->mutable_type()
      ->mutable_tensor_type()
      ->mutable_shape()
      ->mutable_dim(0)
      ->set_dim_value(-4);
  expectError([&] { import(negative); }, {"graph input 'x'", "negative"});
  ModelBuilder huge(13);
  huge.input("x", DType::F32, {int64_t{1} << 40, int64_t{1} << 40});
  huge.node("Relu", {"x"}, {"y"});
  huge.output("y", DType::F32, {-1, -1});
  expectError([&] { import(huge); }, {"graph input 'x'"});
}

// kiln's size limit (2^48 per dim and per count of non-zero dims, core/ShapeMath.h) holds for
// every shape a model brings, also where a zero dim makes the tensor empty: the dims of an
// empty tensor still feed strides and block sizes.
TEST(OnnxImportErrors, ShapesPastKilnsLimitAlsoBesideAZeroDim) {
  constexpr int64_t kI64Max = std::numeric_limits<int64_t>::max(), kLimit = int64_t{1} << 48;
  // The ONNX loader fuzzer's Concat (tests/onnx/fuzz-regressions/concat-huge-dim-beside-zero.onnx):
  // evaluating it multiplied 2 * (2^63-1), and the Release build printed f32[64,0,2,2^63-1].
  ModelBuilder fuzzed(13);
  fuzzed.input("a", DType::F32, {64, 0, 2, kI64Max});
  fuzzed.input("b", DType::F32, {64, 0, 2, kI64Max});
  setInt(fuzzed.node("Concat", {"a", "b"}, {"y"}, "concat"), "axis", -3);
  fuzzed.output("y", DType::F32, {64, 0, 2, kI64Max});
  expectError([&] { import(fuzzed); },
              {"graph input 'a': shape [64,0,2,9223372036854775807] has a dimension 9223372036854775807 larger "
               "than kiln's limit of 2^48"});

  // Valid empty operands whose concatenated dim passes the limit: the error names the node.
  ModelBuilder joined(13);
  joined.input("a", DType::F32, {1, 0, 2, kLimit / 2});
  joined.input("b", DType::F32, {1, 0, 2, 1});
  setInt(joined.node("Concat", {"a", "a", "b"}, {"y"}, "concat"), "axis", -1);
  joined.output("y", DType::F32, {1, 0, 2, -1});
  expectError([&] { import(joined); },
              {"node 'concat' (Concat)", "[1,0,2,281474976710657]", "larger than kiln's limit"});

  // A shape computed in the model: ConstantOfShape of [0, 2^62].
  ModelBuilder filled(13);
  filled.constant("shape", Tensor::fromDoubles(DType::I64, {2}, {0, 4611686018427387904.0}));
  filled.node("ConstantOfShape", {"shape"}, {"y"}, "fill");
  filled.output("y", DType::F32, {0, -1});
  expectError([&] { import(filled); }, {"'fill'", "larger than kiln's limit of 2^48"});

  // An empty initializer with a huge dim.
  ModelBuilder weights = reluModel();
  onnx::TensorProto &w = *weights.model.mutable_graph()->add_initializer();
  w.set_name("w");
  w.set_data_type(onnx::TensorProto::FLOAT);
  w.add_dims(0);
  w.add_dims(kI64Max);
  expectError([&] { import(weights); }, {"initializer 'w'", "larger than kiln's limit of 2^48"});
}

TEST(OnnxImportErrors, UndefinedInputAndCycle) {
  ModelBuilder missing(13);
  missing.input("x", DType::F32, {2});
  missing.node("Add", {"x", "w"}, {"y"}, "add"); // "w" is no initializer
  missing.output("y", DType::F32, {2});
  expectError([&] { import(missing); }, {"not a valid ONNX model", "'w'", "topologically sorted"});

  // b = Relu(a) listed before a = Relu(x): out of order, as a cycle would be.
  ModelBuilder cycle(13);
  cycle.input("x", DType::F32, {2});
  cycle.node("Relu", {"a"}, {"b"}, "second");
  cycle.node("Relu", {"x"}, {"a"}, "first");
  cycle.output("b", DType::F32, {2});
  expectError([&] { import(cycle); }, {"topologically sorted", "'a'"});
}

TEST(OnnxImportErrors, DuplicateValueNames) {
  ModelBuilder m(13);
  m.input("x", DType::F32, {2});
  m.node("Relu", {"x"}, {"y"}, "one");
  m.node("Neg", {"x"}, {"y"}, "two");
  m.output("y", DType::F32, {2});
  expectError([&] { import(m); }, {"'y'", "single static assignment"});
  ModelBuilder twice = reluModel();
  twice.initializer("w", iota(DType::F32, {2}));
  twice.initializer("w", iota(DType::F32, {2}));
  expectError([&] { import(twice); }, {"initializer 'w' is defined twice"});
}

TEST(OnnxImportErrors, TypeMismatchNamesTheNode) {
  ModelBuilder m(13);
  m.input("x", DType::F32, {2});
  m.input("n", DType::I64, {2});
  m.node("Add", {"x", "n"}, {"y"}, "mixed_add");
  m.output("y", DType::F32, {2});
  expectError([&] { import(m); }, {"test.onnx", "mixed_add"});
}

TEST(OnnxImportErrors, OutOfRangeConstantGatherIndices) {
  ModelBuilder m(13);
  m.input("x", DType::F32, {3, 2});
  m.initializer("idx", Tensor::fromDoubles(DType::I64, {2}, {0, 3}));
  m.node("Gather", {"x", "idx"}, {"y"}, "lookup");
  m.output("y", DType::F32, {2, 2});
  expectError([&] { import(m); }, {"node 'lookup' (Gather)", "index 3", "out of range"});
}

TEST(OnnxImportErrors, NonConstantStaticInputNamesTheNode) {
  ModelBuilder m(13);
  m.input("x", DType::F32, {2, 3});
  m.input("shape", DType::I64, {2});
  m.node("Reshape", {"x", "shape"}, {"y"}, "dyn_reshape");
  m.output("y", DType::F32, {-1, -1});
  expectError([&] { import(m); }, {"node 'dyn_reshape' (Reshape)", "'shape'", "known at import time"});
}

TEST(OnnxImportErrors, EveryUnsupportedNodeIsListedAtOnce) {
  ModelBuilder m(13);
  auto *custom = m.model.add_opset_import();
  custom->set_domain("com.example");
  custom->set_version(1);
  m.input("x", DType::F32, {1, 1, 4, 4});
  m.input("roi", DType::F32, {8});
  m.input("sizes", DType::I64, {4});
  setString(m.node("Resize", {"x", "roi", "", "sizes"}, {"p"}, "crop"), "coordinate_transformation_mode",
            "tf_crop_and_resize");
  m.node("Relu", {"p"}, {"r"}, "fine");
  m.node("MyOp", {"r"}, {"y"}, "custom_op").set_domain("com.example");
  m.output("y", DType::F32, {-1, -1, -1, -1});
  expectError([&] { import(m); }, {"test.onnx", "2 node(s)", "node 'crop' (Resize)", "tf_crop_and_resize",
                                   "node 'custom_op' (MyOp)", "com.example"});
}

// If bodies nested 20 deep: refused before any check recurses into them.
TEST(OnnxImportErrors, DeeplyNestedSubgraphsAndControlFlow) {
  auto ifNode = [](onnx::GraphProto &graph, const std::string &out) -> onnx::NodeProto & {
    onnx::NodeProto &node = *graph.add_node();
    node.set_op_type("If");
    node.add_input("cond");
    node.add_output(out);
    return node;
  };
  ModelBuilder m(13);
  m.input("cond", DType::Bool, {});
  onnx::GraphProto *graph = m.model.mutable_graph();
  for (int depth = 0; depth < 20; ++depth) {
    onnx::NodeProto &node = ifNode(*graph, "y");
    auto *attr = node.add_attribute();
    attr->set_name("then_branch");
    attr->set_type(onnx::AttributeProto::GRAPH);
    graph = attr->mutable_g();
  }
  m.output("y", DType::F32, {});
  expectError([&] { import(m); }, {"nested more than 16 levels"});

  ModelBuilder shallow(13);
  shallow.input("cond", DType::Bool, {});
  shallow.input("x", DType::F32, {2});
  onnx::NodeProto &node = ifNode(*shallow.model.mutable_graph(), "y");
  node.set_name("branch");
  for (const char *name : {"then_branch", "else_branch"}) {
    auto *attr = node.add_attribute();
    attr->set_name(name);
    attr->set_type(onnx::AttributeProto::GRAPH);
    onnx::GraphProto &body = *attr->mutable_g();
    body.set_name(name);
    auto *relu = body.add_node();
    relu->set_op_type("Relu");
    relu->add_input("x");
    relu->add_output(std::string(name) + "_out");
    auto *out = body.add_output();
    out->set_name(std::string(name) + "_out");
    out->mutable_type()->mutable_tensor_type()->set_elem_type(onnx::TensorProto::FLOAT);
    out->mutable_type()->mutable_tensor_type()->mutable_shape()->add_dim()->set_dim_value(2);
  }
  shallow.output("y", DType::F32, {2});
  expectError([&] { import(shallow); }, {"node 'branch' (If)", "control flow"});
}

TEST(OnnxImportErrors, UnsupportedDtypeIsListed) {
  ModelBuilder m(13);
  m.input("x", DType::F32, {2});
  auto &cast = m.node("Cast", {"x"}, {"y"}, "to_u16");
  setInt(cast, "to", onnx::TensorProto::UINT16);
  m.output("y", DType::F32, {2});
  m.model.mutable_graph()->mutable_output(0)->mutable_type()->mutable_tensor_type()->set_elem_type(
      onnx::TensorProto::UINT16);
  expectError([&] { import(m); }, {"node 'to_u16' (Cast)", "uint16"});
}

TEST(OnnxImportErrors, CoverageReportsEveryOpType) {
  ModelBuilder m(13);
  auto *custom = m.model.add_opset_import();
  custom->set_domain("com.example");
  custom->set_version(1);
  m.input("x", DType::F32, {-1, 1, 4, 4});
  m.node("Relu", {"x"}, {"a"});
  m.node("Relu", {"a"}, {"b"});
  auto &pool = m.node("MaxPool", {"b"}, {"p", "idx"}, "pool");
  setInts(pool, "kernel_shape", {2, 2});
  setInt(pool, "storage_order", 2);
  m.node("Frobnicate", {"p"}, {"y"}).set_domain("com.example");
  m.output("y", DType::F32, {-1, -1, -1, -1});
  TempDir dir;
  dir.write("m.onnx", m.bytes());
  frontend::OnnxCoverage coverage = frontend::onnxCoverage(dir.file("m.onnx"));
  EXPECT_EQ(coverage.opset, 13);
  EXPECT_EQ(coverage.nodeCount, 4);
  ASSERT_EQ(coverage.ops.size(), 3u);
  EXPECT_EQ(coverage.ops[0].opType, "MaxPool");
  EXPECT_TRUE(coverage.ops[0].supported);
  ASSERT_EQ(coverage.ops[0].problems.size(), 1u);
  EXPECT_NE(coverage.ops[0].problems[0].find("storage_order=2"), std::string::npos);
  EXPECT_EQ(coverage.ops[1].opType, "Relu");
  EXPECT_EQ(coverage.ops[1].count, 2);
  EXPECT_TRUE(coverage.ops[1].supported);
  EXPECT_EQ(coverage.ops[2].opType, "com.example:Frobnicate");
  EXPECT_FALSE(coverage.ops[2].supported);
  EXPECT_FALSE(coverage.fullySupported());
}

} // namespace

namespace {

// Flipped bytes of a valid model (a Conv net with initializers and a Shape subgraph): every
// import either succeeds or throws kiln::Error - no crash, no other exception.
TEST(OnnxImportErrors, CorruptedBytesNeverCrash) {
  ModelBuilder m(13);
  m.input("x", DType::F32, {1, 2, 5, 5});
  m.initializer("w", iota(DType::F32, {3, 2, 3, 3}, 0.01));
  m.initializer("b", iota(DType::F32, {3}));
  auto &conv = m.node("Conv", {"x", "w", "b"}, {"c"}, "conv");
  setInts(conv, "pads", {1, 1, 1, 1});
  m.node("Shape", {"c"}, {"s"});
  m.constant("two", Tensor::fromDoubles(DType::I64, {1}, {2}));
  m.node("Slice", {"s", "two", "two"}, {"empty"}); // an empty slice, folded
  m.constant("flat", Tensor::fromDoubles(DType::I64, {2}, {1, -1}));
  m.node("Reshape", {"c", "flat"}, {"y"});
  m.output("y", DType::F32, {1, 75});
  std::string good = m.bytes();
  ASSERT_NO_THROW(frontend::importOnnxBytes(good));
  uint64_t state = 12345;
  auto next = [&state] { // xorshift: reproducible without <random>'s distributions
    state ^= state << 13;
    state ^= state >> 7;
    state ^= state << 17;
    return state;
  };
  int failures = 0;
  for (int round = 0; round < 300; ++round) {
    std::string bad = good;
    for (int flips = 1 + static_cast<int>(next() % 3); flips > 0; --flips)
      bad[next() % bad.size()] = static_cast<char>(next());
    try {
      frontend::importOnnxBytes(bad, {}, "fuzz.onnx");
    } catch (const Error &e) {
      ++failures;
      EXPECT_EQ(std::string(e.what()).rfind("fuzz.onnx: ", 0), 0u) << e.what();
    }
  }
  EXPECT_GT(failures, 0);
}

} // namespace
