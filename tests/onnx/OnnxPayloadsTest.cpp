// The split ONNX reader (frontend/onnx/OnnxPayloads.h): a model split into its skeleton and
// its lifted raw_data payloads, the payloads put back, parses to exactly the ModelProto a
// whole parse gives, on the ONNX conformance models, on the fuzz regression inputs and on a
// generated model with large initializers of every kind (raw, typed, widened, bool, external);
// the import reads the lifted payloads as the values the file holds; and input that is not
// plain wire format is handed to protobuf whole, so malformed files are still refused with
// a message and odd but valid ones still import.
#include <algorithm>

#include "OnnxTestModel.h"
#include "frontend/onnx/OnnxPayloads.h"

using namespace kiln;
using namespace kiln::onnxtest;

namespace {

namespace fs = std::filesystem;

std::string readBytes(const fs::path &path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

/// The skeleton parsed, each lifted payload put back as its initializer's raw_data, and
/// serialised again; "" when the skeleton does not parse.
std::string restored(const std::string &skeleton, const frontend::LiftedPayloads &payloads) {
  onnx::ModelProto model;
  if (!model.ParseFromString(skeleton))
    return "";
  EXPECT_EQ(payloads.size(), static_cast<size_t>(model.graph().initializer_size()));
  for (size_t i = 0; i < payloads.size(); ++i)
    if (payloads[i].defined()) {
      onnx::TensorProto &init = *model.mutable_graph()->mutable_initializer(static_cast<int>(i));
      EXPECT_EQ(init.raw_data(), std::string(1, '\0')) << "initializer " << i << " keeps no placeholder";
      init.set_raw_data(std::string(static_cast<const char *>(payloads[i].data()), payloads[i].byteSize()));
    }
  return model.SerializeAsString();
}

/// Whether splitting `bytes` (lifting every raw_data of at least `minLifted` bytes) and
/// putting the payloads back gives the ModelProto a whole parse gives. A split may give up
/// unless `mustSplit`; where the whole parse fails, the skeleton must not parse either.
/// Returns how many payloads were lifted.
size_t expectSplitEqualsWholeParse(const std::string &bytes, uint64_t minLifted, const std::string &name,
                                   bool mustSplit = false) {
  frontend::LiftedPayloads payloads;
  std::optional<std::string> skeleton = frontend::splitOnnxBytes(bytes, payloads, minLifted);
  onnx::ModelProto whole;
  bool parses = whole.ParseFromString(bytes);
  if (!skeleton) {
    EXPECT_FALSE(mustSplit) << name << ": the split gave up on plain wire format";
    EXPECT_TRUE(payloads.empty()) << name;
    return 0;
  }
  std::string back = restored(*skeleton, payloads);
  if (!parses) {
    EXPECT_EQ(back, "") << name << ": the skeleton parses where the whole file does not";
    return 0;
  }
  EXPECT_TRUE(back == whole.SerializeAsString()) << name << ": split and restored differs from the whole parse";
  return static_cast<size_t>(std::count_if(payloads.begin(), payloads.end(), [](const Tensor &t) { return t.defined(); }));
}

TEST(OnnxPayloads, SplitEqualsWholeParseOnTheConformanceModels) {
  fs::path suite = fs::path(KILN_ONNX_CONFORMANCE_DIR) / "node";
  if (!fs::is_directory(suite))
    GTEST_SKIP() << suite << " is not generated yet (ctest -R conformance/onnx-node generates it)";
  size_t models = 0, lifted = 0;
  for (const auto &entry : fs::recursive_directory_iterator(suite)) {
    if (entry.path().filename() != "model.onnx")
      continue;
    ++models;
    const fs::path dir = entry.path().parent_path();
    std::string bytes = readBytes(entry.path());
    // Every raw_data lifted, however small: the splitter walks each one.
    lifted += expectSplitEqualsWholeParse(bytes, 1, dir.filename(), true);
    // The same model with its first data set's inputs as initializers, which most node tests
    // hold in raw_data: their values are lifted too.
    onnx::ModelProto model;
    ASSERT_TRUE(model.ParseFromString(bytes)) << dir;
    for (int i = 0; i < model.graph().input_size(); ++i) {
      onnx::TensorProto value;
      if (!value.ParseFromString(readBytes(dir / "test_data_set_0" / fmt::format("input_{}.pb", i))))
        continue; // a sequence or an optional, or no data set
      value.set_name(model.graph().input(i).name());
      *model.mutable_graph()->add_initializer() = value;
    }
    lifted += expectSplitEqualsWholeParse(model.SerializeAsString(), 1, dir.filename().string() + " with initializers",
                                          true);
  }
  EXPECT_GT(models, 500u);
  EXPECT_GT(lifted, 500u);
}

TEST(OnnxPayloads, SplitEqualsWholeParseOnTheFuzzRegressions) {
  size_t inputs = 0;
  for (const auto &entry : fs::directory_iterator(KILN_ONNX_FUZZ_REGRESSIONS_DIR))
    if (entry.is_regular_file()) {
      ++inputs;
      std::string bytes = readBytes(entry.path());
      expectSplitEqualsWholeParse(bytes, 1, entry.path().filename());
      expectSplitEqualsWholeParse(bytes, frontend::kMinLiftedPayloadBytes, entry.path().filename());
    }
  EXPECT_GT(inputs, 10u);
}

/// Random bytes of `dtype` and `shape` whose values are all valid (bools 0 or 2: true need not be 1 on disk).
Tensor randomValues(DType dtype, const Shape &shape, uint64_t seed) {
  Tensor value = randomTensor({dtype, shape}, seed);
  if (dtype == DType::Bool)
    for (int64_t i = 0; i < value.numElements(); ++i)
      value.dataAs<uint8_t>()[i] *= 2;
  return value;
}

/// A model whose outputs are its initializers: large ones in raw_data (f32, int16 widened to
/// int32, bools stored as 0/2), one large in float_data, a small one in raw_data and one in
/// an external file (written to `dir`), each passed through an Identity.
struct LargeInitializerModel {
  ModelBuilder builder;
  std::vector<std::pair<std::string, Tensor>> values; // what each output must be

  explicit LargeInitializerModel(const TempDir &dir) {
    add("big", randomValues(DType::F32, {256, 128}, 1));
    add("second_big", randomValues(DType::F32, {32, 1024}, 2));
    add("typed", randomValues(DType::F32, {128, 160}, 3), false);
    add("small", randomValues(DType::F32, {4}, 4));
    add("flags", randomValues(DType::Bool, {70000}, 5));
    // int16 is held widened to int32: the lifted bytes are read, not adopted.
    Tensor wide = randomValues(DType::I32, {40000}, 6);
    onnx::TensorProto &int16 = *builder.model.mutable_graph()->add_initializer();
    int16.set_name("wide");
    int16.set_data_type(onnx::TensorProto::INT16);
    int16.add_dims(40000);
    std::string stored;
    for (int64_t i = 0; i < wide.numElements(); ++i) {
      auto element = static_cast<int16_t>(wide.dataAs<int32_t>()[i]);
      stored.append(reinterpret_cast<const char *>(&element), sizeof element);
    }
    int16.set_raw_data(stored);
    output("wide", wide, onnx::TensorProto::INT16);
    // External data: read from its file, never lifted.
    Tensor external = randomValues(DType::F32, {16384}, 7);
    dir.write("external.bin", std::string(static_cast<const char *>(external.data()), external.byteSize()));
    onnx::TensorProto &ext = *builder.model.mutable_graph()->add_initializer();
    ext.set_name("external");
    ext.set_data_type(onnx::TensorProto::FLOAT);
    ext.add_dims(16384);
    ext.set_data_location(onnx::TensorProto::EXTERNAL);
    auto *location = ext.add_external_data();
    location->set_key("location");
    location->set_value("external.bin");
    output("external", external);
  }

private:
  void add(const std::string &name, const Tensor &value, bool raw = true) {
    builder.initializer(name, value, raw);
    Tensor held = value;
    if (value.dtype() == DType::Bool) { // kiln holds true as 1
      held = value.clone();
      for (int64_t i = 0; i < held.numElements(); ++i)
        held.dataAs<uint8_t>()[i] = held.dataAs<uint8_t>()[i] != 0;
    }
    output(name, held);
  }
  /// An output holding `value`, declared with its ONNX element type (by default its dtype's).
  void output(const std::string &name, const Tensor &value, int32_t onnxType = 0) {
    builder.node("Identity", {name}, {name + "_out"});
    builder.output(name + "_out", value.dtype(), value.shape());
    if (onnxType)
      builder.model.mutable_graph()->mutable_output()->rbegin()->mutable_type()->mutable_tensor_type()->set_elem_type(
          onnxType);
    values.emplace_back(name, value);
  }
};

void expectOutputsHoldTheValues(const ir::Graph &graph, const LargeInitializerModel &model) {
  std::vector<Tensor> outputs = ir::evaluate(graph, {});
  ASSERT_EQ(outputs.size(), model.values.size());
  for (size_t i = 0; i < outputs.size(); ++i)
    EXPECT_TRUE(outputs[i].identical(model.values[i].second)) << model.values[i].first;
}

TEST(OnnxPayloads, LargeInitializersImportAsTheirValues) {
  TempDir dir;
  LargeInitializerModel model(dir);
  std::string bytes = model.builder.bytes();
  dir.write("m.onnx", bytes);

  // The large raw_data are lifted (big, second_big, flags, wide), nothing else.
  frontend::LiftedPayloads payloads;
  std::optional<std::string> skeleton = frontend::splitOnnxBytes(bytes, payloads);
  ASSERT_TRUE(skeleton);
  std::vector<bool> lifted;
  for (const Tensor &payload : payloads)
    lifted.push_back(payload.defined());
  EXPECT_EQ(lifted, (std::vector<bool>{true, true, false, false, true, true, false}));
  EXPECT_LT(skeleton->size(), 200000u) << "the typed initializer's 80 KB stay, the lifted 410 KB go";
  EXPECT_EQ(expectSplitEqualsWholeParse(bytes, frontend::kMinLiftedPayloadBytes, "generated"), 4u);
  EXPECT_EQ(expectSplitEqualsWholeParse(bytes, 1, "generated"), 5u);

  // The file read split gives the same skeleton and payloads.
  frontend::LiftedPayloads fromFile;
  EXPECT_EQ(frontend::readOnnxFileSplit(dir.file("m.onnx"), 1 << 30, fromFile), *skeleton);
  ASSERT_EQ(fromFile.size(), payloads.size());
  for (size_t i = 0; i < payloads.size(); ++i)
    EXPECT_TRUE(fromFile[i].identical(payloads[i])) << "initializer " << i;

  expectOutputsHoldTheValues(*frontend::importOnnxFile(dir.file("m.onnx")), model);
  frontend::OnnxImportOptions options;
  options.baseDir = dir.path().string();
  expectOutputsHoldTheValues(*frontend::importOnnxBytes(bytes, options), model);
}

void appendVarint(std::string &out, uint64_t value) {
  for (; value >= 0x80; value >>= 7)
    out.push_back(static_cast<char>((value & 0x7f) | 0x80));
  out.push_back(static_cast<char>(value));
}

/// A length-delimited field in protobuf's wire format.
std::string field(uint64_t number, const std::string &payload) {
  std::string out;
  appendVarint(out, number << 3 | 2);
  appendVarint(out, payload.size());
  return out + payload;
}

constexpr uint64_t kModelGraph = 7, kGraphInitializer = 5, kTensorRawData = 9;

/// A model computing y = Identity(w), w declared by `initializerBytes` (a serialised TensorProto
/// appended to the model as a second graph field, which protobuf merges into the first).
std::string modelWithInitializerBytes(const std::string &initializerBytes, int64_t elements) {
  ModelBuilder builder;
  builder.node("Identity", {"w"}, {"y"});
  builder.output("y", DType::F32, {elements});
  return builder.bytes() + field(kModelGraph, field(kGraphInitializer, initializerBytes));
}

std::string rawBytesOf(const Tensor &value) {
  return std::string(static_cast<const char *>(value.data()), value.byteSize());
}

TEST(OnnxPayloads, AGraphFieldSeenTwiceKeepsThePayloadsInInitializerOrder) {
  // protobuf merges the second graph into the first, appending its initializers.
  Tensor a = randomValues(DType::F32, {20000}, 11), b = randomValues(DType::F32, {20000}, 12);
  ModelBuilder builder;
  builder.initializer("a", a);
  builder.node("Sub", {"a", "b"}, {"y"});
  builder.output("y", DType::F32, {20000});
  std::string bytes =
      builder.bytes() + field(kModelGraph, field(kGraphInitializer, tensorProto(b, "b").SerializeAsString()));
  EXPECT_EQ(expectSplitEqualsWholeParse(bytes, frontend::kMinLiftedPayloadBytes, "merged graphs"), 2u);
  std::vector<Tensor> y = ir::evaluate(*frontend::importOnnxBytes(bytes), {});
  for (int64_t i = 0; i < 20000; ++i)
    ASSERT_EQ(y[0].dataAs<float>()[i], a.dataAs<float>()[i] - b.dataAs<float>()[i]) << i;
}

TEST(OnnxPayloads, RawDataTwiceIsParsedWholeAndTheLastWins) {
  Tensor discarded = randomValues(DType::F32, {20000}, 21), kept = randomValues(DType::F32, {20000}, 22);
  std::string tensor = tensorProto(discarded, "w").SerializeAsString() + field(kTensorRawData, rawBytesOf(kept));
  std::string bytes = modelWithInitializerBytes(tensor, 20000);
  frontend::LiftedPayloads payloads;
  EXPECT_FALSE(frontend::splitOnnxBytes(bytes, payloads)) << "a raw_data seen twice is not plain";
  EXPECT_TRUE(payloads.empty());
  std::vector<Tensor> y = ir::evaluate(*frontend::importOnnxBytes(bytes), {});
  EXPECT_TRUE(y[0].identical(kept)) << "protobuf keeps the last raw_data";
}

TEST(OnnxPayloads, AGroupIsParsedWhole) {
  Tensor w = randomValues(DType::F32, {20000}, 31);
  std::string bytes = modelWithInitializerBytes(tensorProto(w, "w").SerializeAsString(), 20000);
  std::string group;
  appendVarint(group, 1000 << 3 | 3); // an unknown field 1000 as a (deprecated) group: start
  appendVarint(group, 1000 << 3 | 4); // and end
  bytes += group;
  frontend::LiftedPayloads payloads;
  EXPECT_FALSE(frontend::splitOnnxBytes(bytes, payloads));
  std::vector<Tensor> y = ir::evaluate(*frontend::importOnnxBytes(bytes), {});
  EXPECT_TRUE(y[0].identical(w)) << "protobuf accepts an unknown group";
}

TEST(OnnxPayloads, MalformedFilesAreRefusedWithAMessage) {
  TempDir dir;
  Tensor w = randomValues(DType::F32, {20000}, 41);
  std::string bytes = modelWithInitializerBytes(tensorProto(w, "w").SerializeAsString(), 20000);
  frontend::LiftedPayloads payloads;
  ASSERT_TRUE(frontend::splitOnnxBytes(bytes, payloads));

  // Cut inside the payload, and inside the tag that announces it.
  for (size_t cut : {bytes.size() - 1000, bytes.size() - 80001, size_t{1}}) {
    std::string truncated = bytes.substr(0, cut);
    EXPECT_FALSE(frontend::splitOnnxBytes(truncated, payloads)) << cut;
    dir.write("cut.onnx", truncated);
    expectError([&] { frontend::importOnnxFile(dir.file("cut.onnx")); }, {"cut.onnx", "malformed, truncated"});
    expectError([&] { frontend::importOnnxBytes(truncated); }, {"malformed, truncated"});
  }
  // A graph that claims more bytes than the file has.
  std::string overrun;
  appendVarint(overrun, kModelGraph << 3 | 2);
  appendVarint(overrun, 1000);
  overrun += std::string(10, '\0');
  EXPECT_FALSE(frontend::splitOnnxBytes(overrun, payloads));
  dir.write("overrun.onnx", overrun);
  expectError([&] { frontend::importOnnxFile(dir.file("overrun.onnx")); }, {"overrun.onnx", "malformed, truncated"});
  // A payload whose size does not match its dims is refused naming the initializer.
  onnx::TensorProto shortRaw = tensorProto(w, "w");
  shortRaw.mutable_raw_data()->resize(79996);
  dir.write("short.onnx", modelWithInitializerBytes(shortRaw.SerializeAsString(), 20000));
  expectError([&] { frontend::importOnnxFile(dir.file("short.onnx")); },
              {"short.onnx", "initializer 'w'", "79996 bytes of raw_data", "80000"});
  // Not a file at all.
  expectError([&] { frontend::importOnnxFile(dir.file("missing.onnx")); }, {"missing.onnx"});
  expectError([&] { frontend::importOnnxFile(dir.path().string()); }, {"regular file"});
}

} // namespace
