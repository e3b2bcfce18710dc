#pragma once
// Helpers for the ONNX importer tests: a small builder of onnx::ModelProto (inputs, outputs,
// nodes with attributes, initializers), serialisation, import and evaluation. Models are made
// in C++ with ONNX's own protobuf classes, so the tests need no Python and no files beyond
// what they write into a temporary folder.
#include <gtest/gtest.h>

#include <onnx/onnx_pb.h>

#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "core/Error.h"
#include "frontend/onnx/OnnxImporter.h"
#include "frontend/onnx/OnnxTensor.h"
#include "ir/Evaluator.h"
#include "tests/TempDir.h"

namespace kiln::onnxtest {

/// A TensorProto holding `value`, in raw_data or in the typed field the spec assigns.
inline onnx::TensorProto tensorProto(const Tensor &value, const std::string &name = "", bool raw = true) {
  onnx::TensorProto proto;
  proto.set_name(name);
  proto.set_data_type(frontend::dtypeToOnnx(value.dtype()));
  for (int64_t dim : value.shape())
    proto.add_dims(dim);
  if (raw) {
    proto.set_raw_data(std::string(static_cast<const char *>(value.data()), value.byteSize()));
    return proto;
  }
  for (int64_t i = 0; i < value.numElements(); ++i) {
    switch (value.dtype()) {
    case DType::F32:
      proto.add_float_data(static_cast<float>(value.getDouble(i)));
      break;
    case DType::F64:
      proto.add_double_data(value.getDouble(i));
      break;
    case DType::I64:
      proto.add_int64_data(value.getInt(i));
      break;
    case DType::F16:
    case DType::BF16:
      proto.add_int32_data(value.dataAs<uint16_t>()[i]);
      break;
    default:
      proto.add_int32_data(static_cast<int32_t>(value.getInt(i)));
      break;
    }
  }
  return proto;
}

/// Builds one ONNX model. Dims of -1 in an input or output shape are written symbolic
/// ("d0", "d1", ...), anything else static.
class ModelBuilder {
public:
  explicit ModelBuilder(int64_t opset = 13) {
    model.set_ir_version(8);
    model.set_producer_name("kiln-tests");
    auto *import = model.add_opset_import();
    import->set_domain("");
    import->set_version(opset);
    model.mutable_graph()->set_name("test");
  }

  void input(const std::string &name, DType dtype, const Shape &shape) {
    describe(model.mutable_graph()->add_input(), name, dtype, shape);
  }
  void output(const std::string &name, DType dtype, const Shape &shape) {
    describe(model.mutable_graph()->add_output(), name, dtype, shape);
  }
  void initializer(const std::string &name, const Tensor &value, bool raw = true) {
    *model.mutable_graph()->add_initializer() = tensorProto(value, name, raw);
  }

  onnx::NodeProto &node(const std::string &opType, const std::vector<std::string> &inputs,
                        const std::vector<std::string> &outputs, const std::string &name = "") {
    onnx::NodeProto &node = *model.mutable_graph()->add_node();
    node.set_op_type(opType);
    node.set_name(name);
    for (const auto &in : inputs)
      node.add_input(in);
    for (const auto &out : outputs)
      node.add_output(out);
    return node;
  }

  /// A Constant node producing `value` under `name`.
  void constant(const std::string &name, const Tensor &value) {
    auto &n = node("Constant", {}, {name});
    auto *attr = n.add_attribute();
    attr->set_name("value");
    attr->set_type(onnx::AttributeProto::TENSOR);
    *attr->mutable_t() = tensorProto(value);
  }

  std::string bytes() const { return model.SerializeAsString(); }

  onnx::ModelProto model;

private:
  static void describe(onnx::ValueInfoProto *info, const std::string &name, DType dtype, const Shape &shape) {
    info->set_name(name);
    auto *tensor = info->mutable_type()->mutable_tensor_type();
    tensor->set_elem_type(frontend::dtypeToOnnx(dtype));
    auto *onnxShape = tensor->mutable_shape();
    for (size_t d = 0; d < shape.size(); ++d) {
      auto *dim = onnxShape->add_dim();
      if (shape[d] < 0)
        dim->set_dim_param("d" + std::to_string(d));
      else
        dim->set_dim_value(shape[d]);
    }
  }
};

inline void setInt(onnx::NodeProto &node, const std::string &name, int64_t value) {
  auto *attr = node.add_attribute();
  attr->set_name(name);
  attr->set_type(onnx::AttributeProto::INT);
  attr->set_i(value);
}
inline void setFloat(onnx::NodeProto &node, const std::string &name, float value) {
  auto *attr = node.add_attribute();
  attr->set_name(name);
  attr->set_type(onnx::AttributeProto::FLOAT);
  attr->set_f(value);
}
inline void setInts(onnx::NodeProto &node, const std::string &name, const std::vector<int64_t> &values) {
  auto *attr = node.add_attribute();
  attr->set_name(name);
  attr->set_type(onnx::AttributeProto::INTS);
  for (int64_t v : values)
    attr->add_ints(v);
}
inline void setString(onnx::NodeProto &node, const std::string &name, const std::string &value) {
  auto *attr = node.add_attribute();
  attr->set_name(name);
  attr->set_type(onnx::AttributeProto::STRING);
  attr->set_s(value);
}

inline void setFloats(onnx::NodeProto &node, const std::string &name, const std::vector<float> &values) {
  auto *attr = node.add_attribute();
  attr->set_name(name);
  attr->set_type(onnx::AttributeProto::FLOATS);
  for (float v : values)
    attr->add_floats(v);
}

/// How many nodes of `op` the graph holds.
inline int countOps(const ir::Graph &graph, ir::OpKind op) {
  int count = 0;
  for (const ir::Node *node : graph.nodes())
    count += node->op() == op ? 1 : 0;
  return count;
}

/// The graph's first node of `op`; fails the test (and returns nullptr) when there is none.
inline const ir::Node *findOp(const ir::Graph &graph, ir::OpKind op) {
  for (const ir::Node *node : graph.nodes())
    if (node->op() == op)
      return node;
  ADD_FAILURE() << "no " << ir::opName(op) << " node in the graph";
  return nullptr;
}

inline std::unique_ptr<ir::Graph> import(const ModelBuilder &builder, const frontend::OnnxImportOptions &options = {}) {
  return frontend::importOnnxBytes(builder.bytes(), options, "test.onnx");
}

/// Imports and evaluates the model on `inputs` (in graph-input order).
inline std::vector<Tensor> run(const ModelBuilder &builder, const std::vector<Tensor> &inputs,
                               const frontend::OnnxImportOptions &options = {}) {
  std::unique_ptr<ir::Graph> graph = import(builder, options);
  return ir::evaluate(*graph, inputs);
}

/// 0, 1, 2, ... (times `scale`, plus `offset`) in row-major order.
inline Tensor iota(DType dtype, const Shape &shape, double scale = 1, double offset = 0) {
  std::vector<double> values(static_cast<size_t>(numElements(shape)));
  for (size_t i = 0; i < values.size(); ++i)
    values[i] = offset + scale * static_cast<double>(i);
  return Tensor::fromDoubles(dtype, shape, values);
}

/// Expects `got` to match `want` elementwise within a float tolerance.
inline void expectClose(const Tensor &got, const std::vector<double> &want, double tol = 1e-5) {
  ASSERT_EQ(got.numElements(), static_cast<int64_t>(want.size())) << got.type().toString();
  for (size_t i = 0; i < want.size(); ++i) {
    double value = got.getDouble(static_cast<int64_t>(i));
    if (std::isfinite(want[i]))
      EXPECT_NEAR(value, want[i], tol) << "element " << i;
    else if (std::isnan(want[i]))
      EXPECT_TRUE(std::isnan(value)) << "element " << i << " is " << value;
    else
      EXPECT_EQ(value, want[i]) << "element " << i;
  }
}

/// Runs `body` and expects a kiln::Error whose message contains every one of `words`.
template <typename Body> void expectError(Body body, const std::vector<std::string> &words) {
  try {
    body();
    ADD_FAILURE() << "expected kiln::Error containing '" << words.front() << "'";
  } catch (const Error &e) {
    std::string message = e.what();
    for (const auto &word : words)
      EXPECT_NE(message.find(word), std::string::npos) << "missing '" << word << "' in: " << message;
  }
}

using kiln::test::TempDir;

} // namespace kiln::onnxtest
