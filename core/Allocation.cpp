#include "core/Allocation.h"

#include <sys/mman.h>

#include <algorithm>
#include <cstdlib>

namespace kiln {

void *allocateBlock(size_t bytes) {
  constexpr size_t kLine = 64, kHugePage = size_t{2} << 20;
  const size_t alignment = bytes >= kHugePage ? kHugePage : kLine;
  void *block = nullptr;
  if (posix_memalign(&block, alignment, std::max(bytes, kLine)) != 0)
    return nullptr;
#ifdef MADV_HUGEPAGE
  if (alignment == kHugePage)
    madvise(block, bytes / kHugePage * kHugePage, MADV_HUGEPAGE); // advice only: failure is harmless
#endif
  return block;
}

} // namespace kiln
