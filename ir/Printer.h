#pragma once
// The text form of the IR (.kir). Every graph prints to text that parses back to an equal
// graph (ir/Parser.h); golden tests are written in it.
//
//   graph @mlp(%x: f32[4,8]) -> (f32[4,2]) {
//     %w = param "fc1.weight" : f32[2,8]
//     %b = param "fc1.bias" {value = tensor<f32[2]>[0.5, -1.25]} : f32[2]
//     %0 = linear(%x, %w, %b) : f32[4,2]
//     %1, %2 = split(%0) {axis = 1, sizes = [1, 1]} : f32[4,1], f32[4,1]
//     return %1, %2
//   }
//
// An output whose name differs from its value's printed name carries it: `return %y2 as "y"`
// (a model that declares output y as a copy of y2), `return %x as "a", %x as "b"`.
//
// Types are always printed; attributes print sorted by name and only where they differ from
// the op's default. Floats print in the shortest form that reads back to the same bits.
//
// A kernel node (a fusion group) prints its body after its result types, indented: the body's
// inputs (one per operand, same types) after '^', its statements, and its return (one value
// per result). Body value names are scoped to the body and may repeat outer names:
//
//     %4 = kernel(%x, %w, %b) {rule = "contraction+epilogue"} : f32[8,4] {
//       ^(%a: f32[8,16], %w: f32[16,4], %b: f32[4]):
//       %0 = matmul(%a, %w) : f32[8,4]
//       %1 = add(%0, %b) : f32[8,4]
//       return %1
//     }
#include <string>
#include <string_view>
#include <unordered_map>

#include "ir/Graph.h"

namespace kiln::ir {

struct PrintOptions {
  /// Tensors (constant values, parameter initial values) with more elements than this print
  /// as `elided` unless keepLargeTensors is set; such text parses back only for parameters.
  int64_t maxInlineElements = 16;
  bool keepLargeTensors = false;
};

std::string printGraph(const Graph &graph, const PrintOptions &options = {});

/// The names (without '%') the printer gives every value of `graph` (not of kernel bodies,
/// which have names of their own: call this on the body): a value's own name,
/// sanitised to [A-Za-z0-9_.] (a name of digits only gets a 'v' prefix) and made unique with
/// a "_N" suffix; unnamed graph inputs become "argN"; other unnamed values are numbered in
/// order of definition. Deterministic; DOT and JSON export use the same names.
std::unordered_map<const Value *, std::string> printedValueNames(const Graph &graph);

/// Literal syntax shared with the exporters.
/// A double in its shortest exact form, always with '.', an exponent, inf or nan: "1.0", "1e-05".
std::string formatDouble(double value);
/// The same for a float (shortest form that reads back to the same float).
std::string formatFloat(float value);
/// A double-quoted string with \" \\ \n \t \r and \xHH escapes for other control bytes.
std::string quoteString(std::string_view text);
/// `tensor<f32[2]>[1.0, 2.0]`, or `tensor<f32[512,1024]> elided` when it is too large.
std::string formatTensor(const Tensor &tensor, const PrintOptions &options = {});
/// One attribute value as the text form writes it.
std::string formatAttribute(const Attribute &attr, const PrintOptions &options = {});

} // namespace kiln::ir
