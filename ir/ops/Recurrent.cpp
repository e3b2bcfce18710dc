// Recurrences over a whole sequence: rnn_sequence, gru_sequence, lstm_sequence (operands and
// results: ir/ops/Recurrent.h). They are primitives so that codegen can run the time loop
// inside one kernel (the runtime's recurrent kernel) instead of hundreds of small ones; their
// decomposition (ir/ops/RecurrentUnroll.cpp) is the same recurrence unrolled into matmuls and
// elementwise ops, which autodiff differentiates. The reference evaluation below follows ONNX's
// formulas one batch entry and one step at a time, in double, rounding only the results.
#include "ir/ops/Recurrent.h"

#include <cmath>

#include "ir/ops/Common.h"

namespace kiln::ir::ops {

namespace {

struct ActivationName {
  CellActivation kind;
  std::string_view name;
  bool hasAlpha, hasBeta;
  double alphaDefault, betaDefault; // ONNX's defaults
};

// Every activation ONNX's RNN, GRU and LSTM accept, with their parameters.
constexpr ActivationName kActivations[] = {
    {CellActivation::Sigmoid, "Sigmoid", false, false, 0, 0},
    {CellActivation::Tanh, "Tanh", false, false, 0, 0},
    {CellActivation::Relu, "Relu", false, false, 0, 0},
    {CellActivation::LeakyRelu, "LeakyRelu", true, false, 0.01, 0},
    {CellActivation::ThresholdedRelu, "ThresholdedRelu", true, false, 1.0, 0},
    {CellActivation::Elu, "Elu", true, false, 1.0, 0},
    {CellActivation::Softsign, "Softsign", false, false, 0, 0},
    {CellActivation::Softplus, "Softplus", false, false, 0, 0},
    {CellActivation::HardSigmoid, "HardSigmoid", true, true, 0.2, 0.5},
    {CellActivation::Affine, "Affine", true, true, 1.0, 0.0},
    {CellActivation::ScaledTanh, "ScaledTanh", true, true, 1.0, 1.0},
};

const ActivationName &activationEntry(CellActivation kind) {
  for (const ActivationName &entry : kActivations)
    if (entry.kind == kind)
      return entry;
  fail("internal error: unknown cell activation {}", static_cast<int>(kind));
}

std::vector<std::string> splitNames(const std::string &list) {
  std::vector<std::string> names;
  if (list.empty())
    return names;
  size_t start = 0;
  while (true) {
    size_t comma = list.find(',', start);
    names.push_back(list.substr(start, comma == std::string::npos ? std::string::npos : comma - start));
    if (comma == std::string::npos)
      return names;
    start = comma + 1;
  }
}

/// The `activations` attribute (comma-separated ONNX names, functionsPerDirection() per
/// direction, or "" for the defaults) with `activation_alpha` and `activation_beta` (one
/// value per listed function, or empty for ONNX's defaults).
std::vector<CellFunction> readFunctions(const Recurrence &r, const AttrMap &attrs) {
  int64_t count = r.functionsPerDirection() * r.directions;
  std::vector<std::string> names = splitNames(attrString(attrs, "activations"));
  const std::vector<double> &alphas = attrFloats(attrs, "activation_alpha");
  const std::vector<double> &betas = attrFloats(attrs, "activation_beta");
  std::vector<CellFunction> functions;
  if (names.empty()) {
    if (!alphas.empty() || !betas.empty())
      fail("activation_alpha and activation_beta need 'activations' to name the functions they belong to");
    for (int64_t d = 0; d < r.directions; ++d)
      for (int64_t i = 0; i < r.functionsPerDirection(); ++i)
        functions.push_back({i == 0 ? CellActivation::Sigmoid : CellActivation::Tanh});
    if (r.cell == CellKind::Rnn) // an RNN's one function is tanh
      for (CellFunction &f : functions)
        f.kind = CellActivation::Tanh;
    return functions;
  }
  if (static_cast<int64_t>(names.size()) != count)
    fail("'activations' needs {} names ({} per direction), got {}", count, r.functionsPerDirection(), names.size());
  auto sized = [&](const std::vector<double> &values, const char *what) {
    if (!values.empty() && values.size() != names.size())
      fail("'{}' needs one value per activation ({}), got {}", what, names.size(), values.size());
  };
  sized(alphas, "activation_alpha");
  sized(betas, "activation_beta");
  for (size_t i = 0; i < names.size(); ++i) {
    const ActivationName *entry = nullptr;
    for (const ActivationName &candidate : kActivations)
      if (candidate.name == names[i])
        entry = &candidate;
    if (!entry)
      fail("activation '{}' is not one of the recurrent activations", names[i]);
    CellFunction f{entry->kind};
    f.alpha = entry->hasAlpha ? (alphas.empty() ? entry->alphaDefault : alphas[i]) : 0;
    f.beta = entry->hasBeta ? (betas.empty() ? entry->betaDefault : betas[i]) : 0;
    functions.push_back(f);
  }
  return functions;
}

void expectType(const TensorType &type, DType dtype, const Shape &shape, const char *what) {
  if (type.dtype != dtype || type.shape != shape)
    fail("{} must be {}{}, got {}", what, dtypeName(dtype), shapeToString(shape), type.toString());
}

double sigmoid(double x) { return 1 / (1 + std::exp(-x)); }

/// Runs direction d of batch entry n. Tensors are read and written as doubles by flat index.
void evalEntry(const Recurrence &r, const std::vector<Tensor> &in, int64_t d, int64_t n, std::vector<Tensor> &out) {
  const int64_t T = r.steps, B = r.batch, H = r.hidden, G = r.gates, D = r.directions;
  const Tensor &xw = in[0], &weights = in[1], &bias = in[2];
  auto clip = [&](double v) { return r.clip > 0 ? std::min(std::max(v, -r.clip), r.clip) : v; };
  auto f = [&](int64_t index, double v) { return applyCellFunction(r.function(d, index), v); };
  std::vector<double> h(static_cast<size_t>(H)), c(static_cast<size_t>(H), 0.0);
  for (int64_t j = 0; j < H; ++j) {
    h[j] = in[3].getDouble((d * B + n) * H + j);
    if (r.cell == CellKind::Lstm)
      c[j] = in[4].getDouble((d * B + n) * H + j);
  }
  // Row `row` of h R^T + Rb for a state `state`.
  auto recurrent = [&](int64_t row, const std::vector<double> &state) {
    double sum = bias.getDouble(d * G * H + row);
    for (int64_t i = 0; i < H; ++i)
      sum += state[i] * weights.getDouble((d * G * H + row) * H + i);
    return sum;
  };
  auto input = [&](int64_t t, int64_t row) { return xw.getDouble((t * B + n) * D * G * H + d * G * H + row); };
  auto peephole = [&](int64_t gate, int64_t j) {
    return r.peepholes ? in[5].getDouble(d * 3 * H + gate * H + j) : 0.0;
  };
  for (int64_t k = 0; k < T; ++k) {
    int64_t t = r.backwards(d) ? T - 1 - k : k;
    int64_t yBase = ((t * B + n) * D + d) * H;
    if (!r.lengths.empty() && t >= r.lengths[n]) { // past the entry's end: state kept, output 0
      for (int64_t j = 0; j < H; ++j)
        out[0].setDouble(yBase + j, 0.0);
      continue;
    }
    std::vector<double> next(static_cast<size_t>(H)), nextCell = c;
    if (r.cell == CellKind::Rnn) {
      for (int64_t j = 0; j < H; ++j)
        next[j] = f(0, clip(input(t, j) + recurrent(j, h)));
    } else if (r.cell == CellKind::Gru) {
      std::vector<double> z(static_cast<size_t>(H)), reset(static_cast<size_t>(H)), gated(static_cast<size_t>(H));
      for (int64_t j = 0; j < H; ++j) {
        z[j] = f(0, clip(input(t, j) + recurrent(j, h)));
        reset[j] = f(0, clip(input(t, H + j) + recurrent(H + j, h)));
        gated[j] = reset[j] * h[j];
      }
      for (int64_t j = 0; j < H; ++j) {
        double candidate = r.linearBeforeReset ? input(t, 2 * H + j) + reset[j] * recurrent(2 * H + j, h)
                                               : input(t, 2 * H + j) + recurrent(2 * H + j, gated);
        next[j] = (1 - z[j]) * f(1, clip(candidate)) + z[j] * h[j];
      }
    } else {
      for (int64_t j = 0; j < H; ++j) {
        double i = f(0, clip(input(t, j) + recurrent(j, h) + peephole(0, j) * c[j]));
        double forget = r.inputForget ? 1 - i : f(0, clip(input(t, 2 * H + j) + recurrent(2 * H + j, h) +
                                                          peephole(2, j) * c[j]));
        double candidate = f(1, clip(input(t, 3 * H + j) + recurrent(3 * H + j, h)));
        nextCell[j] = forget * c[j] + i * candidate;
        double o = f(0, clip(input(t, H + j) + recurrent(H + j, h) + peephole(1, j) * nextCell[j]));
        next[j] = o * f(2, nextCell[j]);
      }
    }
    h = next;
    c = nextCell;
    for (int64_t j = 0; j < H; ++j)
      out[0].setDouble(yBase + j, h[j]);
  }
  for (int64_t j = 0; j < H; ++j) {
    out[1].setDouble((d * B + n) * H + j, h[j]);
    if (r.cell == CellKind::Lstm)
      out[2].setDouble((d * B + n) * H + j, c[j]);
  }
}

std::vector<TensorType> inferRecurrence(OpKind op, const std::vector<TensorType> &in, const AttrMap &attrs) {
  Recurrence r = readRecurrence(op, in, attrs);
  DType dtype = in[0].dtype;
  Shape state{r.directions, r.batch, r.hidden};
  std::vector<TensorType> out{{dtype, {r.steps, r.batch, r.directions, r.hidden}}, {dtype, state}};
  if (r.cell == CellKind::Lstm)
    out.push_back({dtype, state});
  return out;
}

std::vector<Tensor> evalRecurrence(OpKind op, const std::vector<Tensor> &in, const AttrMap &attrs,
                                   const std::vector<TensorType> &outTypes) {
  std::vector<TensorType> inTypes;
  for (const Tensor &t : in)
    inTypes.push_back(t.type());
  Recurrence r = readRecurrence(op, inTypes, attrs);
  std::vector<Tensor> out;
  for (const TensorType &type : outTypes)
    out.emplace_back(type);
  for (int64_t d = 0; d < r.directions; ++d)
    for (int64_t n = 0; n < r.batch; ++n)
      evalEntry(r, in, d, n, out);
  return out;
}

template <OpKind Kind> OpDef defineRecurrence() {
  OpDef def;
  def.attrs = {stringAttr("direction", "forward"), floatAttr("clip", 0.0), stringAttr("activations", ""),
               floatsAttr("activation_alpha", std::vector<double>{}),
               floatsAttr("activation_beta", std::vector<double>{}), intsAttr("lengths", std::vector<int64_t>{})};
  if (Kind == OpKind::GruSequence)
    def.attrs.push_back(intAttr("linear_before_reset", 0));
  if (Kind == OpKind::LstmSequence)
    def.attrs.push_back(intAttr("input_forget", 0));
  def.infer = [](const std::vector<TensorType> &in, const AttrMap &attrs) { return inferRecurrence(Kind, in, attrs); };
  def.eval = [](const std::vector<Tensor> &in, const AttrMap &attrs, const std::vector<TensorType> &out) {
    return evalRecurrence(Kind, in, attrs, out);
  };
  def.decompose = [](Builder &b, const std::vector<Value *> &in, const AttrMap &attrs) {
    return unrollRecurrence(b, Kind, in, attrs);
  };
  // The runtime's recurrent kernel computes f32: other dtypes run unrolled, as matmuls and
  // elementwise ops that codegen lowers in them.
  def.expandIf = [](const std::vector<TensorType> &in, const AttrMap &) { return in[0].dtype != DType::F32; };
  return def;
}

} // namespace

CellKind cellOf(OpKind op) {
  switch (op) {
  case OpKind::RnnSequence: return CellKind::Rnn;
  case OpKind::GruSequence: return CellKind::Gru;
  case OpKind::LstmSequence: return CellKind::Lstm;
  default: fail("internal error: {} is not a recurrent op", opName(op));
  }
}

int64_t gateCount(CellKind cell) { return cell == CellKind::Rnn ? 1 : cell == CellKind::Gru ? 3 : 4; }

std::string_view cellActivationName(CellActivation kind) { return activationEntry(kind).name; }

bool Recurrence::defaultFunctions() const {
  for (int64_t d = 0; d < directions; ++d)
    for (int64_t i = 0; i < functionsPerDirection(); ++i) {
      CellActivation want = i == 0 && cell != CellKind::Rnn ? CellActivation::Sigmoid : CellActivation::Tanh;
      if (function(d, i).kind != want)
        return false;
    }
  return true;
}

Recurrence readRecurrence(OpKind op, const std::vector<TensorType> &in, const AttrMap &attrs) {
  Recurrence r;
  r.cell = cellOf(op);
  r.gates = gateCount(r.cell);
  const TensorType &xw = in[0], &weights = in[1];
  if (!isFloat(xw.dtype) || xw.rank() != 3)
    fail("xw must be a float [steps, batch, directions * gates * hidden] tensor, got {}", xw.toString());
  if (weights.rank() != 3)
    fail("r must be [directions, gates * hidden, hidden], got {}", weights.toString());
  const std::string &direction = attrString(attrs, "direction");
  if (direction != "forward" && direction != "reverse" && direction != "bidirectional")
    fail("direction must be forward, reverse or bidirectional, got '{}'", direction);
  r.directions = direction == "bidirectional" ? 2 : 1;
  r.reverse = direction == "reverse";
  r.steps = xw.shape[0];
  r.batch = xw.shape[1];
  r.hidden = weights.shape[2];
  // The hidden size is a dim (at most 2^48), so gates * hidden (gates <= 4) and the direction
  // products below cannot overflow.
  int64_t width = r.gates * r.hidden;
  expectType(weights, xw.dtype, {r.directions, width, r.hidden}, "r");
  expectType(xw, xw.dtype, {r.steps, r.batch, checkedMul(r.directions, width, "directions * gates * hidden")},
             "xw");
  expectType(in[2], xw.dtype, {r.directions, width}, "rb");
  expectType(in[3], xw.dtype, {r.directions, r.batch, r.hidden}, "h0");
  if (r.cell == CellKind::Lstm) {
    expectType(in[4], xw.dtype, {r.directions, r.batch, r.hidden}, "c0");
    r.peepholes = in.size() > 5;
    if (r.peepholes)
      expectType(in[5], xw.dtype, {r.directions, 3 * r.hidden}, "p");
  }
  r.clip = attrFloat(attrs, "clip");
  if (!(r.clip >= 0))
    fail("clip must be >= 0 (0: no clipping), got {}", r.clip);
  r.lengths = attrInts(attrs, "lengths");
  if (!r.lengths.empty()) {
    if (static_cast<int64_t>(r.lengths.size()) != r.batch)
      fail("lengths has {} entries for a batch of {}", r.lengths.size(), r.batch);
    for (int64_t length : r.lengths)
      if (length < 0 || length > r.steps)
        fail("lengths holds {}, outside [0, {}] (the steps)", length, r.steps);
  }
  if (r.cell == CellKind::Gru)
    r.linearBeforeReset = attrFlag(attrs, "linear_before_reset");
  if (r.cell == CellKind::Lstm)
    r.inputForget = attrFlag(attrs, "input_forget");
  r.functions = readFunctions(r, attrs);
  return r;
}

double applyCellFunction(const CellFunction &f, double x) {
  switch (f.kind) {
  case CellActivation::Sigmoid: return sigmoid(x);
  case CellActivation::Tanh: return std::tanh(x);
  case CellActivation::Relu: return x > 0 ? x : 0;
  case CellActivation::LeakyRelu: return x >= 0 ? x : f.alpha * x;
  case CellActivation::ThresholdedRelu: return x > f.alpha ? x : 0;
  case CellActivation::Elu: return x >= 0 ? x : f.alpha * std::expm1(x);
  case CellActivation::Softsign: return x / (1 + std::fabs(x));
  case CellActivation::Softplus: return std::max(x, 0.0) + std::log1p(std::exp(-std::fabs(x))); // no overflow
  case CellActivation::HardSigmoid: return std::max(0.0, std::min(1.0, f.alpha * x + f.beta));
  case CellActivation::Affine: return f.alpha * x + f.beta;
  case CellActivation::ScaledTanh: return f.alpha * std::tanh(f.beta * x);
  }
  return x;
}

} // namespace kiln::ir::ops

namespace kiln::ir {

OpDef defineRnnSequence() { return ops::defineRecurrence<OpKind::RnnSequence>(); }
OpDef defineGruSequence() { return ops::defineRecurrence<OpKind::GruSequence>(); }
OpDef defineLstmSequence() { return ops::defineRecurrence<OpKind::LstmSequence>(); }

} // namespace kiln::ir
