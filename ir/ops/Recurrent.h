#pragma once
// The recurrent ops rnn_sequence, gru_sequence and lstm_sequence (ir/ops/Recurrent.cpp): one
// node runs a cell over a whole sequence, in one or both directions, from the input
// projections of every step. What their operands and attributes mean is read here once, for
// the reference evaluator, the unrolled form (the decomposition autodiff differentiates) and
// codegen (which calls the runtime's recurrent kernel).
//
// Operands, D directions, B batch entries, T steps, H hidden units, G gates per cell (RNN 1,
// GRU 3, LSTM 4), all one float dtype:
//   0  xw  [T, B, D*G*H]  X_t W^T + Wb of every step: direction d's gates at columns
//                         [d*G*H, (d+1)*G*H), in ONNX's gate order (GRU z, r, h; LSTM i, o, f, c)
//   1  r   [D, G*H, H]    recurrent weights (ONNX's R)
//   2  rb  [D, G*H]       recurrent bias (ONNX's Rb)
//   3  h0  [D, B, H]      initial hidden state
//   4  c0  [D, B, H]      initial cell state (lstm_sequence only)
//   5  p   [D, 3*H]       peepholes i, o, f (lstm_sequence, optional)
// Results: y [T, B, D, H] (each step's hidden states, a batch entry's directions side by side:
// what the next layer reads as [T, B, D*H]; ONNX's Y is y permuted to [T, D, B, H]), h_n
// [D, B, H] (the last states), and for lstm_sequence c_n [D, B, H]. The cell formulas are
// ONNX's (RNN, GRU, LSTM operators).
#include <string_view>
#include <vector>

#include "ir/Attribute.h"
#include "ir/Op.h"

namespace kiln::ir {
class Builder;
class Value;
} // namespace kiln::ir

namespace kiln::ir::ops {

enum class CellKind { Rnn, Gru, Lstm };

/// ONNX's activation functions for recurrent cells, by their ONNX names.
enum class CellActivation {
  Sigmoid,
  Tanh,
  Relu,
  LeakyRelu,
  ThresholdedRelu,
  Elu,
  Softsign,
  Softplus,
  HardSigmoid,
  Affine,
  ScaledTanh
};

/// One activation with its parameters (0 where the function takes none).
struct CellFunction {
  CellActivation kind = CellActivation::Sigmoid;
  double alpha = 0, beta = 0;
};

/// A recurrent node's shapes and attributes, checked.
struct Recurrence {
  CellKind cell = CellKind::Lstm;
  int64_t steps = 0, batch = 0, hidden = 0, directions = 1, gates = 1;
  /// One direction run from the last step to the first (direction "reverse"); with two
  /// directions the second always runs backwards.
  bool reverse = false;
  double clip = 0; // 0: none
  bool linearBeforeReset = false, inputForget = false, peepholes = false;
  /// Per batch entry, the steps it runs (ONNX's sequence_lens); empty: every entry runs all.
  std::vector<int64_t> lengths;
  /// functionsPerDirection() per direction, in ONNX's order (f, g, h).
  std::vector<CellFunction> functions;

  int64_t functionsPerDirection() const { return cell == CellKind::Rnn ? 1 : cell == CellKind::Gru ? 2 : 3; }
  const CellFunction &function(int64_t direction, int64_t index) const {
    return functions[static_cast<size_t>(direction * functionsPerDirection() + index)];
  }
  /// Whether direction `d` runs from the last step to the first.
  bool backwards(int64_t d) const { return reverse || d == 1; }
  /// Whether every function is the cell's default (sigmoid, then tanh).
  bool defaultFunctions() const;
};

CellKind cellOf(OpKind op);
int64_t gateCount(CellKind cell);
std::string_view cellActivationName(CellActivation kind);

/// Reads a recurrent op's operand types and attributes and checks them against each other;
/// throws kiln::Error naming the operand or attribute that does not fit.
Recurrence readRecurrence(OpKind op, const std::vector<TensorType> &inputs, const AttrMap &attrs);

/// f(x) for one activation, as ONNX defines it.
double applyCellFunction(const CellFunction &f, double x);

/// The unrolled form (ir/ops/RecurrentUnroll.cpp): every step as matmuls and elementwise ops.
std::vector<Value *> unrollRecurrence(Builder &b, OpKind op, const std::vector<Value *> &inputs,
                                      const AttrMap &attrs);

} // namespace kiln::ir::ops
