#include "ir/Builder.h"

#include "core/Error.h"
#include "core/ShapeMath.h"
#include "ir/SymbolicShapes.h"

namespace kiln::ir {

std::string describeCall(OpKind op, const std::vector<TensorType> &inputs) {
  std::vector<std::string> types;
  for (auto &t : inputs)
    types.push_back(t.toString());
  return fmt::format("{}({})", opName(op), fmt::join(types, ", "));
}

AttrMap completeAttrs(OpKind op, AttrMap attrs) {
  const OpDef &def = opDef(op);
  for (auto &entry : attrs) {
    // Named references rather than a structured binding: clang 14 cannot capture bindings.
    const std::string &name = entry.first;
    Attribute &value = entry.second;
    auto spec = std::find_if(def.attrs.begin(), def.attrs.end(), [&](auto &s) { return s.name == name; });
    if (spec == def.attrs.end())
      fail("unknown attribute '{}'", name);
    AttrKind given = attrKind(value);
    if (given == spec->kind)
      continue;
    if (given == AttrKind::Int && spec->kind == AttrKind::Float) {
      value = static_cast<double>(std::get<int64_t>(value));
    } else if (given == AttrKind::Ints && spec->kind == AttrKind::Floats) {
      auto &ints = std::get<std::vector<int64_t>>(value);
      value = std::vector<double>(ints.begin(), ints.end());
    } else if (given == AttrKind::Floats && spec->kind == AttrKind::Ints &&
               std::get<std::vector<double>>(value).empty()) {
      value = std::vector<int64_t>{};
    } else {
      fail("attribute '{}' must be {}, got {}", name, attrKindName(spec->kind), attrKindName(given));
    }
  }
  for (const AttrSpec &spec : def.attrs) {
    if (attrs.count(spec.name))
      continue;
    if (!spec.defaultValue)
      fail("missing required attribute '{}'", spec.name);
    attrs[spec.name] = *spec.defaultValue;
  }
  return attrs;
}

std::vector<TensorType> inferTypes(OpKind op, const std::vector<TensorType> &inputs, const AttrMap &attrs) {
  const OpTraits &traits = opTraits(op);
  int n = static_cast<int>(inputs.size());
  if (n < traits.minInputs || (traits.maxInputs >= 0 && n > traits.maxInputs)) {
    if (traits.minInputs == traits.maxInputs)
      fail("{}: expects {} inputs, got {}", describeCall(op, inputs), traits.minInputs, n);
    if (traits.maxInputs < 0)
      fail("{}: expects at least {} inputs, got {}", describeCall(op, inputs), traits.minInputs, n);
    fail("{}: expects {} to {} inputs, got {}", describeCall(op, inputs), traits.minInputs,
         traits.maxInputs, n);
  }
  try {
    // Inference may assume operands within kiln's size limit (core/ShapeMath.h) and checks its
    // own arithmetic; the limit on results is checked here, once for every op.
    for (const TensorType &input : inputs)
      checkShapeWithinLimit(input.shape, "operand shape");
    if (!inferenceHandlesSymbols(op))
      for (size_t i = 0; i < inputs.size(); ++i)
        if (!inputs[i].isStatic())
          fail("{} does not take symbolic dims yet (operand {} is {}); bind the symbols first "
               "(kiln-run --dim)",
               opName(op), i, inputs[i].toString());
    std::vector<TensorType> outputs = opDef(op).infer(inputs, attrs);
    for (const TensorType &output : outputs)
      checkShapeWithinLimit(output.shape, "result shape");
    return outputs;
  } catch (const Error &e) {
    throw Error(fmt::format("{}: {}", describeCall(op, inputs), e.what()));
  }
}

Node *Builder::createNode(OpKind op, const std::vector<Value *> &inputs, AttrMap attrs) {
  // A kernel's types and meaning are its body's, which the builder cannot see.
  if (op == OpKind::Kernel)
    fail("kernel: kernel nodes cannot be built with the Builder; group existing nodes with "
         "ir::outlineKernel (ir/KernelOutline.h)");
  std::vector<TensorType> inputTypes;
  for (Value *input : inputs) {
    if (!input)
      fail("{}: an input is null", opName(op));
    if (input->graph() != &graph_)
      fail("{}: an input belongs to another graph", opName(op));
    inputTypes.push_back(input->type());
  }
  AttrMap complete;
  try {
    complete = completeAttrs(op, std::move(attrs));
  } catch (const Error &e) {
    throw Error(fmt::format("{}: {}", describeCall(op, inputTypes), e.what()));
  }
  std::vector<TensorType> outputTypes = inferTypes(op, inputTypes, complete);
  return graph_.createNode(op, inputs, std::move(complete), outputTypes, insertBefore_);
}

std::vector<Value *> Builder::createMulti(OpKind op, const std::vector<Value *> &inputs, AttrMap attrs) {
  return createNode(op, inputs, std::move(attrs))->outputs();
}

Value *Builder::create(OpKind op, const std::vector<Value *> &inputs, AttrMap attrs) {
  Node *node = createNode(op, inputs, std::move(attrs));
  if (node->numOutputs() != 1)
    fail("{} produces {} outputs; use createMulti", opName(op), node->numOutputs());
  return node->output();
}

Value *Builder::constant(const Tensor &value) {
  if (!value.defined())
    fail("constant: the tensor is undefined");
  return create(OpKind::Constant, {}, {{"value", value}});
}

Value *Builder::scalar(DType dtype, double value) { return constant(Tensor::scalar(dtype, value)); }

Value *Builder::param(const std::string &name, const TensorType &type, const Tensor &init) {
  if (init.defined() && init.type() != type)
    fail("param '{}': initial value has type {}, declared {}", name, init.type().toString(),
         type.toString());
  AttrMap attrs{{"name", name}, {"dtype", type.dtype}, {"shape", type.shape}};
  if (init.defined())
    attrs["value"] = init;
  return create(OpKind::Param, {}, std::move(attrs));
}

} // namespace kiln::ir
