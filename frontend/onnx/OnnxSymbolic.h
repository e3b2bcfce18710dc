#pragma once
// Symbolic dims in ONNX import: a graph input's `dim_param` becomes a kiln symbol
// (core/SymbolicDim.h) when OnnxImportOptions::keepSymbolicDims asks for it, and only ONNX
// ops whose mappings were checked to pass symbols through (copying dims, or handing them to
// kiln ops whose inference handles symbols) may see a symbolic operand. Any other op on a
// symbolic operand is a kiln::Error naming the op type, so no mapping computes on a
// symbol's encoding; fixing the dims (--dim, input shapes) imports those models as before.
#include <string_view>

#include <onnx/onnx_pb.h>

#include "frontend/onnx/OnnxContext.h"

namespace kiln::frontend {

/// Whether the mapping of `opType` (default domain) handles symbolic operand dims.
bool mappingHandlesSymbols(std::string_view opType);

/// A kiln::Error unless every operand of `node` is static or its mapping handles symbols.
void checkSymbolicOperands(const ImportContext &ctx, const onnx::NodeProto &node);

/// Whether `value` is an integer tensor holding a symbolic dim: what Shape gives for a
/// symbolic input (torch's dynamic axes export x.size(0) as Shape -> Gather -> Concat ->
/// Reshape). Such values only move: the ops that fold them (Gather, Concat, Unsqueeze,
/// Squeeze, Slice, Identity, Reshape and Cast to int64 copy elements) and the mappings that
/// read them back as dims (Reshape's and Expand's target shape) may see one; arithmetic on a
/// symbolic dim (x.size(0) * 2) is not supported yet.
bool holdsSymbolicDims(const Tensor &value);

/// A kiln::Error naming `node` when one of its known operands holds a symbolic dim and the
/// node is not among the ops that move such values, read them as dims or compute on them
/// (foldDimValues).
void checkDimValuedOperands(const ImportContext &ctx, const onnx::NodeProto &node);

/// Folds `node` when every operand is known, one holds a symbolic dim, and the node computes
/// on dims: Mul, Add and Sub as polynomials of the symbols, Div when exact (x.size(0) * heads,
/// c // heads), Equal where it is decidable (a dim never equals a negative constant: torch's
/// Expand exports compare its shape with -1), and Where selecting elements. Defines the result
/// as known and returns true; false when the node is not such a node. A kiln::Error when the
/// result cannot be known (N == 3, N / 2).
bool foldDimValues(ImportContext &ctx, const onnx::NodeProto &node);

} // namespace kiln::frontend
