// The table of micro-kernel instantiations: every tile of R = 1..6 rows and 1..4 vectors of 16
// columns, with A packed or read in place. Edge tiles get their exact shape, so no FMA is
// spent on rows that do not exist (an M = 49 product runs 8 tiles of 6 rows and one of 1).
#include "runtime/kernels/GemmMicroKernel.h"

#include <utility>

namespace kiln::runtime::kernels::detail {

namespace {

template <bool PackedA, int... Rows, int... Vectors>
constexpr auto makeTable(std::integer_sequence<int, Rows...>, std::integer_sequence<int, Vectors...> vectors) {
  struct Table {
    MicroKernelFn fns[kMaxRows][kMaxVectors];
  } table{};
  auto fillRow = [&](auto rowTag) {
    constexpr int R = decltype(rowTag)::value;
    ((table.fns[R - 1][Vectors - 1] = &microKernelImpl<R, Vectors, PackedA>), ...);
  };
  (fillRow(std::integral_constant<int, Rows>{}), ...);
  (void)vectors;
  return table;
}

using RowCounts = std::integer_sequence<int, 1, 2, 3, 4, 5, 6>;
using VectorCounts = std::integer_sequence<int, 1, 2, 3, 4>;
static_assert(kMaxRows == 6 && kMaxVectors == 4, "update RowCounts and VectorCounts");

const auto kPackedTable = makeTable<true>(RowCounts{}, VectorCounts{});
const auto kInPlaceTable = makeTable<false>(RowCounts{}, VectorCounts{});

} // namespace

MicroKernelFn microKernel(int rows, int vectors, bool packedA) {
  return packedA ? kPackedTable.fns[rows - 1][vectors - 1]
                 : kInPlaceTable.fns[rows - 1][vectors - 1];
}

} // namespace kiln::runtime::kernels::detail
