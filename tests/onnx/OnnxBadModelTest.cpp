// Hand-made bad models the other ONNX error tests (OnnxImportErrorTest, OnnxTensorTest) do not
// cover yet: a true cycle, duplicate inputs, wrong operand counts, IR versions, dims and data
// that disagree, indices out of range at run time, nesting past protobuf's recursion limit,
// and external data that escapes the model's folder or its file in the remaining ways. Each
// must be a kiln::Error naming what is wrong - never a crash, a hang or a huge allocation.
#include <sys/stat.h>
#include <unistd.h>

#include "OnnxTestModel.h"

using namespace kiln;
using namespace kiln::onnxtest;

namespace {

ModelBuilder reluModel() {
  ModelBuilder m(13);
  m.input("x", DType::F32, {2, 3});
  m.node("Relu", {"x"}, {"y"}, "relu");
  m.output("y", DType::F32, {2, 3});
  return m;
}

// ---- graph structure ------------------------------------------------------------------------

TEST(OnnxBadModels, TwoNodesFeedingEachOther) {
  ModelBuilder m(13);
  m.input("x", DType::F32, {2});
  m.node("Add", {"x", "b"}, {"a"}, "first");
  m.node("Relu", {"a"}, {"b"}, "second");
  m.output("b", DType::F32, {2});
  expectError([&] { import(m); }, {"test.onnx", "'b'", "topologically sorted"});
}

TEST(OnnxBadModels, GraphInputDeclaredTwice) {
  ModelBuilder m = reluModel();
  m.input("x", DType::F32, {2, 3});
  expectError([&] { import(m); }, {"graph input 'x' is declared twice"});
}

TEST(OnnxBadModels, TooFewOperandsAndMissingOutput) {
  ModelBuilder few(13);
  few.input("x", DType::F32, {2});
  few.node("Add", {"x"}, {"y"}, "half_add");
  few.output("y", DType::F32, {2});
  expectError([&] { import(few); }, {"test.onnx", "not a valid ONNX model"});

  ModelBuilder unproduced = reluModel();
  unproduced.output("z", DType::F32, {2, 3});
  expectError([&] { import(unproduced); }, {"test.onnx", "'z'"});
}

TEST(OnnxBadModels, OutputDeclaredWithAnotherType) {
  ModelBuilder m = reluModel();
  m.model.mutable_graph()->mutable_output(0)->mutable_type()->mutable_tensor_type()->set_elem_type(
      onnx::TensorProto::INT64);
  expectError([&] { import(m); }, {"test.onnx", "relu", "INT64"});
}

TEST(OnnxBadModels, IrVersionsAndDefaultDomainImportedTwice) {
  ModelBuilder newer = reluModel();
  newer.model.set_ir_version(99);
  expectError([&] { import(newer); }, {"IR version 99", "newer"});
  ModelBuilder older = reluModel();
  older.model.set_ir_version(2);
  expectError([&] { import(older); }, {"IR version 2", "older than 3"});
  ModelBuilder twice = reluModel();
  auto *again = twice.model.add_opset_import();
  again->set_domain("ai.onnx");
  again->set_version(13);
  expectError([&] { import(twice); }, {"default ONNX domain is imported twice"});
}

// ---- dims and data --------------------------------------------------------------------------

// Initializers claiming far more elements than their 4 values: refused from the counts,
// before anything of the claimed size is allocated.
TEST(OnnxBadModels, InitializerDimsDisagreeWithItsData) {
  ModelBuilder large = reluModel();
  onnx::TensorProto &w = *large.model.mutable_graph()->add_initializer();
  w = tensorProto(iota(DType::F32, {4}), "w", false);
  w.set_dims(0, int64_t{1} << 30);
  w.add_dims(16);
  expectError([&] { import(large); }, {"initializer 'w'", "4 values in float_data", "need 17179869184"});

  ModelBuilder huge = reluModel();
  onnx::TensorProto &h = *huge.model.mutable_graph()->add_initializer();
  h = tensorProto(iota(DType::F32, {4}), "h", false);
  h.set_dims(0, int64_t{1} << 40);
  h.add_dims(int64_t{1} << 20);
  expectError([&] { import(huge); }, {"initializer 'h'", "more than kiln's limit of 2^48"});

  ModelBuilder raw = reluModel();
  onnx::TensorProto &r = *raw.model.mutable_graph()->add_initializer();
  r = tensorProto(iota(DType::F32, {4}), "r");
  r.set_dims(0, int64_t{1} << 61);
  expectError([&] { import(raw); }, {"initializer 'r'"});

  ModelBuilder negative = reluModel();
  onnx::TensorProto &n = *negative.model.mutable_graph()->add_initializer();
  n = tensorProto(iota(DType::F32, {4}), "n");
  n.set_dims(0, -4);
  expectError([&] { import(negative); }, {"initializer 'n'", "negative dim"});
}

TEST(OnnxBadModels, NegativeConstantGatherIndexPastTheStart) {
  ModelBuilder m(13);
  m.input("x", DType::F32, {3, 2});
  m.initializer("idx", Tensor::fromDoubles(DType::I64, {1}, {-4}));
  m.node("Gather", {"x", "idx"}, {"y"}, "lookup");
  m.output("y", DType::F32, {1, 2});
  expectError([&] { import(m); }, {"node 'lookup' (Gather)", "-4"});
}

// Indices that are a graph input are only known when the graph runs: the evaluator refuses
// an index past the axis with a message instead of reading out of bounds.
TEST(OnnxBadModels, GatherIndicesOutOfRangeAtRunTime) {
  ModelBuilder m(13);
  m.input("x", DType::F32, {3, 2});
  m.input("idx", DType::I64, {2});
  m.node("Gather", {"x", "idx"}, {"y"}, "lookup");
  m.output("y", DType::F32, {2, 2});
  auto graph = import(m);
  Tensor x = iota(DType::F32, {3, 2});
  std::vector<Tensor> fine = ir::evaluate(*graph, {x, Tensor::fromDoubles(DType::I64, {2}, {2, -3})});
  expectClose(fine[0], {4, 5, 0, 1});
  for (double bad : {3.0, -4.0, 1e12})
    expectError([&] { ir::evaluate(*graph, {x, Tensor::fromDoubles(DType::I64, {2}, {0, bad})}); }, {"out of range"});
}

// Tables built at import time from operands or dims that need no data behind them are bounded,
// and values with no integer meaning (NaN mel edges, an infinite aspect ratio) are refused.
TEST(OnnxBadModels, ImportTimeTablesAreBounded) {
  auto mel = [](double lowHz, int64_t mels, int64_t dftLength) {
    ModelBuilder m(17);
    m.initializer("mels", Tensor::scalar(DType::I64, static_cast<double>(mels)));
    m.initializer("dft", Tensor::scalar(DType::I64, static_cast<double>(dftLength)));
    m.initializer("rate", Tensor::scalar(DType::I64, 16000));
    m.initializer("low", Tensor::scalar(DType::F32, lowHz));
    m.initializer("high", Tensor::scalar(DType::F32, 4000));
    m.node("MelWeightMatrix", {"mels", "dft", "rate", "low", "high"}, {"w"}, "mel");
    m.output("w", DType::F32, {dftLength / 2 + 1, mels});
    return m;
  };
  EXPECT_NO_THROW(import(mel(0, 8, 64)));
  expectError([&] { import(mel(-1000, 8, 64)); }, {"node 'mel' (MelWeightMatrix)", "no DFT bin"});
  expectError([&] { import(mel(0, 65536, 1 << 20)); }, {"node 'mel' (MelWeightMatrix)", "mel weight matrix"});

  ModelBuilder stft(17);
  stft.input("signal", DType::F32, {1, int64_t{1} << 30, 1});
  stft.initializer("step", Tensor::scalar(DType::I64, 1));
  stft.initializer("length", Tensor::scalar(DType::I64, 64));
  stft.node("STFT", {"signal", "step", "", "length"}, {"y"}, "stft");
  stft.output("y", DType::F32, {-1, -1, -1, -1});
  expectError([&] { import(stft); }, {"node 'stft' (STFT)", "frame positions", "more than the 16777216"});

  // not_smaller takes the largest ratio of sizes to input dims: over an empty dim, infinity.
  ModelBuilder resize(18);
  resize.input("x", DType::F32, {1, 0});
  resize.initializer("sizes", Tensor::fromDoubles(DType::I64, {2}, {2, 3}));
  auto &node = resize.node("Resize", {"x", "", "", "sizes"}, {"y"}, "grow");
  setString(node, "keep_aspect_ratio_policy", "not_smaller");
  resize.output("y", DType::F32, {-1, -1});
  expectError([&] { import(resize); }, {"node 'grow' (Resize)", "no valid size"});
}

// Mappings that unroll over a dim (a recurrence's steps, Det's rows) or build a table over two
// dims bound them first: the dims need no data behind them, so a tiny file could ask for any.
TEST(OnnxBadModels, UnrolledMappingsAreBounded) {
  ModelBuilder rnn(14);
  rnn.input("x", DType::F32, {5000, 1, 2});
  rnn.input("w", DType::F32, {1, 1, 2});
  rnn.input("r", DType::F32, {1, 1, 1});
  setInt(rnn.node("RNN", {"x", "w", "r"}, {"", "h"}, "long_rnn"), "hidden_size", 1);
  rnn.output("h", DType::F32, {1, 1, 1});
  // A recurrence is one node whatever its length (its unrolled form is bounded where it is
  // built: OpsRecurrent.UnrollingIsBounded).
  EXPECT_EQ(countOps(*import(rnn), ir::OpKind::RnnSequence), 1);

  ModelBuilder det(13);
  det.input("a", DType::F32, {0, 2000, 2000});
  det.node("Det", {"a"}, {"d"}, "big_det");
  det.output("d", DType::F32, {0});
  expectError([&] { import(det); }, {"node 'big_det' (Det)", "2000 x 2000", "1024"});

  ModelBuilder reverse(13);
  reverse.input("x", DType::F32, {int64_t{1} << 30, 4, 0});
  reverse.initializer("lens", Tensor::fromDoubles(DType::I64, {4}, {1, 2, 3, 4}));
  auto &node = reverse.node("ReverseSequence", {"x", "lens"}, {"y"}, "rev");
  setInt(node, "time_axis", 0);
  setInt(node, "batch_axis", 1);
  reverse.output("y", DType::F32, {int64_t{1} << 30, 4, 0});
  expectError([&] { import(reverse); }, {"node 'rev' (ReverseSequence)", "index table"});
}

// ---- nesting --------------------------------------------------------------------------------

// Nesting past protobuf's recursion limit is refused while parsing; nesting through a GRAPHS
// attribute counts like a GRAPH one.
TEST(OnnxBadModels, NestingPastTheParserLimitAndThroughGraphLists) {
  auto nested = [](int depth, bool asList) {
    ModelBuilder m(13);
    m.input("x", DType::F32, {2});
    onnx::GraphProto *graph = m.model.mutable_graph();
    for (int level = 0; level < depth; ++level) {
      onnx::NodeProto &node = *graph->add_node();
      node.set_op_type("Loop");
      node.add_output("y");
      auto *attr = node.add_attribute();
      attr->set_name("body");
      attr->set_type(asList ? onnx::AttributeProto::GRAPHS : onnx::AttributeProto::GRAPH);
      graph = asList ? attr->add_graphs() : attr->mutable_g();
    }
    m.output("y", DType::F32, {2});
    return m;
  };
  expectError([&] { import(nested(200, false)); }, {"test.onnx", "nested too deeply"});
  expectError([&] { import(nested(20, true)); }, {"nested more than 16 levels"});
}

// ---- external data --------------------------------------------------------------------------

/// A model whose initializer w (4 floats) lives in `location`, with the given offset and length
/// entries (an empty string leaves the entry out).
ModelBuilder externalModel(const std::string &location, const std::string &offset, const std::string &length) {
  ModelBuilder m(13);
  m.input("x", DType::F32, {4});
  onnx::TensorProto &w = *m.model.mutable_graph()->add_initializer();
  w.set_name("w");
  w.set_data_type(onnx::TensorProto::FLOAT);
  w.add_dims(4);
  w.set_data_location(onnx::TensorProto::EXTERNAL);
  auto addEntry = [&](const std::string &key, const std::string &value) {
    if (value.empty())
      return;
    auto *entry = w.add_external_data();
    entry->set_key(key);
    entry->set_value(value);
  };
  addEntry("location", location);
  addEntry("offset", offset);
  addEntry("length", length);
  m.node("Add", {"x", "w"}, {"y"});
  m.output("y", DType::F32, {4});
  return m;
}

class OnnxBadExternalData : public ::testing::Test {
protected:
  void SetUp() override {
    outside.write("secret.bin", std::string(16, 's'));
    dir.write("weights.bin", std::string(24, 'w')); // 24 bytes: room for 4 floats at offsets 0-8
  }
  std::unique_ptr<ir::Graph> importWith(const ModelBuilder &m) {
    dir.write("m.onnx", m.bytes());
    return frontend::importOnnxFile(dir.file("m.onnx"));
  }
  TempDir outside, dir;
};

TEST_F(OnnxBadExternalData, TheFileItselfLoads) {
  EXPECT_NO_THROW(importWith(externalModel("weights.bin", "8", "16")));
  EXPECT_NO_THROW(importWith(externalModel("weights.bin", "", "")));
}

TEST_F(OnnxBadExternalData, RangesPastTheFileEnd) {
  expectError([&] { importWith(externalModel("weights.bin", "100", "16")); }, {"initializer 'w'", "only 24"});
  expectError([&] { importWith(externalModel("weights.bin", "9999999999999999999", "")); }, {"only 24"});
  expectError([&] { importWith(externalModel("weights.bin", "0", "32")); }, {"length 32", "16 bytes"});
  expectError([&] { importWith(externalModel("weights.bin", "-8", "")); }, {"'-8'", "not a byte count"});
  expectError([&] { importWith(externalModel("weights.bin", "0x10", "")); }, {"'0x10'", "not a byte count"});
  expectError([&] { importWith(externalModel("weights.bin", "99999999999999999999", "")); }, {"not a byte count"});
}

TEST_F(OnnxBadExternalData, EscapesThroughFoldersAndDotDotInside) {
  // A symlinked folder inside the model's folder that leads outside it.
  std::filesystem::create_directory_symlink(outside.path(), dir.path() / "linked");
  expectError([&] { importWith(externalModel("linked/secret.bin", "", "")); }, {"outside the model's folder"});
  std::filesystem::create_directory(dir.path() / "sub");
  expectError([&] { importWith(externalModel("sub/../weights.bin", "", "")); }, {"'..'"});
  expectError([&] { importWith(externalModel("", "", "")); }, {"initializer 'w'"});
}

TEST_F(OnnxBadExternalData, FifoAndFolderAreRefusedWithoutBlocking) {
  ASSERT_EQ(::mkfifo(dir.file("pipe.bin").c_str(), 0600), 0);
  expectError([&] { importWith(externalModel("pipe.bin", "", "")); }, {"'pipe.bin'", "not a regular file"});
  std::filesystem::create_directory(dir.path() / "folder.bin");
  expectError([&] { importWith(externalModel("folder.bin", "", "")); }, {"'folder.bin'", "not a regular file"});
}

// A Constant node's tensor goes through the same checks as an initializer.
TEST_F(OnnxBadExternalData, ConstantNodeValueEscapes) {
  ModelBuilder m(13);
  m.input("x", DType::F32, {4});
  auto &constant = m.node("Constant", {}, {"c"}, "const");
  auto *attr = constant.add_attribute();
  attr->set_name("value");
  attr->set_type(onnx::AttributeProto::TENSOR);
  onnx::TensorProto &t = *attr->mutable_t();
  t.set_data_type(onnx::TensorProto::FLOAT);
  t.add_dims(4);
  t.set_data_location(onnx::TensorProto::EXTERNAL);
  auto *entry = t.add_external_data();
  entry->set_key("location");
  entry->set_value(outside.file("secret.bin"));
  m.node("Add", {"x", "c"}, {"y"});
  m.output("y", DType::F32, {4});
  expectError([&] { importWith(m); }, {"m.onnx", "secret.bin"});
}

// Tensor files (the backend test data) resolve external data against their own folder.
TEST_F(OnnxBadExternalData, TensorFileEscapes) {
  onnx::TensorProto t;
  t.set_data_type(onnx::TensorProto::FLOAT);
  t.add_dims(4);
  t.set_data_location(onnx::TensorProto::EXTERNAL);
  auto *entry = t.add_external_data();
  entry->set_key("location");
  entry->set_value("../" + outside.path().filename().string() + "/secret.bin");
  dir.write("t.pb", t.SerializeAsString());
  expectError([&] { frontend::readTensorProtoFile(dir.file("t.pb")); }, {"t.pb", "'..'"});
  entry->set_value(outside.file("secret.bin"));
  dir.write("t.pb", t.SerializeAsString());
  expectError([&] { frontend::readTensorProtoFile(dir.file("t.pb")); }, {"t.pb", "absolute path"});
  // From bytes, only with a folder to resolve against.
  expectError([&] { frontend::readTensorProtoBytes(t.SerializeAsString(), "", "t.bytes"); }, {"t.bytes", "no folder"});
  entry->set_value("weights.bin");
  Tensor loaded = frontend::readTensorProtoBytes(t.SerializeAsString(), dir.path().string(), "t.bytes");
  ASSERT_EQ(loaded.numElements(), 4);
  EXPECT_EQ(std::memcmp(loaded.data(), "wwwwwwwwwwwwwwww", 16), 0);
}

} // namespace
