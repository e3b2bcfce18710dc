#pragma once
// Graphs with symbolic dims (core/SymbolicDim.h): which ops' inference carries symbols, and
// binding a symbolic graph to extents, which yields the static graph that passes, codegen and
// the runtime compile as before.
//
// A symbolic graph is one graph for every size: its inputs declare named dims (f32[N,3,224,224])
// and inference derives every other type from them, so a type is a polynomial of the symbols.
// Binding gives each symbol an extent, re-runs inference in the copy, and checks that every
// inferred type is the symbolic one evaluated at the binding, so the symbolic graph and every
// static graph bound from it agree by construction.
#include <map>
#include <memory>
#include <optional>
#include <string>

#include "core/SymbolicDim.h"
#include "ir/Graph.h"

namespace kiln::ir {

/// Whether `op`'s inference is written for symbolic operand dims: it copies them, compares
/// them (broadcasting and contractions equate equal expressions), combines them with
/// dimMul/dimAdd, or refuses a symbolic dim it needs the extent of with a kiln::Error naming
/// the op and the dim. Any other op given a symbolic operand is refused by inferTypes before
/// its inference runs, so no unaudited rule ever computes on a symbolic dim's encoding.
bool inferenceHandlesSymbols(OpKind op);

/// Whether attribute `name` of `op` holds dims (reshape's and broadcast's `shape`, resize's
/// `sizes`): binding evaluates the symbolic entries of these, batch tiling the batch's.
bool attrHoldsDims(OpKind op, const std::string &name);

/// True when every value's type in `graph` (kernel bodies included) is static.
bool isStaticGraph(const Graph &graph);

/// The symbol names the graph's inputs mention, sorted.
std::vector<std::string> graphSymbols(const Graph &graph);

/// Extents for the graph's symbols read from concrete input shapes (by input name): each
/// input dim that is exactly one symbol binds it. `given` bindings (kiln-run --dim) come
/// first. Two extents for one symbol are a kiln::Error naming both sources (inputs, or --dim)
/// and the symbol; a rank or constant dim that differs from the input's declared type is an
/// error naming the input.
DimBindings bindingsFromShapes(const Graph &graph, const std::map<std::string, Shape> &inputShapes,
                               const DimBindings &given = {});
/// The same with one optional shape per graph input, in order (for unnamed inputs).
DimBindings bindingsFromShapes(const Graph &graph, const std::vector<std::optional<Shape>> &inputShapes,
                               const DimBindings &given = {});
/// The same for inputs declared as `names` and `types` (a compiled model's specs), without
/// their graph.
DimBindings bindingsFromShapes(const std::vector<std::string> &names, const std::vector<TensorType> &types,
                               const std::vector<std::optional<Shape>> &inputShapes, const DimBindings &given = {});

/// A static copy of `graph` with every symbol replaced by its extent: inputs and dim
/// attributes evaluated, every node's types re-inferred (and checked against the symbolic type
/// evaluated at the binding), the result verified. A symbol without an extent, a binding that
/// names no symbol of the graph, or an op that cannot take the bound sizes is a kiln::Error.
std::unique_ptr<Graph> bindSymbols(const Graph &graph, const DimBindings &bindings);

} // namespace kiln::ir
