// allocateBlock (core/Allocation.h): small blocks on a cache line; blocks of 2 MiB and more on
// a 2 MiB boundary and advised as huge pages, which the kernel records in the mapping's
// VmFlags ("hg") when transparent huge pages are available.
#include <gtest/gtest.h>

#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <sstream>
#include <string>

#include "core/Allocation.h"

namespace {

/// The VmFlags line of the /proc/self/smaps entry that contains `address` ("" if not found).
std::string vmFlagsOf(const void *address) {
  std::ifstream smaps("/proc/self/smaps");
  const auto target = reinterpret_cast<uintptr_t>(address);
  std::string line;
  bool inside = false;
  while (std::getline(smaps, line)) {
    uintptr_t begin = 0, end = 0;
    char dash = 0;
    std::istringstream header(line);
    if (header >> std::hex >> begin >> dash >> end && dash == '-' && line.find(':') > line.find(' ')) {
      inside = begin <= target && target < end;
      continue;
    }
    if (inside && line.rfind("VmFlags:", 0) == 0)
      return line;
  }
  return "";
}

bool transparentHugePagesAvailable() {
  std::ifstream setting("/sys/kernel/mm/transparent_hugepage/enabled");
  std::string text;
  std::getline(setting, text);
  return !text.empty() && text.find("[never]") == std::string::npos;
}

} // namespace

TEST(Allocation, SmallBlocksAreCacheLineAligned) {
  for (size_t bytes : {size_t{1}, size_t{63}, size_t{4096}, size_t{1} << 20}) {
    void *block = kiln::allocateBlock(bytes);
    ASSERT_NE(block, nullptr);
    EXPECT_EQ(reinterpret_cast<uintptr_t>(block) % 64, 0u) << bytes << " bytes";
    std::memset(block, 0xab, bytes);
    std::free(block);
  }
}

TEST(Allocation, LargeBlocksSitOnAdvisedHugePages) {
  const size_t bytes = (size_t{5} << 20) + 123; // two whole huge pages and a tail
  auto *block = static_cast<unsigned char *>(kiln::allocateBlock(bytes));
  ASSERT_NE(block, nullptr);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(block) % (size_t{2} << 20), 0u);
  std::memset(block, 1, bytes); // every byte is usable
  EXPECT_EQ(block[bytes - 1], 1);
  if (transparentHugePagesAvailable() && std::ifstream("/proc/self/smaps").good()) {
    const std::string flags = vmFlagsOf(block);
    ASSERT_FALSE(flags.empty()) << "no smaps entry for the block";
    EXPECT_NE(flags.find(" hg"), std::string::npos) << flags;
  }
  std::free(block);
}
