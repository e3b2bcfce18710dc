// TensorProto decoding: .pb round trips for every kiln dtype through raw_data and through the
// typed fields, size validation, and external data that must stay inside the model's folder.
#include <unistd.h>

#include "OnnxTestModel.h"

using namespace kiln;
using namespace kiln::onnxtest;

namespace {

TEST(OnnxTensor, ProtoFileRoundTripForEveryDType) {
  TempDir dir;
  int n = 0;
  for (DType dtype :
       {DType::F32, DType::F64, DType::F16, DType::BF16, DType::I64, DType::I32, DType::I8, DType::U8, DType::Bool}) {
    Tensor value = randomTensor({dtype, {2, 3}}, 7 + n);
    for (bool raw : {true, false}) {
      std::string name = "t" + std::to_string(n++) + ".pb";
      dir.write(name, tensorProto(value, "x", raw).SerializeAsString());
      Tensor back = frontend::readTensorProtoFile(dir.file(name));
      EXPECT_TRUE(back.identical(value)) << dtypeName(dtype) << (raw ? " raw" : " typed");
    }
  }
  // A scalar and an empty tensor.
  dir.write("s.pb", tensorProto(Tensor::scalar(DType::I64, -5), "s", false).SerializeAsString());
  EXPECT_EQ(frontend::readTensorProtoFile(dir.file("s.pb")).shape(), Shape{});
  dir.write("e.pb", tensorProto(Tensor(DType::F32, {0, 4}), "e").SerializeAsString());
  EXPECT_EQ(frontend::readTensorProtoFile(dir.file("e.pb")).shape(), (Shape{0, 4}));
}

TEST(OnnxTensor, SizeAndTypeErrors) {
  TempDir dir;
  onnx::TensorProto shortRaw = tensorProto(iota(DType::F32, {4}), "w");
  shortRaw.mutable_raw_data()->resize(12);
  dir.write("short.pb", shortRaw.SerializeAsString());
  expectError([&] { frontend::readTensorProtoFile(dir.file("short.pb")); }, {"short.pb", "12 bytes of raw_data", "16"});

  onnx::TensorProto fewer = tensorProto(iota(DType::I64, {3}), "w", false);
  fewer.mutable_int64_data()->RemoveLast();
  dir.write("fewer.pb", fewer.SerializeAsString());
  expectError([&] { frontend::readTensorProtoFile(dir.file("fewer.pb")); }, {"2 values in int64_data", "need 3"});

  onnx::TensorProto wide = tensorProto(iota(DType::U8, {2}), "w", false);
  wide.set_int32_data(1, 300);
  dir.write("wide.pb", wide.SerializeAsString());
  expectError([&] { frontend::readTensorProtoFile(dir.file("wide.pb")); }, {"300", "does not fit u8"});

  onnx::TensorProto strings;
  strings.set_data_type(onnx::TensorProto::STRING);
  strings.add_dims(1);
  strings.add_string_data("hi");
  dir.write("str.pb", strings.SerializeAsString());
  expectError([&] { frontend::readTensorProtoFile(dir.file("str.pb")); }, {"string", "cannot represent"});

  onnx::TensorProto negative = tensorProto(iota(DType::F32, {2}), "w");
  negative.set_dims(0, -2);
  dir.write("neg.pb", negative.SerializeAsString());
  expectError([&] { frontend::readTensorProtoFile(dir.file("neg.pb")); }, {"negative dim"});

  dir.write("junk.pb", std::string("\x0a\xff\xff\xff", 4));
  expectError([&] { frontend::readTensorProtoFile(dir.file("junk.pb")); }, {"junk.pb", "not a valid"});
}

// A model whose initializer w (4 floats) lives at `offset` of an external file.
ModelBuilder externalModel(const std::string &location, int64_t offset) {
  ModelBuilder m(13);
  m.input("x", DType::F32, {4});
  onnx::TensorProto &w = *m.model.mutable_graph()->add_initializer();
  w.set_name("w");
  w.set_data_type(onnx::TensorProto::FLOAT);
  w.add_dims(4);
  w.set_data_location(onnx::TensorProto::EXTERNAL);
  auto addEntry = [&](const std::string &key, const std::string &value) {
    auto *entry = w.add_external_data();
    entry->set_key(key);
    entry->set_value(value);
  };
  addEntry("location", location);
  addEntry("offset", std::to_string(offset));
  addEntry("length", "16");
  m.node("Add", {"x", "w"}, {"y"});
  m.output("y", DType::F32, {4});
  return m;
}

std::string weightBytes() {
  Tensor w = Tensor::fromDoubles(DType::F32, {4}, {10, 20, 30, 40});
  return std::string(8, 'p') + std::string(static_cast<const char *>(w.data()), 16); // 8 bytes of padding first
}

TEST(OnnxTensor, ExternalDataInsideTheFolderLoads) {
  TempDir dir;
  std::filesystem::create_directory(dir.path() / "data");
  dir.write("data/weights.bin", weightBytes());
  dir.write("m.onnx", externalModel("data/weights.bin", 8).bytes());
  auto graph = frontend::importOnnxFile(dir.file("m.onnx"));
  Tensor y = ir::evaluate(*graph, {iota(DType::F32, {4})})[0];
  expectClose(y, {10, 21, 32, 43});
  // Bytes need a folder to resolve against.
  expectError([&] { frontend::importOnnxBytes(externalModel("data/weights.bin", 8).bytes()); }, {"no folder"});
  frontend::OnnxImportOptions options;
  options.baseDir = dir.path().string();
  EXPECT_NO_THROW(frontend::importOnnxBytes(externalModel("data/weights.bin", 8).bytes(), options));
}

TEST(OnnxTensor, ExternalDataEscapesAreRefused) {
  TempDir outside, dir;
  outside.write("secret.bin", weightBytes());
  dir.write("weights.bin", weightBytes());
  auto importWith = [&](const std::string &location, int64_t offset) {
    dir.write("m.onnx", externalModel(location, offset).bytes());
    return frontend::importOnnxFile(dir.file("m.onnx"));
  };
  expectError([&] { importWith(outside.file("secret.bin"), 8); }, {"m.onnx", "initializer 'w'", "absolute path"});
  expectError([&] { importWith("../" + outside.path().filename().string() + "/secret.bin", 8); }, {"'..'"});
  std::filesystem::create_symlink(outside.file("secret.bin"), dir.file("link.bin"));
  expectError([&] { importWith("link.bin", 8); }, {"outside the model's folder"});
  expectError([&] { importWith("weights.bin", 16); }, {"needs bytes [16, 32)", "only 24"});
  expectError([&] { importWith("nothere.bin", 0); }, {"nothere.bin", "cannot be opened"});
  ASSERT_EQ(::link(outside.file("secret.bin").c_str(), dir.file("hard.bin").c_str()), 0);
  expectError([&] { importWith("hard.bin", 8); }, {"2 hard links"});
  // A symlink that stays inside the folder is fine.
  std::filesystem::create_symlink(dir.file("weights.bin"), dir.file("alias.bin"));
  EXPECT_NO_THROW(importWith("alias.bin", 8));
}

} // namespace
