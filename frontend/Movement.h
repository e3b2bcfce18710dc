#pragma once
// Movement and indexing on Vars: reshape (with one -1), permute/transpose, broadcast, slice,
// pad, concat, split, squeeze/unsqueeze, flatten, gather and scatter_add. Axes may be negative
// (counted from the end) everywhere.
#include <string>

#include "frontend/GraphBuilder.h"

namespace kiln::frontend {

/// Reshapes to `shape`; at most one entry may be -1, inferred from the element count.
Var reshape(const Var &x, std::vector<int64_t> shape);
/// Reorders the axes: output axis i is input axis perm[i].
Var permute(const Var &x, std::vector<int64_t> perm);
/// Swaps two axes.
Var transpose(const Var &x, int64_t axis0, int64_t axis1);
/// Broadcasts numpy-style to `shape`.
Var broadcastTo(const Var &x, Shape shape);

/// Slices along `axes` (default: the first starts.size() axes) with `steps` (default 1).
/// Bounds follow numpy: negative ones count from the end, out-of-range ones are clamped.
Var slice(const Var &x, std::vector<int64_t> starts, std::vector<int64_t> ends,
          std::vector<int64_t> axes = {}, std::vector<int64_t> steps = {});
/// `length` elements along `axis` from `start` (torch.narrow).
Var narrow(const Var &x, int64_t axis, int64_t start, int64_t length);

/// Pads with `pads` = [begin of each axis..., end of each axis...] (2 * rank entries, as the
/// IR and ONNX order them, not torch's last-axis-first pairs). `mode` is "constant" (with
/// `value`), "reflect" or "edge".
Var pad(const Var &x, std::vector<int64_t> pads, const std::string &mode = "constant", double value = 0.0);

/// Concatenates along `axis`; operands are promoted to a common dtype.
Var concat(const std::vector<Var> &xs, int64_t axis);
/// Splits along `axis` into pieces of the given sizes (which must sum to the axis size).
std::vector<Var> split(const Var &x, std::vector<int64_t> sizes, int64_t axis = 0);
/// Splits along `axis` into `chunks` pieces of ceil(size / chunks) elements, the last one
/// smaller (torch.chunk; may give fewer pieces than asked).
std::vector<Var> chunk(const Var &x, int64_t chunks, int64_t axis = 0);

/// Removes the size-1 axes in `axes`, or all size-1 axes when `axes` is empty.
Var squeeze(const Var &x, std::vector<int64_t> axes = {});
/// Inserts size-1 axes at the given output positions.
Var unsqueeze(const Var &x, std::vector<int64_t> axes);
Var unsqueeze(const Var &x, int64_t axis);
/// Merges axes start..end (inclusive) into one (torch.flatten).
Var flatten(const Var &x, int64_t start = 0, int64_t end = -1);

/// Picks slices of `x` along `axis` by the integer `indices` (numpy take): the output shape is
/// x.shape[:axis] + indices.shape + x.shape[axis+1:].
Var gather(const Var &x, const Var &indices, int64_t axis);
/// A copy of `x` with `updates` added at `indices` along `axis` (torch scatter_add: indices
/// and updates have one shape).
Var scatterAdd(const Var &x, const Var &indices, const Var &updates, int64_t axis);

} // namespace kiln::frontend
