#pragma once
// Large, long-lived blocks of memory: tensor storage and the executables' arenas.
//
// Blocks of 2 MiB and more are 2 MiB aligned and advised as transparent huge pages. With 4 KiB
// pages, a streaming kernel in this machine's VM takes a TLB miss (a two-level page walk) every
// 4 KiB of every operand: ResNet-18's training step (a 700 MB arena) ran its memory-bound
// kernels 2-4x slower (a batch-norm gradient over [8,64,112,112]: 26 ms in the arena against
// 6.5 ms with huge pages), and first touches cost a page fault per 4 KiB page.
#include <cstddef>

namespace kiln {

/// `bytes` (at least 1) of memory aligned to 64 bytes, or to 2 MiB and advised as huge pages
/// when bytes >= 2 MiB; release it with std::free. nullptr when the system has no memory.
void *allocateBlock(size_t bytes);

} // namespace kiln
